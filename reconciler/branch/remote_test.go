package branch

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshgen/meshgen/internal/meshtest"
)

func TestWriteRemote(t *testing.T) {
	ctx := context.Background()
	served := bareRepo(t)
	url := meshtest.GitDaemon(t, filepath.Dir(served)) + filepath.Base(served)
	signer, _ := testSigner(t)
	r, err := OpenRemote(url, RemoteOptions{CacheDir: filepath.Join(t.TempDir(), "cache")})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	nodes := map[string]*Node{"n1": testNode("n1", "a", 1), "n2": testNode("n2", "a", 2)}
	opts := WriteOptions{Source: strings.Repeat("a", 40), Signer: signer}
	res, err := r.Write(ctx, nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changed()) != 2 {
		t.Fatalf("first write to the server changed %v", res.Changed())
	}
	before := gitRun(t, served, "for-each-ref", "refs/heads/node")
	res, err = r.Write(ctx, nodes, opts)
	if err != nil || len(res.Changed()) != 0 || res.Objects != 0 {
		t.Fatalf("unchanged write: changed %v, %d objects, %v", res.Changed(), res.Objects, err)
	}
	if after := gitRun(t, served, "for-each-ref", "refs/heads/node"); after != before {
		t.Fatalf("unchanged write moved refs on the server")
	}
	// A second cache directory of the same server: another reconciler.
	if _, err := OpenRemote(url, RemoteOptions{CacheDir: r.CacheDir()}); err == nil {
		t.Fatal("a cache directory in use was opened twice")
	}
	gitRun(t, served, "fsck", "--strict")
	checkChain(t, served, "n1", []string{res.Nodes[0].Commit})
}

// TestRacingRemoteWriters: reconcilers, each with its own cache, race on
// one git server; the server's compare-and-swap makes the losers retry.
func TestRacingRemoteWriters(t *testing.T) {
	served := bareRepo(t)
	url := meshtest.GitDaemon(t, filepath.Dir(served)) + filepath.Base(served)
	signer, _ := testSigner(t)
	nodes := []string{"n1", "n2"}
	caches := make([]*Remote, 3)
	for i := range caches {
		r, err := OpenRemote(url, RemoteOptions{CacheDir: filepath.Join(t.TempDir(), "cache")})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		caches[i] = r
	}
	written := racers(t, len(caches), 8, nodes, func(w, _ int, set map[string]*Node) (*Result, error) {
		return caches[w].Write(context.Background(), set, WriteOptions{Source: strings.Repeat("e", 40), Signer: signer})
	})
	for _, n := range nodes {
		checkChain(t, served, n, written[n])
	}
	gitRun(t, served, "fsck", "--strict")
}
