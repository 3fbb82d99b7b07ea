// Package vaulttest runs a real vaultd for other packages' tests: the real
// daemon code, in-process, on a real unix socket in a temporary directory,
// with a real age identity. Use it instead of a fake wherever a test needs a
// vault (the reconciler, genesis, the CLI).
//
//	v := vaulttest.Start(t)
//	node := vaulttest.NewNode(t)
//	resp, err := v.Client.Seal(ctx, client.SealRequest{Name: "db", Recipients: []string{node.Recipient().String()}})
//	plain := vaulttest.Open(t, node, resp.Sealed[0].Ciphertext)
package vaulttest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/meshgen/meshgen/vaultd"
	"github.com/meshgen/meshgen/vaultd/client"
)

// Options configure [StartWith].
type Options struct {
	// Dir is the vault's directory; empty means a new temporary one. Giving
	// the Dir of a stopped vault restarts it with its secrets.
	Dir string
	// Nodes, when set, are the mesh's node recipients; seals to others are
	// refused.
	Nodes []string
	// Now is the vault's clock; nil means time.Now.
	Now func() time.Time
}

// Vault is a running vaultd.
type Vault struct {
	// Client talks to it over its socket.
	Client *client.Client
	// Socket is the unix socket path, Dir the vault's directory.
	Socket, Dir string
	// Vault is the daemon itself, for tests that drive it directly (Tick).
	Vault *vaultd.Vault

	stop context.CancelFunc
	done chan error
}

// Start runs a vaultd in a new temporary directory until the test ends.
func Start(t testing.TB) *Vault {
	return StartWith(t, Options{})
}

// StartWith runs a vaultd configured by opts until the test ends.
func StartWith(t testing.TB, opts Options) *Vault {
	t.Helper()
	dir := opts.Dir
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "vault")
	}
	var nodesFile string
	if len(opts.Nodes) > 0 {
		nodesFile = filepath.Join(t.TempDir(), "nodes")
		if err := os.WriteFile(nodesFile, []byte(strings.Join(opts.Nodes, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	v, err := vaultd.Open(vaultd.Options{Dir: dir, NodesFile: nodesFile, Now: opts.Now})
	if err != nil {
		t.Fatalf("open vault: %v", err)
	}
	// A unix socket path is limited to 108 bytes: keep it short.
	sockDir, err := os.MkdirTemp("", "vt")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, "vault.sock")
	ln, err := vaultd.Listen("unix://" + sock)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tv := &Vault{Client: client.Dial(sock), Socket: sock, Dir: dir, Vault: v, stop: cancel, done: make(chan error, 1)}
	go func() { tv.done <- v.Serve(ctx, ln, vaultd.ServeOptions{Owner: -1, PolicyInterval: time.Hour}) }()
	t.Cleanup(func() {
		tv.Stop(t)
		os.RemoveAll(sockDir)
	})
	return tv
}

// Stop stops the vault (a test may restart it with StartWith and the same
// Dir). Stopping twice is harmless.
func (v *Vault) Stop(t testing.TB) {
	t.Helper()
	if v.stop == nil {
		return
	}
	v.stop()
	v.stop = nil
	v.Client.Close()
	if err := <-v.done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("vaultd: %v", err)
	}
	if err := v.Vault.Close(); err != nil {
		t.Errorf("close vault: %v", err)
	}
}

// NewNode makes a node's age identity, as a node makes its own.
func NewNode(t testing.TB) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Open decrypts ciphertext with a node's identity, as hostd does.
func Open(t testing.TB, id age.Identity, ciphertext []byte) []byte {
	t.Helper()
	r, err := age.Decrypt(bytes.NewReader(ciphertext), id)
	if err != nil {
		t.Fatalf("decrypt: %v", err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
