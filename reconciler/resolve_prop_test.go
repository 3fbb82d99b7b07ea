package reconciler

import (
	"bytes"
	"testing"
	"testing/fstest"

	"github.com/rogpeppe/go-internal/txtar"
	"pgregory.net/rapid"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/reconciler/synth"
)

func testCatalog(t testing.TB) *schema.Repo {
	t.Helper()
	ar, err := txtar.ParseFile("testdata/catalog.txtar")
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{}
	for _, f := range ar.Files {
		fsys[f.Name] = &fstest.MapFile{Data: f.Data}
	}
	repo, err := schema.Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// TestResolutionIsDeterministicAndOrderIndependent: for random meshes over
// the test catalog, some assignments dropped (so some resolutions refuse)
// and some answers missing (so some consumers wait), resolving twice gives
// the same result, and so does resolving the assignments in any order, to the
// byte: the same refusals in the same order, or the same declarations.
func TestResolutionIsDeterministicAndOrderIndependent(t *testing.T) {
	catalog := testCatalog(t)
	rapid.Check(t, func(t *rapid.T) {
		nodes := rapid.IntRange(1, 6).Draw(t, "nodes")
		perNode := rapid.IntRange(2, 7).Draw(t, "perNode")
		m, err := synth.Mesh(catalog, synth.Options{Nodes: nodes, PerNode: perNode})
		if err != nil {
			t.Fatal(err)
		}
		keep := rapid.SliceOfN(rapid.Bool(), len(m.Repo.Assignments), len(m.Repo.Assignments)).Draw(t, "keep")
		var as []*schema.Assignment
		for i, a := range m.Repo.Assignments {
			if keep[i] || i == 0 {
				as = append(as, a)
			}
		}
		m.Repo.Assignments = as
		answers := Answers{}
		for node, steps := range m.Answers {
			if rapid.Bool().Draw(t, "answered "+node) {
				answers[node] = steps
			}
		}
		opts := ResolveOptions{Answers: answers}

		first, err := snapshot(m.Repo, opts)
		if err != nil {
			t.Fatal(err)
		}
		again, err := snapshot(m.Repo, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Fatalf("two resolutions of one repository differ:\n%s", lineDiff(string(first), string(again)))
		}
		shuffled := *m.Repo
		shuffled.Assignments = rapid.Permutation(as).Draw(t, "order")
		other, err := snapshot(&shuffled, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, other) {
			t.Fatalf("resolving the assignments in another order differs:\n%s", lineDiff(string(first), string(other)))
		}
	})
}
