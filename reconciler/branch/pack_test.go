package branch

import (
	"fmt"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/object"
)

// TestPackVisibleDuringConcurrentWrites: a pack written is readable from a
// fresh storage at once, while other writers add packs beside it (go-billy's
// ReadDir used to fail, and go-git to see no pack at all, when another
// writer's temporary pack vanished mid-listing).
func TestPackVisibleDuringConcurrentWrites(t *testing.T) {
	repo := bareRepo(t)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 25 {
				objs := newObjects()
				b := objs.builder()
				tr := b.nodeTree(fmt.Appendf(nil, "%d-%d", w, i), []byte("s"), nil, nil)
				c := b.commit(tr, commitInfo{message: commitMessage("x", 1, "s", "", false)})
				l := &local{path: repo}
				if _, err := writePackfile(repo, objs, objs.hashes); err != nil {
					t.Error(err)
					return
				}
				if _, err := object.GetCommit(l.storage(), c); err != nil {
					t.Errorf("writer %d round %d: a fresh storage cannot read the commit just written: %v", w, i, err)
				}
				g, err := OpenGit(repo)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := g.CommitObject(c); err != nil {
					t.Errorf("writer %d round %d: OpenGit cannot read the commit just written: %v", w, i, err)
				}
			}
		})
	}
	wg.Wait()
}
