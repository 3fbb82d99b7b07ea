package branch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/reconciler/sign"
)

// TestWriteRemovedNode: the final declaration of a node removed from the
// mesh is written once, signed, with no resources and no secrets, the
// generation raised by one and a commit message that says so (read back as
// CommitHead.Removed). Written again, it commits nothing; the node enrolled
// again continues its generations upward, and its commit no longer says
// removed, even when its content is the same empty declaration.
func TestWriteRemovedNode(t *testing.T) {
	ctx := context.Background()
	repo := bareRepo(t)
	signer, pub := testSigner(t)
	r, err := OpenLocal(repo)
	if err != nil {
		t.Fatal(err)
	}
	opts := WriteOptions{Source: strings.Repeat("a", 40), Signer: signer, Now: func() time.Time { return time.Unix(1e9, 0) }}
	if _, err := r.Write(ctx, map[string]*Node{"n4": testNode("n4", "a", 2)}, opts); err != nil {
		t.Fatal(err)
	}
	empty := func(removed bool) *Node {
		return &Node{Declaration: &declaration.Declaration{Format: declaration.Version, Mesh: "demo", Node: "n4",
			Resources: []declaration.Resource{}}, Removed: removed}
	}
	head := func() CommitHead {
		t.Helper()
		h, ok := ParseCommitMessage(gitRun(t, repo, "log", "-1", "--format=%B", "node/n4"), "n4")
		if !ok {
			t.Fatal("the writer's commit message does not parse")
		}
		return h
	}

	opts.Source = strings.Repeat("b", 40)
	res, err := r.Write(ctx, map[string]*Node{"n4": empty(true)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(res); got["n4"] != Written || res.Nodes[0].Generation != 2 {
		t.Fatalf("removal: %+v", res.Nodes)
	}
	body := gitRun(t, repo, "cat-file", "blob", "node/n4:"+DeclarationFile)
	d, err := declaration.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Resources) != 0 || d.Generation != 2 || d.Source != opts.Source {
		t.Fatalf("removed node's declaration: %s", body)
	}
	if err := sign.Verify(pub, []byte(body), []byte(gitRun(t, repo, "cat-file", "blob", "node/n4:"+SignatureFile))); err != nil {
		t.Fatalf("removed node's declaration: %v", err)
	}
	if files := gitRun(t, repo, "ls-tree", "-r", "--name-only", "node/n4"); strings.Contains(files, SecretsDir) {
		t.Fatalf("the removed node's branch still holds sealed files:\n%s", files)
	}
	msg := gitRun(t, repo, "log", "-1", "--format=%B", "node/n4")
	if !strings.Contains(msg, "Removed from the mesh:") || !head().Removed || head().Generation != 2 {
		t.Fatalf("commit message %q does not say the node was removed", msg)
	}

	// Once is enough.
	opts.Source = strings.Repeat("c", 40)
	before := gitRun(t, repo, "rev-parse", "node/n4")
	res, err = r.Write(ctx, map[string]*Node{"n4": empty(true)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if outcomes(res)["n4"] != Unchanged || res.Objects != 0 || gitRun(t, repo, "rev-parse", "node/n4") != before {
		t.Fatalf("writing the removal again: %+v, %d objects", res.Nodes, res.Objects)
	}

	// Enrolled again with nothing assigned: the same empty content, but
	// not removed any more.
	res, err = r.Write(ctx, map[string]*Node{"n4": empty(false)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if outcomes(res)["n4"] != Written || head().Removed || head().Generation != 3 {
		t.Fatalf("enrolled again: %+v, head %+v", res.Nodes, head())
	}
	if _, gens := chain(t, repo, Ref("n4")); len(gens) != 3 || gens[0] != 3 || gens[1] != 2 || gens[2] != 1 {
		t.Fatalf("node/n4 generations %v, want [3 2 1]", gens)
	}
}
