package branch

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestWriteState(t *testing.T) {
	ctx := context.Background()
	repo := bareRepo(t)
	r, err := OpenLocal(repo)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ReadState(repo); err != nil || got != nil {
		t.Fatalf("a new repository holds state %q, %v", got, err)
	}
	opts := WriteOptions{Source: strings.Repeat("a", 40)}
	for _, tt := range []struct {
		content string
		wrote   bool
	}{
		{`{"ports":{"web@n1":{"http":31000}}}`, true},
		{`{"ports":{"web@n1":{"http":31000}}}`, false},
		{`{"ports":{"web@n1":{"http":31001}}}`, true},
	} {
		wrote, err := r.WriteState(ctx, []byte(tt.content), opts)
		if err != nil || wrote != tt.wrote {
			t.Fatalf("WriteState(%s) = %v, %v; want %v", tt.content, wrote, err, tt.wrote)
		}
		got, err := ReadState(repo)
		if err != nil || string(got) != tt.content {
			t.Fatalf("ReadState = %q, %v; want %q", got, err, tt.content)
		}
	}
	if n := len(strings.Fields(gitRun(t, repo, "rev-list", StateRef))); n != 2 {
		t.Errorf("%d state commits, want 2", n)
	}
	// Racing writers: every write lands on one history, none lost.
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 5 {
				if _, err := r.WriteState(ctx, []byte(strings.Repeat("x", w*10+i+1)), opts); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n := len(strings.Fields(gitRun(t, repo, "rev-list", "--first-parent", StateRef))); n != 22 {
		t.Errorf("%d state commits after 20 racing distinct writes, want 22", n)
	}
	gitRun(t, repo, "fsck", "--strict")
}

// TestMaintain: after more than PackLimit writes, Maintain repacks into one
// packfile, and every branch still reads the same.
func TestMaintain(t *testing.T) {
	ctx := context.Background()
	repo, r, opts := localRepo(t)
	opts.Source = "s"
	if did, err := r.Maintain(ctx); did || err != nil {
		t.Fatalf("an empty repository was repacked: %v, %v", did, err)
	}
	for i := range PackLimit + 2 {
		nodes := map[string]*Node{"n1": testNode("n1", fmt.Sprint(i), 1), "n2": testNode("n2", fmt.Sprint(i), 0)}
		if _, err := r.Write(ctx, nodes, opts); err != nil {
			t.Fatal(err)
		}
	}
	before := gitRun(t, repo, "for-each-ref")
	if n := packCount(t, repo); n != PackLimit+2 {
		t.Fatalf("%d packfiles after %d writes", n, PackLimit+2)
	}
	did, err := r.Maintain(ctx)
	if err != nil || !did {
		t.Fatalf("Maintain = %v, %v", did, err)
	}
	if n := packCount(t, repo); n > 1 {
		t.Errorf("%d packfiles after repacking", n)
	}
	if gitRun(t, repo, "for-each-ref") != before {
		t.Error("repacking moved refs")
	}
	gitRun(t, repo, "fsck", "--strict")
	checkChain(t, repo, "n1", branchCommits(t, repo, "n1"))
	// Writing after a repack works, and an unchanged write still writes
	// nothing.
	res, err := r.Write(ctx, map[string]*Node{"n1": testNode("n1", fmt.Sprint(PackLimit+1), 1)}, opts)
	if err != nil || len(res.Changed()) != 0 {
		t.Fatalf("unchanged write after a repack: %v, %v", res, err)
	}
}

// branchCommits lists every commit on node's branch: all must stay.
func branchCommits(t *testing.T, repo, node string) []string {
	return strings.Fields(gitRun(t, repo, "rev-list", Ref(node)))
}

// TestWriteStateFiles: the state branch holds exactly the files given; an
// equal set commits nothing, a changed or dropped file commits, and
// ReadState still reads state.json.
func TestWriteStateFiles(t *testing.T) {
	ctx := context.Background()
	repo := bareRepo(t)
	r, err := OpenLocal(repo)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ReadStateFiles(repo); err != nil || got != nil {
		t.Fatalf("a new repository holds state files %v, %v", got, err)
	}
	opts := WriteOptions{Source: strings.Repeat("a", 40)}
	for _, tt := range []struct {
		files map[string]string
		wrote bool
	}{
		{map[string]string{StateFile: `{}`, "inputs.json": `{"main":"1"}`}, true},
		{map[string]string{StateFile: `{}`, "inputs.json": `{"main":"1"}`}, false},
		{map[string]string{StateFile: `{}`, "inputs.json": `{"main":"2"}`}, true},
		{map[string]string{StateFile: `{}`}, true},
		{map[string]string{StateFile: `{}`}, false},
	} {
		files := map[string][]byte{}
		for k, v := range tt.files {
			files[k] = []byte(v)
		}
		wrote, err := r.WriteStateFiles(ctx, files, opts)
		if err != nil || wrote != tt.wrote {
			t.Fatalf("WriteStateFiles(%v) = %v, %v; want %v", tt.files, wrote, err, tt.wrote)
		}
		got, err := ReadStateFiles(repo)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tt.files) {
			t.Fatalf("ReadStateFiles = %v; want %v", got, tt.files)
		}
		for k, v := range tt.files {
			if string(got[k]) != v {
				t.Fatalf("ReadStateFiles[%s] = %q; want %q", k, got[k], v)
			}
		}
		if st, err := ReadState(repo); err != nil || string(st) != tt.files[StateFile] {
			t.Fatalf("ReadState = %q, %v", st, err)
		}
	}
	for _, bad := range []string{"", "a/b", ".", ".."} {
		if _, err := r.WriteStateFiles(ctx, map[string][]byte{bad: nil}, opts); err == nil {
			t.Errorf("a state file named %q was written", bad)
		}
	}
	gitRun(t, repo, "fsck", "--strict")
}
