package branch

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// TestOpenGitListsRefsBesideALockFile: while another writer holds
// refs/heads/node/n1.lock (empty until it writes the new hash), listing the
// repository's refs still works and shows the ref itself.
func TestOpenGitListsRefsBesideALockFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mesh.git")
	gitRun(t, "", "init", "-q", "--bare", "-b", "main", dir)
	work := t.TempDir()
	gitRun(t, work, "init", "-q", "-b", "main")
	gitRun(t, work, "commit", "-q", "--allow-empty", "-m", "first")
	gitRun(t, work, "push", "-q", dir, "main:refs/heads/node/n1")
	if err := os.WriteFile(filepath.Join(dir, "refs", "heads", "node", "n1.lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	repo, err := OpenGit(dir)
	if err != nil {
		t.Fatal(err)
	}
	refs, err := repo.References()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	if err := refs.ForEach(func(r *plumbing.Reference) error {
		if r.Type() == plumbing.HashReference {
			names = append(names, r.Name().String())
		}
		return nil
	}); err != nil {
		t.Fatalf("list refs beside a lock file: %v", err)
	}
	if len(names) != 1 || names[0] != "refs/heads/node/n1" {
		t.Fatalf("refs = %v, want [refs/heads/node/n1]", names)
	}
}
