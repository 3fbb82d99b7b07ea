package branch

import (
	"context"
	"regexp"
	"strings"
	"testing"
)

// TestDigestOfAnotherWriter: a tip whose commit states another content
// digest than this writer computes (a writer that hashed another encoding,
// or a damaged message) is compared by its canonical bytes instead, so an
// unchanged declaration still commits nothing; a changed one is written.
func TestDigestOfAnotherWriter(t *testing.T) {
	ctx := context.Background()
	repo := bareRepo(t)
	signer, _ := testSigner(t)
	r, err := OpenLocal(repo)
	if err != nil {
		t.Fatal(err)
	}
	opts := WriteOptions{Source: strings.Repeat("a", 40), Signer: signer}
	if _, err := r.Write(ctx, map[string]*Node{"n1": testNode("n1", "a", 1)}, opts); err != nil {
		t.Fatal(err)
	}
	// Restate the tip's digest as another writer would have.
	tip := strings.TrimSpace(gitRun(t, repo, "rev-parse", "node/n1"))
	msg := gitRun(t, repo, "log", "-1", "--format=%B", tip)
	other := regexp.MustCompile(`(?m)^Content: [0-9a-f]{64}$`)
	if !other.MatchString(msg) {
		t.Fatalf("the writer's message states no content digest:\n%s", msg)
	}
	msg = other.ReplaceAllString(msg, "Content: "+strings.Repeat("0", 64))
	tree := strings.TrimSpace(gitRun(t, repo, "rev-parse", tip+"^{tree}"))
	args := []string{"commit-tree", tree, "-m", msg}
	if parent, err := gitOut(repo, "rev-parse", "--verify", "-q", tip+"^"); err == nil {
		args = append(args, "-p", strings.TrimSpace(parent))
	}
	restated := strings.TrimSpace(gitRun(t, repo, args...))
	gitRun(t, repo, "update-ref", "refs/heads/node/n1", restated, tip)

	res, err := r.Write(ctx, map[string]*Node{"n1": testNode("n1", "a", 1)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(res)["n1"]; got != Unchanged {
		t.Fatalf("the same declaration under another digest: %s, want unchanged", got)
	}
	if now := strings.TrimSpace(gitRun(t, repo, "rev-parse", "node/n1")); now != restated {
		t.Fatal("the branch moved for an unchanged declaration")
	}
	res, err = r.Write(ctx, map[string]*Node{"n1": testNode("n1", "b", 1)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(res)["n1"]; got != Written {
		t.Fatalf("a changed declaration under another digest: %s, want written", got)
	}
}
