package synth_test

import (
	"reflect"
	"testing"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/reconciler"
	"github.com/meshgen/meshgen/reconciler/synth"
)

// TestMeshResolves: a synthetic mesh over the example catalog has the size
// asked for, resolves with nothing refused and nobody waiting, and is the
// same every time.
func TestMeshResolves(t *testing.T) {
	catalog, err := schema.LoadDir("../../examples/lab")
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []synth.Options{{Nodes: 1, PerNode: 5}, {Nodes: 7, PerNode: 20}, {Nodes: 30, PerNode: 9}} {
		m, err := synth.Mesh(catalog, size)
		if err != nil {
			t.Fatal(err)
		}
		perNode := map[string]int{}
		for _, a := range m.Repo.Assignments {
			perNode[a.Node]++
		}
		if len(perNode) != size.Nodes {
			t.Fatalf("%+v: %d nodes hold assignments", size, len(perNode))
		}
		for node, n := range perNode {
			want := size.PerNode
			if node == m.Repo.Assignments[0].Node {
				want = n // the first node also holds the foundation seats
			}
			if n != want {
				t.Fatalf("%+v: node %s holds %d assignments", size, node, n)
			}
		}
		res, err := reconciler.Resolve(m.Repo, reconciler.ResolveOptions{Answers: m.Answers})
		if err != nil {
			t.Fatalf("%+v: %v", size, err)
		}
		if len(res.Waiting) != 0 {
			t.Fatalf("%+v: waiting %+v", size, res.Waiting)
		}
		if _, err := reconciler.Render(res, reconciler.Unsealed{}); err != nil {
			t.Fatalf("%+v: %v", size, err)
		}
		again, err := synth.Mesh(catalog, size)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(m, again) {
			t.Fatalf("%+v: two meshes differ", size)
		}
	}
}

// TestMeshRefusesImpossibleSizes: too few slots for the providers, or no
// node at all.
func TestMeshRefusesImpossibleSizes(t *testing.T) {
	catalog, err := schema.LoadDir("../../examples/lab")
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []synth.Options{{Nodes: 0, PerNode: 20}, {Nodes: 3, PerNode: 0}} {
		if _, err := synth.Mesh(catalog, size); err == nil {
			t.Errorf("%+v: no error", size)
		}
	}
}

// TestWriteDir: a synthetic mesh written as a repository reads back (with
// the real loader) to the same declarations.
func TestWriteDir(t *testing.T) {
	catalog, err := schema.LoadDir("../../examples/lab")
	if err != nil {
		t.Fatal(err)
	}
	m, err := synth.Mesh(catalog, synth.Options{Nodes: 4, PerNode: 8})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() + "/mesh"
	if err := synth.WriteDir(m, "../../examples/lab", dir); err != nil {
		t.Fatal(err)
	}
	read, err := schema.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	render := func(repo *schema.Repo) map[string][]byte {
		res, err := reconciler.Resolve(repo, reconciler.ResolveOptions{Answers: m.Answers})
		if err != nil {
			t.Fatal(err)
		}
		decls, err := reconciler.Render(res, reconciler.Unsealed{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]byte{}
		for n, d := range decls {
			if out[n], err = declaration.Marshal(d); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	want, got := render(m.Repo), render(read)
	if len(want) != 4 || !reflect.DeepEqual(want, got) {
		t.Fatalf("the written mesh renders differently (%d and %d nodes)", len(want), len(got))
	}
}
