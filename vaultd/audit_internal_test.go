package vaultd

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestAppendEntryIsJSONMarshal: an audit line written by hand is
// json.Marshal's, byte for byte, for entries of every shape (error
// messages quoting names, invalid UTF-8, times in other zones).
func TestAppendEntryIsJSONMarshal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		list := rapid.SliceOfN(genString(), 0, 3)
		e := entry{
			Time: genTime().Draw(t, "time"), UID: rapid.Int().Draw(t, "uid"), PID: rapid.Int().Draw(t, "pid"),
			Peer: genString().Draw(t, "peer"), Op: genString().Draw(t, "op"), Names: list.Draw(t, "names"),
			Recipients: list.Draw(t, "recipients"), Version: rapid.Uint64().Draw(t, "version"),
			Outcome: genString().Draw(t, "outcome"), Error: genString().Draw(t, "error"), sync: rapid.Bool().Draw(t, "sync"),
		}
		if rapid.Bool().Draw(t, "nil lists") {
			e.Names, e.Recipients = nil, nil
		}
		want, wantErr := json.Marshal(e)
		got, err := appendEntry([]byte("prefix"), &e)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("appendEntry: %v; json.Marshal: %v", err, wantErr)
		}
		if err == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("appendEntry wrote\n%s\njson.Marshal\n%s", got, want)
		}
	})
}

// TestAppendEntryKnowsEveryField: a field added to entry must be added to
// appendEntry too.
func TestAppendEntryKnowsEveryField(t *testing.T) {
	want := []string{"time", "uid", "pid", "peer,omitempty", "op", "names,omitempty", "recipients,omitempty", "version,omitempty", "outcome", "error,omitempty", "", ""}
	var tags []string
	for f := range reflect.TypeFor[entry]().Fields() {
		tags = append(tags, f.Tag.Get("json"))
	}
	if !slices.Equal(tags, want) {
		t.Errorf("entry's JSON fields are %q; appendEntry (audit.go) writes %q: teach it the change", tags, want)
	}
}
