package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/internal/meshtest"
	"github.com/meshgen/meshgen/reconciler/branch"
	"github.com/meshgen/meshgen/reconciler/loop"
	"github.com/meshgen/meshgen/reconciler/sign/signtest"
	"github.com/meshgen/meshgen/reconciler/status"
	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// meshgenStatus runs `meshgen status` with args and returns its standard
// output and error.
func meshgenStatus(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(append([]string{"status"}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// TestStatusShowsOperatorSecretWait: on a real repository reconciled with a
// real vaultd, an operator's secret not delivered yet is shown by `meshgen
// status` (text and JSON) as a wait with the command that delivers it,
// without any vault given to status, and without making it fail; once the
// value is put and the mesh reconciled, the wait is gone.
func TestStatusShowsOperatorSecretWait(t *testing.T) {
	t.Setenv("MESHGEN_VAULT", "") // status is given no vault
	ctx := context.Background()
	m := meshtest.New(t, "../../examples/lab")
	gitea := filepath.Join(m.Work, "catalog", "modules", "gitea", "module.yaml")
	b, err := os.ReadFile(gitea)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), "requires:\n", "requires:\n  - name: api-key\n    contract: secret\n    provider: module\n    seat: mesh-vault\n    spec: {operator: true}\n", 1) +
		"  - file: api-key\n    path: ${{ data.path }}/secrets/api-key\n    secret: ${{ api-key.value }}\n    mode: \"0400\"\n"
	if err := os.WriteFile(gitea, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Push(t, "gitea needs an external API key")
	v := vaulttest.Start(t)
	signer, _ := signtest.Signer(t)
	r, err := loop.New(loop.Options{Repo: m.Bare, Vault: v.Client, Signer: signer, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Every node applied its latest generation just now, as hostd reports:
	// nothing fails or is stale, so only the waits could fail status.
	reconcile := func() {
		t.Helper()
		if _, err := r.Once(ctx); err != nil {
			t.Fatal(err)
		}
		nodes, err := status.Read(m.Bare, status.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			body, _ := json.Marshal(declaration.Report{Mesh: "lab", Node: n.Name, Generation: n.Latest, Attempted: n.Latest, Time: time.Now()})
			m.PushReport(t, n.Name, body)
		}
	}
	const name = "gitea@n2.api-key"
	hint := "waiting: gitea@n2 needs api-key from vault@n1, which an operator must deliver; hint: meshgen vault put " + name + "\n"
	reconcile()

	out, err := meshgenStatus(t, "--repo", m.Bare)
	if err != nil {
		t.Fatalf("status with a wait: %v; waiting is not a failure\n%s", err, out)
	}
	if !strings.Contains(out, hint) {
		t.Fatalf("status does not show the operator's secret waited for:\n%s", out)
	}
	out, err = meshgenStatus(t, "--repo", m.Bare, "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var sum status.Summary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	main := strings.TrimSpace(meshtest.Git(t, m.Bare, "rev-parse", branch.MainRef))
	found := false
	for _, w := range sum.Waiting {
		found = found || w.Assignment == "gitea@n2" && w.Requirement == "api-key" && w.Hint == "meshgen vault put "+name
	}
	if !found || sum.WaitingSource != main || len(sum.Notes) != 0 {
		t.Fatalf("status --format json: waiting %+v as of %s, notes %v; want the api-key's wait as of main %s", sum.Waiting, sum.WaitingSource, sum.Notes, main)
	}

	// main moves without a reconcile: the waits are said to be older.
	m.Push(t, "not reconciled yet")
	if out, _ = meshgenStatus(t, "--repo", m.Bare); !strings.Contains(out, hint) || !strings.Contains(out, "note: waits as of main "+main[:12]) {
		t.Fatalf("status after main moved:\n%s", out)
	}

	recipient, err := v.Client.Recipient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const value = "operator-chosen-api-key-9731"
	ct, err := client.SealToVault(recipient, []byte(value))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Client.Put(ctx, client.PutRequest{Name: name, Ciphertext: ct}); err != nil {
		t.Fatal(err)
	}
	reconcile()
	out, err = meshgenStatus(t, "--repo", m.Bare)
	if err != nil {
		t.Fatalf("status after the delivery: %v\n%s", err, out)
	}
	if strings.Contains(out, "api-key") || strings.Contains(out, "note:") || strings.Contains(out, value) {
		t.Fatalf("status still shows the wait after the delivery:\n%s", out)
	}
	// The lab's proxy still waits for the CA's answer: the record holds
	// that wait too.
	if !strings.Contains(out, "waiting: proxy@n2 needs ca (root) from ca@n3") {
		t.Fatalf("status lost the wait for a provider's answer:\n%s", out)
	}
}
