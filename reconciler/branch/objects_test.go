package branch

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// TestCommitEncoding: the builder encodes a commit byte for byte as go-git
// does, so its hash is the one go-git and git compute for it.
func TestCommitEncoding(t *testing.T) {
	tree := plumbing.NewHash(strings.Repeat("1f", 20))
	parent := plumbing.NewHash(strings.Repeat("e0", 20))
	who := object.Signature{Name: "meshgen reconciler", Email: "reconciler@meshgen.invalid"}
	for _, tc := range []struct {
		name    string
		parent  plumbing.Hash
		when    time.Time
		message string
	}{
		{"first commit", plumbing.ZeroHash, time.Unix(1_700_000_000, 0).UTC(), commitMessage("n1", 1, strings.Repeat("a", 40), strings.Repeat("b", 64), false)},
		{"with parent", parent, time.Unix(1_700_000_000, 0).UTC(), commitMessage("n1", 2, strings.Repeat("a", 40), strings.Repeat("b", 64), false)},
		{"removed", parent, time.Unix(1_700_000_000, 0).UTC(), commitMessage("n1", 3, strings.Repeat("a", 40), strings.Repeat("b", 64), true)},
		{"east of UTC", parent, time.Unix(1_700_000_000, 0).In(time.FixedZone("", 5*3600+30*60)), "m\n"},
		{"west of UTC", parent, time.Unix(1_700_000_000, 0).In(time.FixedZone("", -8*3600)), "m\n"},
		{"before 1970", parent, time.Unix(-5, 0).UTC(), "m\n"},
		{"zero time", parent, time.Time{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := newObjects()
			got := objs.builder().commit(tree, commitInfo{message: tc.message, parent: tc.parent, when: tc.when, author: who})
			sig := who
			sig.When = tc.when
			c := &object.Commit{Author: sig, Committer: sig, Message: tc.message, TreeHash: tree}
			if !tc.parent.IsZero() {
				c.ParentHashes = []plumbing.Hash{tc.parent}
			}
			want := &plumbing.MemoryObject{}
			if err := c.Encode(want); err != nil {
				t.Fatal(err)
			}
			r, _ := want.Reader()
			wantData, _ := io.ReadAll(r)
			obj, _ := objs.get(got)
			if got != want.Hash() || string(obj.data) != string(wantData) {
				t.Fatalf("commit %s:\n%s\nwant %s:\n%s", got, obj.data, want.Hash(), wantData)
			}
		})
	}
}

// TestTreeOrder: the builder orders a tree's entries as git does, a
// subtree's name comparing as if it ended in "/": git mktree, which sorts
// its input itself, makes the same tree from the entries shuffled.
func TestTreeOrder(t *testing.T) {
	repo := bareRepo(t)
	blob := plumbing.NewHash(strings.Repeat("ab", 20))
	sub := plumbing.NewHash(strings.Repeat("cd", 20))
	for _, names := range [][]string{
		{"a", "a.b", "a-b", "a/", "a0", "b"},
		{"a/", "a.b", "a0/", "a", "ab/"},
		{"secrets/", "secrets.txt", "secrets-old/", "secrets0", "declaration.json", "declaration.json.sig"},
		{"x", "x/", "x.y/", "x.", "xa"}, // a file and a subtree of one name: not in git's trees, still ordered
		{"Z", "a", "_", "~", "\u00e9", "0"},
	} {
		t.Run(strings.Join(names, " "), func(t *testing.T) {
			var entries []treeEntry
			var in strings.Builder
			for i := len(names) - 1; i >= 0; i-- { // reversed: both must sort
				e := treeEntry{name: names[i], mode: filemode.Regular, hash: blob}
				typ := "blob"
				if n, ok := strings.CutSuffix(names[i], "/"); ok {
					e = treeEntry{name: n, mode: filemode.Dir, hash: sub}
					typ = "tree"
				}
				entries = append(entries, e)
				fmt.Fprintf(&in, "%o %s %s\t%s\n", uint32(e.mode), typ, e.hash, e.name)
			}
			got := newObjects().builder().tree(entries)
			want, err := gitIn(repo, in.String(), "mktree", "--missing")
			if err != nil {
				t.Fatalf("git mktree: %v\n%s", err, want)
			}
			if got.String() != strings.TrimSpace(want) {
				t.Fatalf("tree %s, git mktree makes %s of\n%s", got, strings.TrimSpace(want), in.String())
			}
		})
	}
}
