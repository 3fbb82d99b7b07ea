package reconciler

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	schema "github.com/meshgen/meshgen/catalog-schema"
)

// gitRun runs git in dir, failing the test on error.
func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.org"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// TestPlanRepositoryFromGit: examples/lab committed to a real git repository
// plans from nothing to main as it does from the directory, whether the
// repository is a work tree, a packed bare clone or a linked work tree, and
// a ref that does not exist is refused with schema.LoadRef's error.
func TestPlanRepositoryFromGit(t *testing.T) {
	lab, err := schema.LoadDir("../examples/lab")
	if err != nil {
		t.Fatal(err)
	}
	want, err := MakePlan(PlanOptions{Head: lab})
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(t.TempDir(), "mesh")
	if err := os.CopyFS(work, os.DirFS("../examples/lab")); err != nil {
		t.Fatal(err)
	}
	gitRun(t, work, "init", "-q", "-b", "main")
	gitRun(t, work, "add", ".")
	gitRun(t, work, "commit", "-q", "-m", "lab")
	bare := filepath.Join(t.TempDir(), "mesh.git")
	gitRun(t, filepath.Dir(bare), "clone", "-q", "--bare", work, bare)
	gitRun(t, bare, "gc", "-q") // objects in a pack, as a server keeps them
	linked := filepath.Join(t.TempDir(), "linked")
	gitRun(t, work, "worktree", "add", "-q", "--detach", linked)

	for _, dir := range []string{work, bare, linked} {
		got, err := PlanRepository(PlanSource{Repo: dir, Head: "main"})
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, f := range []func(*Plan) []byte{(*Plan).Markdown, func(p *Plan) []byte { js, _ := p.JSON(); return js }} {
			if a, b := f(want), f(got); len(a) == 0 || !bytes.Equal(a, b) {
				t.Fatalf("%s: the plan from git differs from the plan from the directory:\n%s", dir, lineDiff(string(a), string(b)))
			}
		}
		_, errLoad := schema.LoadRef(dir, "no-such-branch")
		_, errPlan := PlanRepository(PlanSource{Repo: dir, Head: "no-such-branch"})
		if errLoad == nil || errPlan == nil || !bytes.Contains([]byte(errPlan.Error()), []byte(errLoad.Error())) {
			t.Fatalf("%s: a missing ref: LoadRef says %v, PlanRepository says %v", dir, errLoad, errPlan)
		}
	}
}
