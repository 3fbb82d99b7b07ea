package reconciler_test

import (
	"fmt"
	"testing"
	"testing/fstest"

	"github.com/rogpeppe/go-internal/txtar"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/reconciler"
	"github.com/meshgen/meshgen/reconciler/synth"
)

// catalog loads the catalog the synthetic meshes spread: the test catalog
// under testdata/.
func catalog(tb testing.TB) *schema.Repo {
	tb.Helper()
	ar, err := txtar.ParseFile("testdata/catalog.txtar")
	if err != nil {
		tb.Fatal(err)
	}
	fsys := fstest.MapFS{}
	for _, f := range ar.Files {
		fsys[f.Name] = &fstest.MapFile{Data: f.Data}
	}
	repo, err := schema.Load(fsys)
	if err != nil {
		tb.Fatal(err)
	}
	return repo
}

func synthMesh(tb testing.TB, nodes, perNode int) *synth.Result {
	tb.Helper()
	m, err := synth.Mesh(catalog(tb), synth.Options{Nodes: nodes, PerNode: perNode})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// BenchmarkResolveRender resolves and renders synthetic meshes of N nodes ×
// 20 assignments; the time per operation should grow linearly with N, and
// stay under 1 s at 1,000 nodes on 2 cores (issue 3).
func BenchmarkResolveRender(b *testing.B) {
	for _, nodes := range []int{100, 500, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			m := synthMesh(b, nodes, 20)
			opts := reconciler.ResolveOptions{Answers: m.Answers}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				res, err := reconciler.Resolve(m.Repo, opts)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := reconciler.Render(res, reconciler.Unsealed{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(m.Repo.Assignments)), "assignments")
		})
	}
}

// BenchmarkPlan plans a one-assignment change on a synthetic mesh of 1,000
// nodes × 20 assignments: both states resolved, rendered and compared
// (`meshgen plan` without the reading of the repository).
func BenchmarkPlan(b *testing.B) {
	base := synthMesh(b, 1000, 20)
	head := synthMesh(b, 1000, 20)
	// The change: one node's greeter says something else.
	for _, a := range head.Repo.Assignments {
		if a.Node == "n500" && a.Module == "greeter" {
			a.Values = map[string]string{"greeting": "changed", "workers": "1"}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p, err := reconciler.MakePlan(reconciler.PlanOptions{Base: base.Repo, Head: head.Repo, Answers: head.Answers})
		if err != nil {
			b.Fatal(err)
		}
		if !p.Resolves || !p.Changed() {
			b.Fatalf("plan resolves=%v changed=%v", p.Resolves, p.Changed())
		}
		_ = p.Markdown()
	}
}
