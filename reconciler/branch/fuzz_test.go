package branch

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzCommitMessage: every message the writer makes reads back as what it
// said, and no other text is taken for a different node's, or panics.
func FuzzCommitMessage(f *testing.F) {
	seeds := []struct {
		node    string
		gen     uint64
		source  string
		content string
		removed bool
	}{
		{"n1", 1, strings.Repeat("a", 40), strings.Repeat("b", 64), false},
		{"web-01", 18446744073709551615, "0123456789abcdef0123456789abcdef01234567", "", false},
		{"n", 0, "x", "y", false},
		{"n4", 9, strings.Repeat("c", 40), strings.Repeat("d", 64), true},
	}
	for _, s := range seeds {
		f.Add(s.node, s.gen, s.source, s.content, s.removed)
	}
	f.Fuzz(func(t *testing.T, node string, gen uint64, source, content string, removed bool) {
		msg := commitMessage(node, gen, source, content, removed)
		m, ok := parseMessage(msg, node)
		valid := !strings.Contains(node+source+content, "\n") && source != ""
		if valid && (!ok || m != (message{gen, source, content, removed})) {
			t.Fatalf("message for node %q generation %d source %q content %q removed %v reads back as %+v, %v", node, gen, source, content, removed, m, ok)
		}
		if _, ok := parseMessage(msg, node+"x"); ok && valid {
			t.Fatalf("node %q's message was read as node %qx's", node, node)
		}
	})
}

// FuzzReadHead: readHead never panics, and whatever it reads is what a full
// decode of the same JSON says.
func FuzzReadHead(f *testing.F) {
	for _, s := range []string{
		`{"format":1,"mesh":"m","node":"n","generation":3,"source":"abc","resources":[]}`,
		`{"generation":1,"source":"s"}`,
		`{"source":"s","generation":2,"x":{"y":[1,2]}}`,
		`[]`, `{"generation":-1,"source":"s"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := readHead(strings.NewReader(s))
		if err != nil {
			return
		}
		var full struct {
			Generation uint64 `json:"generation"`
			Source     string `json:"source"`
		}
		if json.Unmarshal([]byte(s), &full) == nil && (full.Generation != h.Generation || full.Source != h.Source) {
			t.Fatalf("readHead(%q) = %+v, a full decode says %+v", s, h, full)
		}
	})
}
