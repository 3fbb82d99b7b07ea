package reconciler

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

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

// TestReadRefReadsWhatLoadRefReads: examples/lab committed to a real git
// repository reads the same with ReadRef as with schema.LoadRef, from a work
// tree and from a bare clone, and a ref that does not exist is refused alike.
func TestReadRefReadsWhatLoadRefReads(t *testing.T) {
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

	for _, dir := range []string{work, bare} {
		want, err := schema.LoadRef(dir, "main")
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadRef(dir, "main")
		if err != nil {
			t.Fatal(err)
		}
		if got.Source == "" || got.Source != want.Source {
			t.Fatalf("%s: source %q, want %q", dir, got.Source, want.Source)
		}
		a, err := snapshot(want, ResolveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := snapshot(got, ResolveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("%s: ReadRef and LoadRef differ:\n%s", dir, lineDiff(string(a), string(b)))
		}
		_, errLoad := schema.LoadRef(dir, "no-such-branch")
		_, errRead := ReadRef(dir, "no-such-branch")
		if errLoad == nil || errRead == nil || errLoad.Error() != errRead.Error() {
			t.Fatalf("%s: a missing ref: LoadRef says %v, ReadRef says %v", dir, errLoad, errRead)
		}
	}
}

// TestMemFS checks the in-memory file system ReadRef loads from against the
// standard library's conformance test.
func TestMemFS(t *testing.T) {
	m := newMemFS(time.Unix(1, 0))
	for _, f := range []string{"mesh.yaml", "nodes/n1.yaml", "nodes/n2.yaml", "catalog/modules/a/module.yaml", "assignments/n1/a.yaml"} {
		m.add(f, []byte("x: "+f+"\n"))
	}
	if err := fstest.TestFS(m, "mesh.yaml", "nodes/n2.yaml", "catalog/modules/a/module.yaml", "assignments/n1/a.yaml"); err != nil {
		t.Fatal(err)
	}
}
