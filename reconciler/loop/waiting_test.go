package loop

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshgen/meshgen/internal/meshtest"
	"github.com/meshgen/meshgen/reconciler/status"
	"github.com/meshgen/meshgen/vaultd/client"
)

// needOperatorKey makes the lab's gitea read an API key only an operator
// can give (spec operator: true), and pushes it; it returns the secret's
// name.
func needOperatorKey(t *testing.T, m *meshtest.Mesh) string {
	t.Helper()
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
	return "gitea@n2.api-key"
}

// TestWaitsRecorded: what a reconcile finds waiting, an operator's secret
// not delivered to vaultd included, is recorded on meshgen/state for
// `meshgen status`, with the hint and the commit of main it is as of; a
// reconcile that does nothing leaves the record as it is, and the reconcile
// after the delivery records that nothing waits for it any more.
func TestWaitsRecorded(t *testing.T) {
	ctx := context.Background()
	m := newMesh(t)
	name := needOperatorKey(t, m)
	r, _, v := newReconcilerVault(t, m, io.Discard)

	if w, err := status.ReadWaits(m.Bare); err != nil || w != nil {
		t.Fatalf("before any reconcile: waits %+v, %v; want no record", w, err)
	}
	out, err := r.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := status.ReadWaits(m.Bare)
	if err != nil || w == nil {
		t.Fatalf("waits after the reconcile: %+v, %v", w, err)
	}
	isKey := func(x status.Waiting) bool { return x.Assignment == "gitea@n2" && x.Requirement == "api-key" }
	i := slices.IndexFunc(w.Waiting, isKey)
	if w.Source != out.Source || i < 0 || w.Waiting[i].Hint != "meshgen vault put "+name || w.Waiting[i].Provider != "vault@n1" {
		t.Fatalf("recorded waits %+v; want gitea@n2's api-key with its hint, as of %s", w, out.Source)
	}
	// Every wait the reconcile found is recorded, the provider's answer
	// the lab's proxy waits for among them.
	if len(w.Waiting) != len(out.Waiting) || len(w.Waiting) < 2 {
		t.Fatalf("recorded %d waits, the reconcile found %d: %+v", len(w.Waiting), len(out.Waiting), w.Waiting)
	}

	state := meshtest.Git(t, m.Bare, "rev-parse", "meshgen/state")
	if again, err := r.Once(ctx); err != nil || !again.InputsUnchanged {
		t.Fatalf("second reconcile: %+v, %v; want nothing changed", again, err)
	}
	if meshtest.Git(t, m.Bare, "rev-parse", "meshgen/state") != state {
		t.Fatal("a reconcile that changed nothing moved meshgen/state")
	}

	recipient, err := v.Client.Recipient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := client.SealToVault(recipient, []byte("operator-chosen-api-key-4242"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Client.Put(ctx, client.PutRequest{Name: name, Ciphertext: ct}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	w, err = status.ReadWaits(m.Bare)
	if err != nil || w == nil {
		t.Fatalf("waits after the delivery: %+v, %v", w, err)
	}
	if slices.ContainsFunc(w.Waiting, isKey) || len(w.Waiting) != len(out.Waiting)-1 {
		t.Fatalf("after the delivery the record still holds %+v", w.Waiting)
	}
}

// TestWaitsMarshalStable: the same waits are the same bytes, none recorded
// as an empty list (so status can tell "nothing waits" from "no record").
func TestWaitsMarshalStable(t *testing.T) {
	a, err := waitsOf("abc", nil).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != `{"source":"abc","waiting":[]}` {
		t.Fatalf("no waits recorded as %s", a)
	}
}
