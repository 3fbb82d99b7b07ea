package vaultd

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/meshgen/meshgen/vaultd/internal/rotation"
)

// A record is stored as the JSON json.Marshal writes of it, which Open
// reads back with json.Unmarshal. appendRecord writes those same bytes
// by hand for the records a seal makes and changes: json.Marshal's
// reflection and allocations were a tenth of a batch seal's CPU. A record
// it does not know to write exactly as json.Marshal would (a rotation in
// progress, a time outside UTC or RFC 3339's years) it leaves to
// json.Marshal: the bytes on disk do not depend on which wrote them.
// A string needing escapes is escaped by json.Marshal alone. The tests
// check both agree on random records, and that these types have no field
// the encoder does not know.

// marshalRecord returns json.Marshal(r), appended to b.
func marshalRecord(b []byte, r *record) ([]byte, error) {
	if out, ok := appendRecord(b, r); ok {
		return out, nil
	}
	data, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return append(b, data...), nil
}

// sizeHint is about the length of r's JSON, usually a little more, for
// the records seals make: the fields' text and base64, and room for the
// keys and punctuation.
func (r *record) sizeHint() int {
	// The keys, the spec and the idle rotation state, at their longest,
	// then each value's keys and time.
	n := 320 + len(r.Name) + len(r.Spec.NotRotatable)
	for _, v := range r.Values {
		if v != nil {
			n += 112 + base64.StdEncoding.EncodedLen(len(v.Value)) + len(v.Derived)
		}
	}
	for k, ct := range r.Sealed {
		n += 8 + len(k) + base64.StdEncoding.EncodedLen(len(ct))
	}
	for _, l := range [][]string{r.Appliers, r.Readers} {
		for _, x := range l {
			n += 3 + len(x)
		}
	}
	return n
}

// appendRecord appends r as json.Marshal writes it, or reports false
// (and b's contents past len(b) are garbage) when r holds something it
// leaves to json.Marshal.
func appendRecord(b []byte, r *record) ([]byte, bool) {
	str := func(s string) { b = appendString(b, s) }
	b = append(b, `{"name":`...)
	str(r.Name)
	b = append(b, `,"origin":`...)
	str(string(r.Origin))

	s := r.Spec
	b = append(b, `,"spec":{`...)
	comma := false
	field := func(name string) {
		if comma {
			b = append(b, ',')
		}
		comma = true
		b = append(append(append(b, '"'), name...), `":`...)
	}
	if s.Length != 0 {
		field("length")
		b = strconv.AppendInt(b, int64(s.Length), 10)
	}
	for _, f := range []struct{ name, v string }{
		{"alphabet", s.Alphabet}, {"format", s.Format}, {"notRotatable", s.NotRotatable}, {"rotation", s.Rotation},
	} {
		if f.v != "" {
			field(f.name)
			str(f.v)
		}
	}
	if s.MaxAge != 0 {
		field("maxAge")
		str(time.Duration(s.MaxAge).String())
	}
	if s.Operator {
		field("operator")
		b = append(b, "true"...)
	}
	b = append(b, `},"last":`...)
	b = strconv.AppendUint(b, r.Last, 10)

	b = append(b, `,"values":`...)
	if r.Values == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '{')
		for i, k := range sortedKeys(r.Values) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(strconv.AppendUint(append(b, '"'), k, 10), `":`...)
			v := r.Values[k]
			if v == nil {
				b = append(b, "null"...)
				continue
			}
			b = append(b, `{"value":`...)
			b = appendBytes(b, v.Value)
			if v.Derived != "" {
				b = append(b, `,"derived":`...)
				str(v.Derived)
			}
			if v.DerivedFormat != "" {
				b = append(b, `,"derivedFormat":`...)
				str(v.DerivedFormat)
			}
			b = append(b, `,"made":`...)
			var timeOK bool
			if b, timeOK = appendTime(b, v.Made); !timeOK {
				return b, false
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}

	b = append(b, `,"rotation":`...)
	var ok bool
	if b, ok = appendIdleRotation(b, &r.Rot); !ok {
		return b, false
	}
	list := func(name string, l []string) {
		if len(l) == 0 {
			return
		}
		b = append(append(append(b, `,"`...), name...), `":[`...)
		for i, x := range l {
			if i > 0 {
				b = append(b, ',')
			}
			str(x)
		}
		b = append(b, ']')
	}
	list("appliers", r.Appliers)
	list("readers", r.Readers)
	if len(r.Sealed) > 0 {
		b = append(b, `,"sealed":{`...)
		for i, k := range sortedKeys(r.Sealed) {
			if i > 0 {
				b = append(b, ',')
			}
			str(k)
			b = appendBytes(append(b, ':'), r.Sealed[k])
		}
		b = append(b, '}')
	}
	return append(b, '}'), true
}

// appendIdleRotation appends a rotation state with no rotation in
// progress ({"kind":...,"current":{...}}); any other it leaves to
// json.Marshal.
func appendIdleRotation(b []byte, s *rotation.State) ([]byte, bool) {
	if s.Next != nil || s.Retiring != nil || s.Phase != "" || s.Abandoned || s.Reason != "" ||
		!s.Started.IsZero() || s.From != 0 || s.To != 0 || s.Waiting != nil || s.Confirmed != nil {
		return b, false
	}
	b = appendString(append(b, `{"kind":`...), s.Kind)
	b = strconv.AppendUint(append(b, `,"current":{"version":`...), s.Current.Version, 10)
	if s.Current.Slot != "" {
		b = appendString(append(b, `,"slot":`...), string(s.Current.Slot))
	}
	return append(b, "}}"...), true
}

// appendString appends s as json.Marshal writes a string: as it is, in
// quotes, when it is printable ASCII with nothing json.Marshal escapes
// (" \ < > &), as most are; else by json.Marshal.
func appendString(b []byte, s string) []byte {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}

// appendBytes appends p as json.Marshal writes a []byte: standard base64
// in quotes, null when nil.
func appendBytes(b, p []byte) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	return append(base64.StdEncoding.AppendEncode(append(b, '"'), p), '"')
}

// appendTime appends t as its MarshalJSON writes it, when t is in UTC and
// within the years RFC 3339 writes.
func appendTime(b []byte, t time.Time) ([]byte, bool) {
	if _, off := t.Zone(); off != 0 || t.Year() < 0 || t.Year() > 9999 {
		return b, false
	}
	return append(t.AppendFormat(append(b, '"'), time.RFC3339Nano), '"'), true
}

// sortedKeys returns m's keys in the order json.Marshal writes them: by
// their text.
func sortedKeys[K uint64 | string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	switch ks := any(keys).(type) {
	case []uint64:
		slices.SortFunc(ks, func(x, y uint64) int {
			var bx, by [20]byte
			return slices.Compare(strconv.AppendUint(bx[:0], x, 10), strconv.AppendUint(by[:0], y, 10))
		})
	case []string:
		slices.Sort(ks)
	}
	return keys
}
