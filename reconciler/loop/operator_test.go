package loop

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/meshgen/meshgen/internal/meshtest"
	"github.com/meshgen/meshgen/reconciler"
	"github.com/meshgen/meshgen/reconciler/branch"
	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// TestOperatorSecretWaitsForDelivery: a secret an operator chooses (an
// external API key) is never made by the vault. Until the operator delivers
// it, its consumer waits (design 27, "Refusing": a state, not a failure):
// nothing that reads it is rendered for that consumer, every other node and
// resource is reconciled as usual, and the outcome and the log line say how
// to deliver it. After `meshgen vault put`, the next reconcile delivers it
// sealed to the consumer's node.
func TestOperatorSecretWaitsForDelivery(t *testing.T) {
	ctx := context.Background()
	m := newMesh(t)
	name := needOperatorKey(t, m)
	var log bytes.Buffer
	r, _, v := newReconcilerVault(t, m, &log)

	out, err := r.Once(ctx)
	if err != nil {
		t.Fatalf("reconcile before delivery: %v; want the consumer waiting, not a failure", err)
	}
	i := slices.IndexFunc(out.Waiting, waitsForKey)
	if i < 0 {
		t.Fatalf("waiting %+v: want gitea@n2's api-key", out.Waiting)
	}
	if w := out.Waiting[i]; w.Hint != "meshgen vault put "+name {
		t.Fatalf("waiting hint %q, want `meshgen vault put %s`", w.Hint, name)
	}
	if !strings.Contains(log.String(), "gitea@n2/api-key: meshgen vault put "+name) {
		t.Fatalf("log line does not say how to deliver the secret:\n%s", log.String())
	}
	// Every node's branch is written, n2's without the resource reading
	// the undelivered secret.
	written := meshtest.Git(t, m.Bare, "for-each-ref", "--format=%(refname:short)", "refs/heads/node")
	for _, n := range []string{"n1", "n2", "n3"} {
		if !strings.Contains(written, "node/"+n+"\n") {
			t.Fatalf("branches after the reconcile:\n%s\nwant node/%s written", written, n)
		}
	}
	decl := meshtest.Git(t, m.Bare, "cat-file", "blob", "node/n2:"+branch.DeclarationFile)
	if strings.Contains(decl, "api-key") || strings.Contains(decl, name) {
		t.Fatalf("n2's declaration renders the undelivered secret:\n%s", decl)
	}
	if !strings.Contains(decl, "gitea") {
		t.Fatalf("n2's declaration lost gitea's other resources:\n%s", decl)
	}
	if got := meshtest.Git(t, m.Bare, "ls-tree", "-r", "--name-only", "node/n2"); strings.Contains(got, reconciler.SealedPath(name, 1)) {
		t.Fatalf("n2's branch holds %s before delivery:\n%s", reconciler.SealedPath(name, 1), got)
	}

	// While nothing changes, the next reconcile does nothing and still
	// says what it waits for.
	again, err := r.Once(ctx)
	if err != nil {
		t.Fatalf("second reconcile before delivery: %v", err)
	}
	if !again.InputsUnchanged || !slices.ContainsFunc(again.Waiting, waitsForKey) {
		t.Fatalf("second reconcile before delivery: unchanged %v, waiting %+v; want unchanged and still waiting", again.InputsUnchanged, again.Waiting)
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
	if _, err := v.Client.Put(ctx, client.PutRequest{Name: name, Ciphertext: ct}); err != nil {
		t.Fatal(err)
	}
	out, err = r.Once(ctx)
	if err != nil {
		t.Fatalf("reconcile after delivery: %v", err)
	}
	if out.InputsUnchanged || slices.ContainsFunc(out.Waiting, waitsForKey) {
		t.Fatalf("reconcile after delivery: unchanged %v, waiting %+v; want the secret delivered", out.InputsUnchanged, out.Waiting)
	}
	if !slices.Contains(out.Written, "n2") {
		t.Fatalf("written %v after delivery, want n2", out.Written)
	}
	decl = meshtest.Git(t, m.Bare, "cat-file", "blob", "node/n2:"+branch.DeclarationFile)
	if !strings.Contains(decl, name) {
		t.Fatalf("n2's declaration does not hold the delivered secret:\n%s", decl)
	}
	sealed := meshtest.Git(t, m.Bare, "cat-file", "blob", "node/n2:"+reconciler.SealedPath(name, 1))
	if got := string(vaulttest.Open(t, m.IDs["n2"], []byte(sealed))); got != value {
		t.Fatalf("n2 opens the API key to %q, want the operator's value", got)
	}
	if strings.Contains(log.String(), value) {
		t.Fatal("the log holds the operator's secret value")
	}
}

func waitsForKey(w reconciler.Waiting) bool {
	return w.Assignment == "gitea@n2" && w.Requirement == "api-key"
}
