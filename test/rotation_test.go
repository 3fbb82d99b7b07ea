package test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/internal/meshtest"
	"github.com/meshgen/meshgen/reconciler/loop"
	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// secretVersion returns the versions of secret the declaration on
// node/<node> carries, lowest first, and the node's generation.
func secretVersion(t *testing.T, m *meshtest.Mesh, node, secret string) (versions []uint64, generation uint64) {
	t.Helper()
	var d declaration.Declaration
	if err := json.Unmarshal([]byte(meshtest.Git(t, m.Bare, "cat-file", "blob", "node/"+node+":declaration.json")), &d); err != nil {
		t.Fatal(err)
	}
	for _, r := range d.Resources {
		if r.File != nil && r.File.Secret != nil && r.File.Secret.Name == secret {
			versions = append(versions, r.File.Secret.Version)
		}
	}
	if len(versions) == 0 {
		t.Fatalf("node/%s carries no secret %s", node, secret)
	}
	slices.Sort(versions)
	return versions, d.Generation
}

// applied pushes a report of node having applied its latest generation
// without a failure, as hostd does after an apply.
func applied(t *testing.T, m *meshtest.Mesh, node string, gen uint64) {
	t.Helper()
	rep := declaration.Report{Mesh: "lab", Node: node, Generation: gen, Attempted: gen, Time: time.Now()}
	body, _ := json.Marshal(rep)
	m.PushReport(t, node, body)
}

func rotationOf(t *testing.T, v *vaulttest.Vault, name string) *client.Rotation {
	t.Helper()
	st, err := v.Client.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Secrets {
		if s.Name == name {
			return s.Rotation
		}
	}
	t.Fatalf("vault holds no secret %s", name)
	return nil
}

// TestRotationDrivenToTheEnd: a two-party rotation of the database login
// gitea@n2 presents and postgres@n1 applies (ADR 0114) finishes by itself
// from hostd's reports: the applier gets the new credential first, beside
// the one in use; the reader only after the applier confirmed; the old one
// is retired only after the reader confirmed, by the applier's next apply.
func TestRotationDrivenToTheEnd(t *testing.T) {
	ctx := context.Background()
	const secret = "postgres-database.gitea@n2.db"
	m := newMesh(t)
	v := vaulttest.Start(t)
	r, _ := newReconciler(t, m, v, io.Discard)
	reconcile := func() *loop.Outcome {
		t.Helper()
		out, err := r.Once(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	reconcile()
	if ver, _ := secretVersion(t, m, "n1", secret); !slices.Equal(ver, []uint64{1}) {
		t.Fatalf("applier starts at versions %v", ver)
	}

	if _, err := v.Client.Rotate(ctx, secret); err != nil {
		t.Fatal(err)
	}
	// Applying: the applier (n1) gets version 2 beside 1, the reader (n2)
	// keeps 1.
	reconcile()
	v1, g1 := secretVersion(t, m, "n1", secret)
	v2, g2 := secretVersion(t, m, "n2", secret)
	if !slices.Equal(v1, []uint64{1, 2}) || !slices.Equal(v2, []uint64{1}) {
		t.Fatalf("applying: applier has versions %v, reader %v; want [1 2] and [1]", v1, v2)
	}
	if ro := rotationOf(t, v, secret); ro == nil || ro.Phase != client.PhaseApplying {
		t.Fatalf("rotation %+v, want applying", ro)
	}
	// The reader reporting changes nothing: it is not its turn.
	applied(t, m, "n2", g2)
	if out := reconcile(); len(out.Confirmed) != 0 {
		t.Fatalf("confirmed %+v before the applier applied", out.Confirmed)
	}

	// n1 applied version 2: confirmed, and the same reconcile moves the
	// reader to version 2.
	applied(t, m, "n1", g1)
	out := reconcile()
	if len(out.Confirmed) != 1 || out.Confirmed[0].Phase != client.PhaseApplying || out.Confirmed[0].Node != "n1" {
		t.Fatalf("confirmed %+v, want n1's apply", out.Confirmed)
	}
	v2, g2 = secretVersion(t, m, "n2", secret)
	if !slices.Equal(v2, []uint64{2}) {
		t.Fatalf("reading: reader has versions %v, want [2]", v2)
	}
	if ro := rotationOf(t, v, secret); ro == nil || ro.Phase != client.PhaseReading {
		t.Fatalf("rotation %+v, want reading", ro)
	}

	// n2 applied version 2 (its container recreated): retiring.
	applied(t, m, "n2", g2)
	out = reconcile()
	if len(out.Confirmed) != 1 || out.Confirmed[0].Phase != client.PhaseReading {
		t.Fatalf("confirmed %+v, want n2's read", out.Confirmed)
	}
	if ro := rotationOf(t, v, secret); ro == nil || ro.Phase != client.PhaseRetiring {
		t.Fatalf("rotation %+v, want retiring", ro)
	}

	// The applier now holds only version 2 and is told to retire the old
	// credential. A report of the declaration before does not confirm it:
	// the step has not run with it.
	v1, g1After := secretVersion(t, m, "n1", secret)
	if !slices.Equal(v1, []uint64{2}) || g1After == g1 {
		t.Fatalf("retiring: applier has versions %v at generation %d (was %d), want [2] in a new one", v1, g1After, g1)
	}
	applied(t, m, "n1", g1)
	if out := reconcile(); len(out.Confirmed) != 0 {
		t.Fatalf("confirmed %+v from the applier's report of the reading phase", out.Confirmed)
	}
	applied(t, m, "n1", g1After)
	out = reconcile()
	if len(out.Confirmed) != 1 || out.Confirmed[0].Phase != client.PhaseRetiring || out.Confirmed[0].Version != 1 {
		t.Fatalf("confirmed %+v, want n1 retiring version 1", out.Confirmed)
	}
	if ro := rotationOf(t, v, secret); ro != nil {
		t.Fatalf("rotation still in progress: %+v", ro)
	}
	// Both ends hold version 2, and it opens to the same value on each
	// node with that node's own identity (the value is never printed).
	var plain [][]byte
	for _, node := range []string{"n1", "n2"} {
		if ver, _ := secretVersion(t, m, node, secret); !slices.Equal(ver, []uint64{2}) {
			t.Errorf("node %s ends at versions %v", node, ver)
		}
		var d declaration.Declaration
		json.Unmarshal([]byte(meshtest.Git(t, m.Bare, "cat-file", "blob", "node/"+node+":declaration.json")), &d)
		for _, res := range d.Resources {
			if res.File != nil && res.File.Secret != nil && res.File.Secret.Name == secret {
				ct := meshtest.Git(t, m.Bare, "cat-file", "blob", "node/"+node+":"+res.File.Secret.Sealed)
				plain = append(plain, vaulttest.Open(t, m.IDs[node], []byte(ct)))
			}
		}
	}
	if len(plain) != 2 || len(plain[0]) == 0 || !bytes.Equal(plain[0], plain[1]) {
		t.Error("the applier and the reader do not hold the same new credential")
	}
}
