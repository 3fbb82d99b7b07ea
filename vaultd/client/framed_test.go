package client

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
	"time"
)

func framedSample() *SealBatchResponse {
	return &SealBatchResponse{Items: []SealBatchItem{
		{Sealed: &SealResponse{Name: "db-password", Origin: OriginMesh, Version: 3, Slot: SlotB,
			Sealed: []Sealed{
				{Recipient: "age1applier", Role: RoleApplier, Slot: SlotA, Version: 2, Item: ItemValue, Current: true, Ciphertext: []byte("ct-1\x00\xff"), SHA256: "aa"},
				{Recipient: "age1applier", Role: RoleApplier, Slot: SlotB, Version: 3, Item: ItemDerived, Current: false, Ciphertext: []byte("ct-2"), SHA256: "bb"},
			},
			Slots: []SlotState{{Slot: SlotA, Version: 2, State: "current"}, {Slot: SlotB, Version: 3, State: "next"}},
			Rotation: &Rotation{Name: "db-password", Kind: TwoParty, Phase: PhaseApplying, From: 2, To: 3, Reason: "operator",
				Started: time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC), WaitsOn: []Party{{Recipient: "age1applier", Role: RoleApplier}}},
		}},
		{Error: &ErrorBody{Code: CodeNotDelivered, Error: `secret "x" is an operator's value`, Hint: "deliver it"}, Status: 409},
		{Sealed: &SealResponse{Name: "plain", Origin: OriginOperator, Version: 1,
			Sealed: []Sealed{{Recipient: "age1reader", Role: RoleReader, Version: 1, Item: ItemValue, Current: true, Ciphertext: []byte{}, SHA256: "cc"}},
			Slots:  []SlotState{}}},
		{Error: &ErrorBody{Code: CodeBadRequest, Error: "bad"}, Status: 400},
	}}
}

// TestSealBatchFramedRoundTrip encodes and decodes an answer holding every
// field: it comes back the same.
func TestSealBatchFramedRoundTrip(t *testing.T) {
	for _, in := range []*SealBatchResponse{framedSample(), {Items: []SealBatchItem{}}} {
		b, err := AppendSealBatchFramed(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		var out SealBatchResponse
		if err := decodeFramed(b, &out); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&out, in) {
			t.Fatalf("decoded\n%+v\nwant\n%+v", out, in)
		}
	}
	if _, err := AppendSealBatchFramed(nil, &SealBatchResponse{Items: []SealBatchItem{{}}}); err == nil || !strings.Contains(err.Error(), "answer 0 is empty") {
		t.Fatalf("encoding an empty item: %v, want a refusal", err)
	}
}

// TestSealBatchFramedFields fails when a field is added to what the framed
// answer carries: AppendSealBatchFramed and decodeFramed must learn it.
func TestSealBatchFramedFields(t *testing.T) {
	for _, tt := range []struct {
		v      any
		fields int
	}{
		{SealBatchResponse{}, 1}, {SealBatchItem{}, 3}, {ErrorBody{}, 3},
		{SealResponse{}, 7}, {Sealed{}, 8}, {SlotState{}, 3},
	} {
		if n := reflect.TypeOf(tt.v).NumField(); n != tt.fields {
			t.Errorf("%T has %d fields, the framed answer carries %d: teach AppendSealBatchFramed and decodeFramed the new ones", tt.v, n, tt.fields)
		}
	}
}

// TestDecodeFramedMalformed decodes bodies cut short at every byte, with
// bytes after the end, and with impossible contents: each is an error
// (never a panic, never a huge allocation).
func TestDecodeFramedMalformed(t *testing.T) {
	good, err := AppendSealBatchFramed(nil, framedSample())
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(good) {
		var out SealBatchResponse
		if err := decodeFramed(good[:n], &out); err == nil {
			t.Fatalf("a body cut at byte %d of %d decoded", n, len(good))
		}
	}
	tests := []struct {
		name string
		body []byte
		err  string
	}{
		{name: "bytes after the end", body: append(append([]byte(nil), good...), 0), err: "1 bytes follow its last item"},
		{name: "unknown kind", body: []byte{1, 'x'}, err: "item 0 is of no known kind"},
		{name: "a count over the body", body: binary.AppendUvarint(nil, 1<<62), err: "cut short or malformed"},
		{name: "sealed count over the body", body: append([]byte{1, 's', 0, 0, 0, 0}, binary.AppendUvarint(nil, 1<<40)...), err: "cut short or malformed"},
		{name: "current not a bool", body: []byte{1, 's', 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0}, err: "current is not 0 or 1"},
		{name: "rotation not JSON", body: []byte{1, 's', 0, 0, 0, 0, 0, 0, 1, '{'}, err: "rotation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out SealBatchResponse
			err := decodeFramed(tt.body, &out)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error %v, want one saying %q", err, tt.err)
			}
			if out.Items != nil {
				t.Fatal("a malformed body filled the answer")
			}
		})
	}
}

// FuzzDecodeFramed: whatever a framed body holds, decodeFramed answers an
// error or an answer, never panics, and an answer it reads, encoded
// again, is read back the same.
func FuzzDecodeFramed(f *testing.F) {
	good, err := AppendSealBatchFramed(nil, framedSample())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{0})
	f.Add([]byte{1, 'e', 0, 0, 0, 0})
	f.Add([]byte{1, 's', 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		var out SealBatchResponse
		if err := decodeFramed(body, &out); err != nil {
			return
		}
		again, err := AppendSealBatchFramed(nil, &out)
		if err != nil {
			t.Fatalf("a decoded answer does not encode: %v", err)
		}
		var back SealBatchResponse
		if err := decodeFramed(again, &back); err != nil {
			t.Fatalf("an encoded answer does not decode: %v", err)
		}
		// Compared encoded: a rotation's times come back in equal but
		// distinct locations, which reflect.DeepEqual tells apart.
		if third, err := AppendSealBatchFramed(nil, &back); err != nil || !bytes.Equal(third, again) {
			t.Fatalf("decoded\n%+v\nthen\n%+v (%v)", out, back, err)
		}
	})
}
