package loop

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/reconciler/sign/signtest"
	"github.com/meshgen/meshgen/reconciler/synth"
	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// TestVaultKilledDuringFirstReconcile kills the real vaultd binary with
// SIGKILL while the first reconcile of a synthetic mesh (30 nodes × 20
// assignments, every secret new) is sealing in batches, restarts it on the
// same directory, and runs the reconciler again as a new process would:
// it completes, every node's secret files open with the node's own age
// identity, and the reconcile after it changes nothing.
func TestVaultKilledDuringFirstReconcile(t *testing.T) {
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "vaultd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/meshgen/meshgen/cmd/vaultd").CombinedOutput(); err != nil {
		t.Fatalf("build vaultd: %v\n%s", err, out)
	}
	catalog, err := schema.LoadDir("../../examples/lab")
	if err != nil {
		t.Fatal(err)
	}
	m, err := synth.Mesh(catalog, synth.Options{Nodes: 30, PerNode: 20})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]*age.X25519Identity{}
	for name, n := range m.Repo.Nodes {
		ids[name] = vaulttest.NewNode(t)
		n.Recipient = ids[name].Recipient().String()
	}
	m.Repo.Source = "0000000000000000000000000000000000000001"
	bare := filepath.Join(t.TempDir(), "mesh.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", bare).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	signer, _ := signtest.Signer(t)
	dir := filepath.Join(t.TempDir(), "vault")
	sockDir, err := os.MkdirTemp("", "lk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "vault.sock")
	start := func() (*exec.Cmd, *client.Client) {
		t.Helper()
		cmd := exec.Command(bin, "--dir", dir, "--listen", "unix://"+sock)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		c := client.Dial(sock)
		for i := 0; ; i++ {
			if _, err := c.Recipient(ctx); err == nil {
				return cmd, c
			}
			if i > 500 {
				t.Fatalf("vaultd did not start:\n%s", out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	reconcile := func(c *client.Client) (*Outcome, error) {
		r, err := New(Options{Repo: bare, Vault: c, Signer: signer, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		return r.Reconcile(ctx, m.Repo, m.Answers)
	}

	cmd, c := start()
	done := make(chan error, 1)
	go func() { _, err := reconcile(c); done <- err }()
	// Kill once some batches are on disk and others are not.
	var first error
	ended := false
	for !ended {
		if groups, _ := filepath.Glob(filepath.Join(dir, "records", "g*")); len(groups) >= 2 {
			break
		}
		select {
		case first = <-done:
			ended = true
		case <-time.After(time.Millisecond):
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	c.Close()
	if !ended {
		first = <-done
	}
	if first == nil {
		t.Log("the reconcile ended before the kill reached it")
	}

	_, c = start()
	out, err := reconcile(c)
	if err != nil {
		t.Fatalf("the reconcile after kill -9: %v", err)
	}
	if len(out.Written) != len(m.Repo.Nodes) || out.Sealed == 0 {
		t.Fatalf("the reconcile after kill -9 wrote %d of %d nodes, sealed %d", len(out.Written), len(m.Repo.Nodes), out.Sealed)
	}
	for name, id := range ids {
		files := strings.Fields(gitOut(t, bare, "ls-tree", "-r", "--name-only", "node/"+name, "secrets/"))
		if len(files) == 0 {
			t.Fatalf("node %s holds no secret", name)
		}
		for _, f := range files {
			ct := gitOut(t, bare, "cat-file", "blob", "node/"+name+":"+f)
			if v := vaulttest.Open(t, id, []byte(ct)); len(v) == 0 {
				t.Fatalf("node %s: %s is empty", name, f)
			}
		}
	}
	again, err := reconcile(c)
	if err != nil || len(again.Written) != 0 {
		t.Fatalf("the reconcile after: wrote %v, %v", again.Written, err)
	}
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}
