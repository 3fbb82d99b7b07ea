package reconciler_test

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/internal/benchcpu"
	"github.com/meshgen/meshgen/reconciler"
	"github.com/meshgen/meshgen/reconciler/synth"
)

// catalog loads the catalog the synthetic meshes spread: the example
// mesh's, examples/lab.
func catalog(tb testing.TB) *schema.Repo {
	tb.Helper()
	repo, err := schema.LoadDir("../examples/lab")
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
			defer benchcpu.Report(b)()
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

// planPair is a synthetic mesh of 1,000 nodes × 20 assignments, and the same
// mesh with gitea on n500 given values: a one-assignment change to plan.
func planPair(b *testing.B, values map[string]string) (base, head *synth.Result) {
	b.Helper()
	base, head = synthMesh(b, 1000, 20), synthMesh(b, 1000, 20)
	for _, a := range head.Repo.Assignments {
		if a.Node == "n500" && a.Module == "gitea" {
			a.Values = values
			return base, head
		}
	}
	b.Fatal("no gitea@n500 to change")
	return nil, nil
}

// checkPlan fails unless p, made without error, resolves and changes
// something, and writes it as markdown as `meshgen plan` does.
func checkPlan(b *testing.B, p *reconciler.Plan, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
	if !p.Resolves || !p.Changed() {
		b.Fatalf("plan resolves=%v changed=%v", p.Resolves, p.Changed())
	}
	_ = p.Markdown()
}

// BenchmarkPlan plans a one-assignment change on a synthetic mesh of 1,000
// nodes × 20 assignments: both states resolved, rendered and compared
// (`meshgen plan` without the reading of the repository).
func BenchmarkPlan(b *testing.B) {
	base, head := planPair(b, map[string]string{"public-name": "renamed.example.org", "app-name": "renamed"})
	b.ReportAllocs()
	b.ResetTimer()
	defer benchcpu.Report(b)()
	for b.Loop() {
		p, err := reconciler.MakePlan(reconciler.PlanOptions{Base: base.Repo, Head: head.Repo, Answers: head.Answers})
		checkPlan(b, p, err)
	}
}

// BenchmarkPlanFromDisk is `meshgen plan` on a synthetic mesh of
// 1,000 nodes × 20 assignments written as YAML files, with a base directory
// one assignment apart: both read with the loader, resolved, rendered,
// compared and written as markdown (issue 3: under 2 s).
func BenchmarkPlanFromDisk(b *testing.B) {
	base, head := planPair(b, map[string]string{"public-name": "renamed.example.org"})
	dir := b.TempDir()
	for name, m := range map[string]*synth.Result{"base": base, "head": head} {
		if err := synth.WriteDir(m, "../examples/lab", dir+"/"+name); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	defer benchcpu.Report(b)()
	for b.Loop() {
		// Read side by side, as `meshgen plan` does.
		var baseRepo *schema.Repo
		var baseErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			baseRepo, baseErr = schema.LoadDir(dir + "/base")
		}()
		headRepo, err := schema.LoadDir(dir + "/head")
		<-done
		if err != nil || baseErr != nil {
			b.Fatal(err, baseErr)
		}
		p, err := reconciler.MakePlan(reconciler.PlanOptions{Base: baseRepo, Head: headRepo, Answers: head.Answers})
		checkPlan(b, p, err)
	}
}

// BenchmarkPlanFromGit is `meshgen plan --base main --head pr` on a real git
// repository holding the synthetic mesh of 1,000 nodes × 20 assignments at
// two commits, one assignment apart ([reconciler.PlanRepository]: both refs
// read side by side, resolved, rendered, compared), written as markdown.
func BenchmarkPlanFromGit(b *testing.B) {
	base, head := planPair(b, map[string]string{"public-name": "renamed.example.org"})
	dir := b.TempDir()
	repo := dir + "/mesh"
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=b", "-c", "user.email=b@example.org"}, args...)...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := synth.WriteDir(base, "../examples/lab", repo); err != nil {
		b.Fatal(err)
	}
	git("init", "-q", "-b", "main")
	git("add", ".")
	git("commit", "-q", "-m", "base")
	git("checkout", "-q", "-b", "pr")
	if err := os.RemoveAll(repo + "/assignments"); err != nil {
		b.Fatal(err)
	}
	if err := synth.WriteDir(head, "../examples/lab", dir+"/head"); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(dir+"/head/assignments", repo+"/assignments"); err != nil {
		b.Fatal(err)
	}
	git("add", "-A")
	git("commit", "-q", "-m", "head")
	git("gc", "-q")
	b.ReportAllocs()
	b.ResetTimer()
	defer benchcpu.Report(b)()
	for b.Loop() {
		p, err := reconciler.PlanRepository(reconciler.PlanSource{Repo: repo, Base: "main", Head: "pr", Answers: head.Answers})
		checkPlan(b, p, err)
	}
}
