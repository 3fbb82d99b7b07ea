// Package test holds meshgen's end-to-end tests: a real bare repository,
// a real vaultd (vaulttest), real age identities and real cosign-format
// keys, driven through the reconciler's loop as `meshgen reconcile` does.
package test

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/meshgen/meshgen/internal/meshtest"
	"github.com/meshgen/meshgen/reconciler/loop"
	"github.com/meshgen/meshgen/reconciler/sign/signtest"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

func newMesh(t *testing.T) *meshtest.Mesh {
	t.Helper()
	return meshtest.New(t, "../examples/lab")
}

func newReconciler(t *testing.T, m *meshtest.Mesh, v *vaulttest.Vault, log io.Writer) (*loop.Reconciler, []byte) {
	t.Helper()
	signer, pub := signtest.Signer(t)
	r, err := loop.New(loop.Options{Repo: m.Bare, Vault: v.Client, Signer: signer, Logger: slog.New(slog.NewJSONHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, pub
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// enrolmentKey writes the reconciler's public key where a node's hostd is
// given it when enrolled, and returns the file.
func enrolmentKey(t *testing.T, pub []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "reconciler.pub")
	if err := os.WriteFile(p, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
