package branch

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gitDaemon serves the bare repositories under base on 127.0.0.1, with
// pushes enabled, and returns the git:// URL of base.
func gitDaemon(t *testing.T, base string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack",
		"--listen=127.0.0.1", fmt.Sprintf("--port=%d", port), "--base-path="+base, "--informative-errors", base)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
		}
	}()
	for range 100 {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return fmt.Sprintf("git://127.0.0.1:%d/", port)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("git daemon did not start listening")
	return ""
}

func TestWriteRemote(t *testing.T) {
	ctx := context.Background()
	served := bareRepo(t)
	url := gitDaemon(t, filepath.Dir(served)) + filepath.Base(served)
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
	url := gitDaemon(t, filepath.Dir(served)) + filepath.Base(served)
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
