package vaultd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
)

func TestParseNodes(t *testing.T) {
	a, _ := age.GenerateX25519Identity()
	b, _ := age.GenerateX25519Identity()
	ra, rb := a.Recipient().String(), b.Recipient().String()
	tests := []struct {
		name, in string
		want     []string
		err      string
	}{
		{name: "bare", in: ra + "\n" + rb + "\n", want: []string{ra, rb}},
		{name: "named, comments, blanks", in: "# nodes\n\nn1 " + ra + "  # the first\n  n2\t" + rb, want: []string{ra, rb}},
		{name: "empty", in: "", want: nil},
		{name: "not a recipient", in: "n1 age1nope\n", err: "line 1: not an age recipient"},
		{name: "too many fields", in: "\nn1 x " + ra, err: `line 2: want "[node] age1..."`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := parseNodes([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(set) != len(tt.want) {
				t.Fatalf("%d recipients, want %d", len(set), len(tt.want))
			}
			for _, w := range tt.want {
				if !set[w] {
					t.Fatalf("%s missing", w)
				}
			}
		})
	}
}

// FuzzParseNodes: the node list parser never panics, and whatever it
// accepts is an age recipient it would accept again.
func FuzzParseNodes(f *testing.F) {
	seeds, err := filepath.Glob("testdata/nodes/*")
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds in testdata/nodes: %v", err)
	}
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := parseNodes(data)
		if err != nil {
			return
		}
		var lines []string
		for r := range set {
			if _, err := age.ParseX25519Recipient(r); err != nil {
				t.Fatalf("accepted %q: %v", r, err)
			}
			lines = append(lines, r)
		}
		again, err := parseNodes([]byte(strings.Join(lines, "\n")))
		if err != nil || len(again) != len(set) {
			t.Fatalf("the accepted recipients do not parse again: %v", err)
		}
	})
}

func TestNodeListIsReadAgainWhenItChanges(t *testing.T) {
	a, _ := age.GenerateX25519Identity()
	b, _ := age.GenerateX25519Identity()
	path := filepath.Join(t.TempDir(), "nodes")
	if err := os.WriteFile(path, []byte(a.Recipient().String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &nodeList{path: path}
	if ok, err := n.has(b.Recipient().String()); err != nil || ok {
		t.Fatalf("an unlisted node: %v %v", ok, err)
	}
	// A node enrolled later is accepted without a restart.
	if err := os.WriteFile(path, []byte(a.Recipient().String()+"\nn2 "+b.Recipient().String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, err := n.has(b.Recipient().String()); err != nil || !ok {
		t.Fatalf("a node enrolled later: %v %v", ok, err)
	}
	// A damaged list refuses every seal rather than allowing one.
	if err := os.WriteFile(path, []byte("garbage garbage garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, err := n.has(a.Recipient().String()); err == nil || ok {
		t.Fatalf("a damaged node list: %v %v", ok, err)
	}
}
