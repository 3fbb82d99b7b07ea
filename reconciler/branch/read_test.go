package branch

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshgen/meshgen/hostd/declaration"
)

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

func TestParseMessage(t *testing.T) {
	src := "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		msg, node string
		want      message
		ok        bool
	}{
		{commitMessage("n1", 7, src, "c0ffee", false), "n1", message{7, src, "c0ffee", false}, true},
		{commitMessage("n1", 8, src, "c0ffee", true), "n1", message{8, src, "c0ffee", true}, true},
		{"node n1: generation 7\n\nSource: " + src + "\n", "n1", message{7, src, "", false}, true},
		{commitMessage("n1", 7, src, "c0ffee", false), "n2", message{}, false},
		{"node n1: generation x\n\nSource: " + src + "\n", "n1", message{}, false},
		{"node n1: generation 3\n", "n1", message{}, false},
		{"an operator's commit\n", "n1", message{}, false},
	}
	for _, tt := range tests {
		got, ok := parseMessage(tt.msg, tt.node)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseMessage(%q, %q) = %+v, %v; want %+v, %v", tt.msg, tt.node, got, ok, tt.want, tt.ok)
		}
	}
}

// TestReadTipFallsBackToTheDeclaration: a branch whose commit the writer
// did not make is read from declaration.json itself.
func TestReadHead(t *testing.T) {
	h, err := readHead(stringsReader(`{"format":1,"mesh":"m","node":"n","generation":12,"source":"abc","resources":[{"x":1}]}`))
	if err != nil || h.Generation != 12 || h.Source != "abc" {
		t.Fatalf("readHead = %+v, %v", h, err)
	}
	if _, err := readHead(stringsReader(`{"format":1}`)); err == nil {
		t.Error("a declaration without generation and source was read")
	}
	if _, err := readHead(stringsReader(`[]`)); err == nil {
		t.Error("a JSON array was read as a declaration")
	}
}

// TestWriteOnABranchWrittenByHand: a branch whose tip another tool
// committed is read from its declaration, and the generation still rises
// by one from there.
func TestWriteOnABranchWrittenByHand(t *testing.T) {
	repo := bareRepo(t)
	work := t.TempDir()
	gitRun(t, work, "init", "-q", "-b", "x")
	n := testNode("n1", "by-hand", 0)
	d := *n.Declaration
	d.Generation, d.Source = 5, "feed"
	body, err := declaration.Marshal(&d)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(work, DeclarationFile), body, 0o644)
	gitRun(t, work, "add", ".")
	gitRun(t, work, "commit", "-q", "-m", "restored from a backup")
	gitRun(t, work, "push", "-q", repo, "x:"+Ref("n1"))
	signer, _ := testSigner(t)
	r, err := OpenLocal(repo)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Write(context.Background(), map[string]*Node{"n1": testNode("n1", "new", 0)}, WriteOptions{Source: "s2", Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	if res.Nodes[0].Outcome != Written || res.Nodes[0].Generation != 6 {
		t.Fatalf("after a hand-written generation 5: %+v", res.Nodes[0])
	}
	// The same content as the hand-written one is unchanged.
	res, err = r.Write(context.Background(), map[string]*Node{"n1": testNode("n1", "new", 0)}, WriteOptions{Source: "s3", Signer: signer})
	if err != nil || res.Nodes[0].Outcome != Unchanged {
		t.Fatalf("rewrite: %+v, %v", res.Nodes, err)
	}
}
