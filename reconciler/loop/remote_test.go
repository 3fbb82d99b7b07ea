package loop

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshgen/meshgen/internal/meshtest"
	"github.com/meshgen/meshgen/reconciler/sign/signtest"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// TestReconcileRemote: the loop reconciles a mesh on a git server through
// its cache: branches are pushed, an unchanged reconcile pushes nothing, and
// a provider's answer reported on the server reaches the consumer.
func TestReconcileRemote(t *testing.T) {
	ctx := context.Background()
	m := newMesh(t)
	url := meshtest.GitDaemon(t, filepath.Dir(m.Bare)) + filepath.Base(m.Bare)
	signer, _ := signtest.Signer(t)
	if !IsRemote(url) || IsRemote(m.Bare) || IsRemote("./mesh.git") {
		t.Fatal("IsRemote misjudges a URL or a path")
	}
	r, err := New(Options{Repo: url, CacheDir: filepath.Join(t.TempDir(), "cache"), Vault: vaulttest.Start(t).Client,
		Signer: signer, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out, err := r.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Written, []string{"n1", "n2", "n3"}) {
		t.Fatalf("wrote %v", out.Written)
	}
	before := meshtest.Git(t, m.Bare, "for-each-ref")
	if out, err = r.Once(ctx); err != nil || len(out.Written) != 0 {
		t.Fatalf("unchanged: wrote %v, %v", out.Written, err)
	}
	if meshtest.Git(t, m.Bare, "for-each-ref") != before {
		t.Fatal("an unchanged reconcile moved refs on the server")
	}
	// The CA's answer, pushed to the server by hostd, reaches the proxy.
	m.PushReport(t, "n3", []byte(`{"mesh":"lab","node":"n3","generation":1,"attempted":1,"source":"x","time":"2026-01-01T00:00:00Z","answers":{"ca/init":{"root":"ROOT-FROM-N3"}}}`))
	out, err = r.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Waiting) != 0 || !slices.Contains(out.Written, "n2") {
		t.Fatalf("after the answer: waiting %v, wrote %v", out.Waiting, out.Written)
	}
}

// TestWatchPollsRemote: --watch on a git server polls it and reconciles a
// push to main; a poll that finds nothing new does not reconcile.
func TestWatchPollsRemote(t *testing.T) {
	m := newMesh(t)
	url := meshtest.GitDaemon(t, filepath.Dir(m.Bare)) + filepath.Base(m.Bare)
	signer, _ := signtest.Signer(t)
	r, err := New(Options{Repo: url, CacheDir: filepath.Join(t.TempDir(), "cache"), Vault: vaulttest.Start(t).Client,
		Signer: signer, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	outcomes, stop := watching(t, r, WatchOptions{Interval: 100 * time.Millisecond})
	if first := <-outcomes; len(first.Written) != 3 {
		t.Fatalf("first reconcile wrote %v", first.Written)
	}
	// Several polls find nothing new: no reconcile.
	time.Sleep(500 * time.Millisecond)
	if n := len(outcomes); n != 0 {
		t.Fatalf("%d reconciles without a push", n)
	}
	meshtest.Git(t, m.Work, "mv", "assignments/n2/proxy.yaml", "proxy.yaml.off")
	meshtest.Git(t, m.Work, "mv", "assignments/n2/gitea.yaml", "gitea.yaml.off")
	src := m.Push(t, "n2 runs nothing")
	o := <-outcomes
	stop()
	// n2 and the database serving gitea on n1 change; the CA on n3 does not.
	if o.Source != src || !slices.Equal(o.Written, []string{"n1", "n2"}) {
		t.Fatalf("after the push: source %s wrote %v; want %s and [n1 n2]", o.Source, o.Written, src)
	}
}

// TestOneShotRemote: on a git server, a new process whose inputs did not
// change is skipped, and a node branch changed on the server behind its
// back (the cache still holding the old tip) makes it reconcile in full and
// repair the branch.
func TestOneShotRemote(t *testing.T) {
	ctx := context.Background()
	m := newMesh(t)
	url := meshtest.GitDaemon(t, filepath.Dir(m.Bare)) + filepath.Base(m.Bare)
	v := vaulttest.Start(t)
	signer := testSigner(t)
	cache := filepath.Join(t.TempDir(), "cache")
	once := func() *Outcome {
		t.Helper()
		r, err := New(Options{Repo: url, CacheDir: cache, Vault: v.Client, Signer: signer, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		out, err := r.Once(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := once(); len(out.Written) != 3 {
		t.Fatalf("first reconcile wrote %v", out.Written)
	}
	if out := once(); !out.InputsUnchanged {
		t.Fatalf("unchanged inputs on the server were reconciled again: %+v", out)
	}
	good := meshtest.Git(t, m.Bare, "cat-file", "blob", "node/n2:declaration.json")
	c := strings.TrimSpace(meshtest.Git(t, m.Bare, "commit-tree", "node/n1^{tree}", "-p", "node/n2", "-m", "tampered"))
	meshtest.Git(t, m.Bare, "update-ref", "refs/heads/node/n2", c)
	if out := once(); out.InputsUnchanged || !slices.Equal(out.Written, []string{"n2"}) {
		t.Fatalf("a node branch changed on the server: %+v", out)
	}
	if got := meshtest.Git(t, m.Bare, "cat-file", "blob", "node/n2:declaration.json"); !strings.Contains(got, `"node": "n2"`) || got == good {
		t.Errorf("node/n2 was not repaired on the server (a new generation of n2's declaration):\n%.200s", got)
	}
	if out := once(); !out.InputsUnchanged {
		t.Fatalf("after the repair: %+v", out)
	}
}
