package branch

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListRefs: the refs under a prefix, loose and packed, as git itself
// lists them; a lock file another writer holds is not a ref.
func TestListRefs(t *testing.T) {
	repo := bareRepo(t)
	work := t.TempDir()
	gitRun(t, work, "init", "-q", "-b", "main")
	gitRun(t, work, "commit", "-q", "--allow-empty", "-m", "one")
	gitRun(t, work, "push", "-q", repo, "main", "main:refs/heads/status/n1", "main:refs/heads/node/n1", "main:refs/heads/node/n2")
	gitRun(t, work, "commit", "-q", "--allow-empty", "-m", "two")
	for _, tt := range []struct {
		name   string
		change func()
	}{
		{"loose", func() {}},
		{"packed", func() { gitRun(t, repo, "pack-refs", "--all") }},
		{"packed, one loose over it", func() { gitRun(t, work, "push", "-q", "-f", repo, "main:refs/heads/node/n2") }},
		{"a held lock file", func() {
			if err := os.WriteFile(filepath.Join(repo, "refs", "heads", "node", "n3.lock"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"a deleted ref", func() { gitRun(t, repo, "update-ref", "-d", "refs/heads/node/n1") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.change()
			for _, prefix := range []string{"refs/heads/", "refs/heads/node/", "refs/heads/status/", "refs/heads/nothing/"} {
				got, err := ListRefs(repo, prefix)
				if err != nil {
					t.Fatal(err)
				}
				want := map[string]string{}
				for _, line := range strings.Split(strings.TrimSpace(gitRun(t, repo, "for-each-ref", "--format=%(refname) %(objectname)", prefix)), "\n") {
					if name, h, ok := strings.Cut(line, " "); ok {
						want[name] = h
					}
				}
				gotS := map[string]string{}
				for name, h := range got {
					gotS[name] = h.String()
				}
				if !maps.Equal(gotS, want) {
					t.Errorf("ListRefs(%s) = %v, git lists %v", prefix, gotS, want)
				}
			}
		})
	}
	if _, err := ListRefs(t.TempDir(), "refs/heads/"); err == nil {
		t.Error("a directory that is no repository was listed")
	}
}
