package loop

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshgen/meshgen/reconciler"
	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// TestOperatorSecretWaitsForDelivery: a secret an operator chooses (an
// external API key) is never made by the vault. Until the operator delivers
// it the reconcile commits nothing and says how to deliver it; after
// `meshgen vault put`, the consumer's node receives it sealed.
func TestOperatorSecretWaitsForDelivery(t *testing.T) {
	ctx := context.Background()
	m := newMesh(t)
	gitea := filepath.Join(m.Work, "catalog", "modules", "gitea", "module.yaml")
	b, err := os.ReadFile(gitea)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), "requires:\n", `requires:
  - name: api-key
    contract: secret
    provider: module
    seat: mesh-vault
    spec: {operator: true}
`, 1) + `  - file: api-key
    path: ${{ data.path }}/secrets/api-key
    secret: ${{ api-key.value }}
    mode: "0400"
`
	if err := os.WriteFile(gitea, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Push(t, "gitea needs an external API key")
	r, _, v := newReconcilerVault(t, m, io.Discard)

	_, err = r.Once(ctx)
	if err == nil || !strings.Contains(err.Error(), "meshgen vault put gitea@n2.api-key") {
		t.Fatalf("reconcile before delivery: %v; want it to ask for `meshgen vault put gitea@n2.api-key`", err)
	}
	if refs := refs(t, m); refs != "" {
		t.Fatalf("a reconcile waiting for an operator's value wrote branches:\n%s", refs)
	}

	const value = "operator-chosen-api-key-0123456789"
	recipient, err := v.Client.Recipient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := client.SealToVault(recipient, []byte(value))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Client.Put(ctx, client.PutRequest{Name: "gitea@n2.api-key", Ciphertext: ct}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Once(ctx); err != nil {
		t.Fatalf("reconcile after delivery: %v", err)
	}
	sealed := gitRun(t, m.Bare, "cat-file", "blob", "node/n2:"+reconciler.SealedPath("gitea@n2.api-key"))
	if got := string(vaulttest.Open(t, m.IDs["n2"], []byte(sealed))); got != value {
		t.Fatalf("n2 opens the API key to %q, want the operator's value", got)
	}
}
