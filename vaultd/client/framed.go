package client

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// SealBatchFramed is the media type of the compact answer to a
// [SealBatchRequest]. [Client.SealBatch] asks for it with an Accept
// header; vaultd answers it then, and JSON to every other caller (a
// refusal of the whole batch is always a JSON [ErrorBody]). It carries
// what the JSON [SealBatchResponse] carries, without JSON's field names,
// quoting and base64: most of the CPU a batch's answer costs both sides
// besides the sealing itself.
//
// The body is the number of items, then each item. An unsigned integer is
// a uvarint (encoding/binary), a string or bytes its length then its
// bytes. An item is the byte 'e' then Status, Code, Error and Hint of its
// [ErrorBody]; or the byte 's' then its [SealResponse]: Name, Origin,
// Version, Slot, the number of Sealed and each one's Recipient, Role,
// Slot, Version, Item, Current (one byte, 0 or 1), Ciphertext and SHA256;
// the number of Slots and each one's Slot, Version and State; and Rotation
// as JSON bytes (none when nil). Nothing follows the last item.
const SealBatchFramed = "application/vnd.meshgen.seal-batch.v1"

// AppendSealBatchFramed appends r encoded as [SealBatchFramed] to b: what
// vaultd answers a caller that accepts it. An item with neither Sealed nor
// Error is refused.
func AppendSealBatchFramed(b []byte, r *SealBatchResponse) ([]byte, error) {
	str := func(s string) { b = binary.AppendUvarint(b, uint64(len(s))); b = append(b, s...) }
	num := func(n uint64) { b = binary.AppendUvarint(b, n) }
	b = binary.AppendUvarint(b, uint64(len(r.Items)))
	for i, it := range r.Items {
		switch {
		case it.Error != nil:
			b = append(b, 'e')
			num(uint64(it.Status))
			str(it.Error.Code)
			str(it.Error.Error)
			str(it.Error.Hint)
		case it.Sealed != nil:
			s := it.Sealed
			b = append(b, 's')
			str(s.Name)
			str(string(s.Origin))
			num(s.Version)
			str(string(s.Slot))
			num(uint64(len(s.Sealed)))
			for _, x := range s.Sealed {
				str(x.Recipient)
				str(string(x.Role))
				str(string(x.Slot))
				num(x.Version)
				str(string(x.Item))
				if x.Current {
					b = append(b, 1)
				} else {
					b = append(b, 0)
				}
				b = binary.AppendUvarint(b, uint64(len(x.Ciphertext)))
				b = append(b, x.Ciphertext...)
				str(x.SHA256)
			}
			num(uint64(len(s.Slots)))
			for _, sl := range s.Slots {
				str(string(sl.Slot))
				num(sl.Version)
				str(sl.State)
			}
			if s.Rotation == nil {
				num(0)
			} else {
				rot, err := json.Marshal(s.Rotation)
				if err != nil {
					return nil, fmt.Errorf("seal batch answer %d: rotation: %w", i, err)
				}
				str(string(rot))
			}
		default:
			return nil, fmt.Errorf("seal batch answer %d is empty", i)
		}
	}
	return b, nil
}

var errFramedShort = errors.New("cut short or malformed")

// framedReader reads a [SealBatchFramed] body; its first error sticks.
type framedReader struct {
	b   []byte
	err error
}

func (r *framedReader) num() uint64 {
	if r.err != nil {
		return 0
	}
	n, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.err = errFramedShort
		return 0
	}
	r.b = r.b[k:]
	return n
}

func (r *framedReader) bytes() []byte {
	n := r.num()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errFramedShort
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *framedReader) str() string { return string(r.bytes()) }

func (r *framedReader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.err = errFramedShort
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// count reads a number of things, each at least min bytes long: no more
// than the body can hold.
func (r *framedReader) count(min int) int {
	n := r.num()
	if r.err == nil && n > uint64(len(r.b)/min) {
		r.err = errFramedShort
		return 0
	}
	return int(n)
}

// decodeFramed decodes a [SealBatchFramed] body into r. The ciphertexts
// are slices of data (each capped at its end, so an append to one copies
// it): data must not be changed after.
func decodeFramed(data []byte, r *SealBatchResponse) error {
	fr := &framedReader{b: data}
	items := make([]SealBatchItem, fr.count(1))
	for i := range items {
		if fr.err != nil {
			break
		}
		switch kind := fr.byte(); kind {
		case 'e':
			status := fr.num()
			body := &ErrorBody{Code: fr.str(), Error: fr.str(), Hint: fr.str()}
			items[i] = SealBatchItem{Error: body, Status: int(min(status, 999))}
		case 's':
			s := &SealResponse{Name: fr.str(), Origin: Origin(fr.str()), Version: fr.num(), Slot: Slot(fr.str())}
			s.Sealed = make([]Sealed, fr.count(8))
			for j := range s.Sealed {
				x := &s.Sealed[j]
				x.Recipient, x.Role, x.Slot, x.Version, x.Item = fr.str(), Role(fr.str()), Slot(fr.str()), fr.num(), Item(fr.str())
				switch fr.byte() {
				case 0:
				case 1:
					x.Current = true
				default:
					if fr.err == nil {
						fr.err = fmt.Errorf("item %d: sealed %d: current is not 0 or 1", i, j)
					}
				}
				x.Ciphertext = fr.bytes()
				if x.Ciphertext == nil && fr.err == nil {
					x.Ciphertext = []byte{}
				}
				x.SHA256 = fr.str()
			}
			s.Slots = make([]SlotState, fr.count(3))
			for j := range s.Slots {
				s.Slots[j] = SlotState{Slot: Slot(fr.str()), Version: fr.num(), State: fr.str()}
			}
			if rot := fr.bytes(); fr.err == nil && len(rot) > 0 {
				s.Rotation = new(Rotation)
				if err := json.Unmarshal(rot, s.Rotation); err != nil {
					return fmt.Errorf("%s answer: item %d: rotation: %w", SealBatchFramed, i, err)
				}
			}
			items[i].Sealed = s
		default:
			if fr.err == nil {
				fr.err = fmt.Errorf("item %d is of no known kind (%q)", i, kind)
			}
		}
	}
	if fr.err != nil {
		return fmt.Errorf("%s answer: %w", SealBatchFramed, fr.err)
	}
	if len(fr.b) != 0 {
		return fmt.Errorf("%s answer: %d bytes follow its last item", SealBatchFramed, len(fr.b))
	}
	r.Items = items
	return nil
}
