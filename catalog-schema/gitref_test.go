package schema

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runGit runs git in dir with a fixed identity and returns its trimmed output.
func runGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.org",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.org",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// copyTree copies the directory src into dst.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}

// TestLoadRef commits the example mesh on main in a real git repository and
// reads it back by branch, full ref and hash, from the working repository,
// from a bare clone (loose objects and packed) and from a linked work tree,
// never from the working tree.
func TestLoadRef(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed to make the test repository")
	}
	work := filepath.Join(t.TempDir(), "mesh")
	copyTree(t, "../examples/lab", work)
	runGit(t, work, "init", "-q", "-b", "main")
	runGit(t, work, "add", "-A")
	runGit(t, work, "commit", "-q", "-m", "the lab")
	good := runGit(t, work, "rev-parse", "HEAD")

	// A second commit breaks the mesh; an uncommitted change breaks it more.
	if err := os.WriteFile(filepath.Join(work, "assignments/n1/ghost.yaml"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, work, "add", "-A")
	runGit(t, work, "commit", "-q", "-m", "assign a module that does not exist")
	broken := runGit(t, work, "rev-parse", "HEAD")
	if err := os.WriteFile(filepath.Join(work, "mesh.yaml"), []byte("name: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(t.TempDir(), "mesh.git")
	runGit(t, filepath.Dir(bare), "clone", "-q", "--bare", work, bare)
	packed := filepath.Join(t.TempDir(), "packed.git")
	runGit(t, filepath.Dir(packed), "clone", "-q", "--bare", work, packed)
	runGit(t, packed, "gc", "-q") // objects in a pack, as a server keeps them
	// A linked work tree: its .git is a file, its refs are the main one's.
	linked := filepath.Join(t.TempDir(), "linked")
	runGit(t, work, "worktree", "add", "-q", "--detach", linked, broken)

	for _, repo := range []string{work, bare, packed, linked} {
		for _, tc := range []struct {
			ref, source string
		}{
			{good, good},
			{good[:12], good},
		} {
			r, err := LoadRef(repo, tc.ref)
			if err != nil {
				t.Fatalf("LoadRef(%s, %s): %v", repo, tc.ref, err)
			}
			if r.Source != tc.source {
				t.Errorf("LoadRef(%s, %s).Source = %s; want %s", repo, tc.ref, r.Source, tc.source)
			}
			if len(r.Modules) != 6 || len(r.Nodes) != 3 || r.Mesh.Name != "lab" {
				t.Errorf("LoadRef(%s, %s) read %d modules, %d nodes, mesh %q", repo, tc.ref, len(r.Modules), len(r.Nodes), r.Mesh.Name)
			}
			if pos := r.Modules["gitea"].Requires[0].Pos; pos.File != "catalog/modules/gitea/module.yaml" || pos.Line == 0 {
				t.Errorf("requirement position %v; want a line in catalog/modules/gitea/module.yaml", pos)
			}
		}
		for _, ref := range []string{"main", "refs/heads/main", broken, "HEAD"} {
			_, err := LoadRef(repo, ref)
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("LoadRef(%s, %s) = %v; want the problems of the second commit", repo, ref, err)
			}
			if got := ps.Error(); got != `assignments/n1/ghost.yaml:1:1: module "ghost" does not exist` {
				t.Errorf("LoadRef(%s, %s):\n%s\nwant only the ghost module (the working tree is not read)", repo, ref, got)
			}
		}
		_, err := LoadRef(repo, "no-such-branch")
		var ps Problems
		if err == nil || errors.As(err, &ps) || !strings.Contains(err.Error(), "no-such-branch") {
			t.Errorf("LoadRef(%s, no-such-branch) = %v; want an error naming the ref", repo, err)
		}
	}
	if _, err := LoadRef(t.TempDir(), "main"); err == nil {
		t.Error("LoadRef of a directory that is no git repository succeeded")
	}
}

// TestRefFS reads files and directories through the fs.FS over a tree.
func TestRefFS(t *testing.T) {
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "a/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "a/b/c.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, work, "init", "-q", "-b", "main")
	runGit(t, work, "add", "-A")
	runGit(t, work, "commit", "-q", "-m", "one file")
	fsys, hash, err := RefFS(work, "main")
	if err != nil {
		t.Fatal(err)
	}
	if len(hash) != 40 {
		t.Errorf("hash %q is not a full commit hash", hash)
	}
	if err := fstestFS(fsys, "a/b/c.txt"); err != nil {
		t.Error(err)
	}
}
