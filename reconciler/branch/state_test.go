package branch

import (
	"context"
	"strings"
	"sync"
	"testing"
)

func TestWriteState(t *testing.T) {
	ctx := context.Background()
	repo := bareRepo(t)
	r, err := OpenLocal(repo)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ReadState(repo); err != nil || got != nil {
		t.Fatalf("a new repository holds state %q, %v", got, err)
	}
	opts := WriteOptions{Source: strings.Repeat("a", 40)}
	for _, tt := range []struct {
		content string
		wrote   bool
	}{
		{`{"ports":{"web@n1":{"http":31000}}}`, true},
		{`{"ports":{"web@n1":{"http":31000}}}`, false},
		{`{"ports":{"web@n1":{"http":31001}}}`, true},
	} {
		wrote, err := r.WriteState(ctx, []byte(tt.content), opts)
		if err != nil || wrote != tt.wrote {
			t.Fatalf("WriteState(%s) = %v, %v; want %v", tt.content, wrote, err, tt.wrote)
		}
		got, err := ReadState(repo)
		if err != nil || string(got) != tt.content {
			t.Fatalf("ReadState = %q, %v; want %q", got, err, tt.content)
		}
	}
	if n := len(strings.Fields(gitRun(t, repo, "rev-list", StateRef))); n != 2 {
		t.Errorf("%d state commits, want 2", n)
	}
	// Racing writers: every write lands on one history, none lost.
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 5 {
				if _, err := r.WriteState(ctx, []byte(strings.Repeat("x", w*10+i+1)), opts); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n := len(strings.Fields(gitRun(t, repo, "rev-list", "--first-parent", StateRef))); n != 22 {
		t.Errorf("%d state commits after 20 racing distinct writes, want 22", n)
	}
	gitRun(t, repo, "fsck", "--strict")
}
