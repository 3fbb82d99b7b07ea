package reconciler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/rogpeppe/go-internal/txtar"
	"pgregory.net/rapid"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/hostd/declaration"
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
		// Up to a few hundred assignments: enough that they are resolved
		// and rendered in parallel, so the schedule must not matter either.
		nodes := rapid.IntRange(1, 24).Draw(t, "nodes")
		perNode := rapid.IntRange(2, 12).Draw(t, "perNode")
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

// shuffledFS lists every directory in an order drawn by rapid, so a test
// sees whether anything downstream depends on the order files are read in.
type shuffledFS struct {
	fstest.MapFS
	t *rapid.T
}

func (s shuffledFS) ReadDir(name string) ([]fs.DirEntry, error) {
	ents, err := s.MapFS.ReadDir(name)
	if err != nil {
		return nil, err
	}
	return rapid.Permutation(ents).Draw(s.t, "readdir "+name), nil
}

// TestResolutionIsIndependentOfFileOrder reads the lab case, with a random
// subset of its assignment files, through a file system that lists every
// directory in a random order: loading, resolving and rendering give the
// same bytes as reading it in order.
func TestResolutionIsIndependentOfFileOrder(t *testing.T) {
	base := fstest.MapFS{}
	var assignments []string
	var opts caseOptions
	for _, file := range []string{"testdata/catalog.txtar", "testdata/resolve/lab.txtar"} {
		ar, err := txtar.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range ar.Files {
			switch {
			case f.Name == "opts.json":
				if err := json.Unmarshal(f.Data, &opts); err != nil {
					t.Fatal(err)
				}
			default:
				base[f.Name] = &fstest.MapFile{Data: f.Data}
				if strings.HasPrefix(f.Name, "assignments/") {
					assignments = append(assignments, f.Name)
				}
			}
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		fsys := fstest.MapFS{}
		for name, f := range base {
			fsys[name] = f
		}
		for _, a := range assignments {
			if !rapid.Bool().Draw(t, "keep "+a) {
				delete(fsys, a)
			}
		}
		inOrder, loadErr := schema.Load(fsys)
		shuffled, err := schema.Load(shuffledFS{fsys, t})
		if loadErr != nil || err != nil {
			// Some subsets do not load (a pin on an assignment left out):
			// then both readings must refuse alike.
			if fmt.Sprint(loadErr) != fmt.Sprint(err) {
				t.Fatalf("loading in order: %v\nloading shuffled: %v", loadErr, err)
			}
			return
		}
		want, err := snapshot(inOrder, ResolveOptions(opts))
		if err != nil {
			t.Fatal(err)
		}
		got, err := snapshot(shuffled, ResolveOptions(opts))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want, got) {
			t.Fatalf("reading the files in another order differs:\n%s", lineDiff(string(want), string(got)))
		}
	})
}

// TestSameNodesRenderAlike checks what lets a plan render only some nodes:
// every node sameNodes calls the same in a base and a head renders to the
// same bytes in both. The head is the base with random assignments dropped,
// given other values or other seats.
func TestSameNodesRenderAlike(t *testing.T) {
	catalog := testCatalog(t)
	rapid.Check(t, func(t *rapid.T) {
		nodes := rapid.IntRange(1, 8).Draw(t, "nodes")
		m, err := synth.Mesh(catalog, synth.Options{Nodes: nodes, PerNode: rapid.IntRange(2, 8).Draw(t, "perNode")})
		if err != nil {
			t.Fatal(err)
		}
		head := *m.Repo
		head.Assignments = nil
		for i, a := range m.Repo.Assignments {
			switch rapid.IntRange(0, 9).Draw(t, fmt.Sprintf("change %d", i)) {
			case 0: // dropped
				continue
			case 1: // another value
				c := *a
				c.Values = map[string]string{"greeting": "changed", "workers": "9", "title": "changed"}
				head.Assignments = append(head.Assignments, &c)
			default:
				head.Assignments = append(head.Assignments, a)
			}
		}
		opts := ResolveOptions{Answers: m.Answers}
		base, err := Resolve(m.Repo, opts)
		if err != nil {
			t.Fatal(err)
		}
		opts.Previous = &base.State
		res, err := Resolve(&head, opts)
		if err != nil {
			t.Skip("the head does not resolve") // nothing to render
		}
		same := sameNodes(base, res, m.Repo, &head)
		bd, err := Render(base, Unsealed{})
		if err != nil {
			t.Fatal(err)
		}
		hd, err := Render(res, Unsealed{})
		if err != nil {
			t.Fatal(err)
		}
		for n, ok := range same {
			if !ok {
				continue
			}
			x, _ := declaration.Marshal(bd[n])
			y, _ := declaration.Marshal(hd[n])
			if !bytes.Equal(x, y) {
				t.Fatalf("node %s is called the same but renders differently:\n%s", n, lineDiff(string(x), string(y)))
			}
		}
	})
}

// TestPlanProperties: for random meshes, planning a state against itself
// changes nothing, and planning it from nothing adds every resource its
// declarations hold, and nothing else.
func TestPlanProperties(t *testing.T) {
	catalog := testCatalog(t)
	rapid.Check(t, func(t *rapid.T) {
		m, err := synth.Mesh(catalog, synth.Options{Nodes: rapid.IntRange(1, 10).Draw(t, "nodes"), PerNode: rapid.IntRange(2, 8).Draw(t, "perNode")})
		if err != nil {
			t.Fatal(err)
		}
		var answers Answers
		if rapid.Bool().Draw(t, "answered") {
			answers = m.Answers
		}
		same, err := MakePlan(PlanOptions{Base: m.Repo, Head: m.Repo, Answers: answers})
		if err != nil {
			t.Fatal(err)
		}
		if !same.Resolves || same.Changed() {
			t.Fatalf("a state planned against itself: resolves=%v changed=%v", same.Resolves, same.Changed())
		}
		fresh, err := MakePlan(PlanOptions{Head: m.Repo, Answers: answers})
		if err != nil {
			t.Fatal(err)
		}
		res, err := Resolve(m.Repo, ResolveOptions{Answers: answers})
		if err != nil {
			t.Fatal(err)
		}
		decls, err := Render(res, Unsealed{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range fresh.Nodes {
			if len(n.Changed)+len(n.Removed) > 0 || len(n.Added) != len(decls[n.Node].Resources) {
				t.Fatalf("node %s from nothing: %d added, %d changed, %d removed; it holds %d resources",
					n.Node, len(n.Added), len(n.Changed), len(n.Removed), len(decls[n.Node].Resources))
			}
		}
		if len(fresh.Secrets) != len(res.Secrets) {
			t.Fatalf("from nothing %d secrets change; the mesh needs %d", len(fresh.Secrets), len(res.Secrets))
		}
	})
}
