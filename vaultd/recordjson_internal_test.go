package vaultd

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/internal/rotation"
	"pgregory.net/rapid"
)

// genString draws strings of the shapes records hold (names, recipients,
// formats) and of every other (escapes, HTML characters, non-ASCII,
// invalid UTF-8), which appendRecord must leave to json.Marshal.
func genString() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.StringMatching(`[A-Za-z0-9][A-Za-z0-9._@:/|-]{0,30}`),
		rapid.SampledFrom([]string{"", client.OneParty, client.TwoParty, "bcrypt", "a<b", "x&y", `q"`, `back\slash`, "tab\t", "é", "\u2028", "\xff"}),
		rapid.String(),
	)
}

func genTime() *rapid.Generator[time.Time] {
	return rapid.Custom(func(t *rapid.T) time.Time {
		tm := time.Unix(rapid.Int64Range(-70000000000, 300000000000).Draw(t, "unix"), rapid.Int64Range(0, 999999999).Draw(t, "nano"))
		switch rapid.IntRange(0, 3).Draw(t, "zone") {
		case 0:
			return tm.UTC()
		case 1:
			return tm.In(time.FixedZone("x", 3600))
		case 2:
			return tm.Truncate(time.Second).UTC()
		}
		return tm.In(time.FixedZone("UTC", 0))
	})
}

func genRecord() *rapid.Generator[*record] {
	return rapid.Custom(func(t *rapid.T) *record {
		r := &record{
			Name: genString().Draw(t, "name"), Origin: client.Origin(genString().Draw(t, "origin")),
			Spec: client.Spec{
				Length: rapid.IntRange(-5, 2000).Draw(t, "length"), Alphabet: genString().Draw(t, "alphabet"),
				Format: genString().Draw(t, "format"), NotRotatable: genString().Draw(t, "notRotatable"),
				Rotation: genString().Draw(t, "rotation"), MaxAge: client.Duration(rapid.Int64Range(-1e12, 1e15).Draw(t, "maxAge")),
				Operator: rapid.Bool().Draw(t, "operator"),
			},
			Last: rapid.Uint64().Draw(t, "last"),
		}
		if rapid.IntRange(0, 5).Draw(t, "no spec") == 0 {
			r.Spec = client.Spec{}
		}
		if rapid.IntRange(0, 9).Draw(t, "nil values") > 0 {
			r.Values = map[uint64]*value{}
			for range rapid.IntRange(0, 12).Draw(t, "values") {
				var v *value
				if rapid.IntRange(0, 9).Draw(t, "nil value") > 0 {
					v = &value{Value: rapid.SliceOfN(rapid.Byte(), 0, 80).Draw(t, "value"), Derived: genString().Draw(t, "derived"),
						DerivedFormat: genString().Draw(t, "derivedFormat"), Made: genTime().Draw(t, "made")}
					if rapid.IntRange(0, 9).Draw(t, "nil bytes") == 0 {
						v.Value = nil
					}
				}
				r.Values[rapid.Uint64Range(0, 1000).Draw(t, "version")] = v
			}
		}
		r.Rot = rotation.State{Kind: genString().Draw(t, "kind"), Current: rotation.Live{
			Version: rapid.Uint64().Draw(t, "current"), Slot: client.Slot(rapid.SampledFrom([]string{"", "a", "b", "<"}).Draw(t, "slot"))}}
		switch rapid.IntRange(0, 8).Draw(t, "rotating") {
		case 0:
			r.Rot.Next, r.Rot.Phase, r.Rot.From, r.Rot.To = &rotation.Live{Version: 2, Slot: client.SlotB}, client.PhaseApplying, 1, 2
			r.Rot.Started, r.Rot.Reason = genTime().Draw(t, "started"), "operator"
			r.Rot.Waiting = []client.Party{{Recipient: genString().Draw(t, "waiting"), Role: client.RoleApplier}}
		case 1:
			r.Rot.Retiring = &rotation.Live{Version: 1}
		case 2:
			r.Rot.Confirmed = []client.Party{}
		}
		list := rapid.SliceOfN(genString(), 0, 4)
		r.Appliers, r.Readers = list.Draw(t, "appliers"), list.Draw(t, "readers")
		if rapid.Bool().Draw(t, "nil lists") {
			r.Appliers, r.Readers = nil, nil
		}
		if n := rapid.IntRange(-1, 6).Draw(t, "sealed"); n >= 0 {
			r.Sealed = map[string][]byte{}
			for range n {
				r.Sealed[genString().Draw(t, "key")] = rapid.SliceOfN(rapid.Byte(), 0, 100).Draw(t, "ciphertext")
			}
		}
		return r
	})
}

// TestMarshalRecordIsJSONMarshal: the hand-written encoding of a record is
// json.Marshal's, byte for byte, for records of every shape.
func TestMarshalRecordIsJSONMarshal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := genRecord().Draw(t, "record")
		want, wantErr := json.Marshal(r)
		got, err := marshalRecord([]byte("prefix"), r)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("marshalRecord: %v; json.Marshal: %v", err, wantErr)
		}
		if err != nil {
			return
		}
		if !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("marshalRecord wrote\n%s\njson.Marshal\n%s", got, want)
		}
	})
}

// TestSealedRecordsTakeTheFastPath: a record a seal makes is written by
// hand, not left to json.Marshal, and reads back as it was.
func TestSealedRecordsTakeTheFastPath(t *testing.T) {
	v := &Vault{now: time.Now}
	for _, spec := range []client.Spec{
		{Length: 32, Alphabet: client.AlphabetAlnum, Rotation: client.OneParty},
		{Length: 24, Alphabet: client.AlphabetHex, Rotation: client.TwoParty, MaxAge: client.Duration(720 * time.Hour), Format: client.FormatMosquittoPBKDF2},
	} {
		r, err := v.newRecord("mesh/db/password", client.OriginMesh, spec, makeValue(spec), "")
		if err != nil {
			t.Fatal(err)
		}
		r.Readers = []string{"age1reader"}
		r.Sealed["age1reader|1|value"] = []byte("ciphertext")
		got, ok := appendRecord(nil, r)
		if !ok {
			t.Fatalf("a new record of spec %+v is left to json.Marshal", spec)
		}
		if hint := r.sizeHint(); hint < len(got) || hint > len(got)+256 {
			t.Errorf("a record of %d bytes is estimated at %d", len(got), hint)
		}
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("appendRecord wrote\n%s\njson.Marshal\n%s", got, want)
		}
		var back record
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&back, r) {
			t.Fatalf("read back %+v, wrote %+v", back, r)
		}
	}
}

// TestRecordEncoderKnowsEveryField: appendRecord writes the fields it
// knows; a field added to a stored type must be added to it too (or the
// record left to json.Marshal), and this test says so.
func TestRecordEncoderKnowsEveryField(t *testing.T) {
	for _, c := range []struct {
		v      any
		fields []string
	}{
		{record{}, []string{"name", "origin", "spec", "last", "values", "rotation", "appliers,omitempty", "readers,omitempty", "sealed,omitempty"}},
		{value{}, []string{"value", "derived,omitempty", "derivedFormat,omitempty", "made"}},
		{client.Spec{}, []string{"length,omitempty", "alphabet,omitempty", "format,omitempty", "notRotatable,omitempty", "rotation,omitempty", "maxAge,omitempty", "operator,omitempty"}},
		{rotation.State{}, []string{"kind", "current", "next,omitempty", "retiring,omitempty", "phase,omitempty", "abandoned,omitempty", "reason,omitempty", "started,omitzero", "from,omitempty", "to,omitempty", "waiting,omitempty", "confirmed,omitempty"}},
		{rotation.Live{}, []string{"version", "slot,omitempty"}},
	} {
		ty := reflect.TypeOf(c.v)
		var tags []string
		for f := range ty.Fields() {
			tags = append(tags, f.Tag.Get("json"))
		}
		if !slices.Equal(tags, c.fields) {
			t.Errorf("%s's JSON fields are %q; appendRecord (recordjson.go) writes %q: teach it the change", ty, tags, c.fields)
		}
	}
}
