package vaultd_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// TestGenerationMovesOnEveryWriteOnly drives every kind of request through
// the real vaultd's socket, in order, and checks that the generation rises
// on each write and on nothing else (reads, unchanged seals, replayed
// confirmations, refusals).
func TestGenerationMovesOnEveryWriteOnly(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	v := vaulttest.StartWith(t, vaulttest.Options{Now: c.now})
	m := newMesh(t, v, "db", client.Spec{Rotation: client.TwoParty}, 1)
	aged := newMesh(t, v, "token", client.Spec{MaxAge: client.Duration(24 * time.Hour)}, 1)
	r0 := m.readers[0]
	rcpt, err := v.Client.Recipient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	toVault := func(s string) []byte {
		ct, err := client.SealToVault(rcpt, []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return ct
	}
	ok := func(_ any, err error) error { return err }
	steps := []struct {
		name  string
		do    func() error
		moves bool
	}{
		{"seal a new secret", func() error { return ok(v.Client.Seal(ctx, m.req)) }, true},
		{"seal it unchanged", func() error { return ok(v.Client.Seal(ctx, m.req)) }, false},
		{"status", func() error { return ok(v.Client.Status(ctx)) }, false},
		{"recipient", func() error { return ok(v.Client.Recipient(ctx)) }, false},
		{"seal with a recipient fewer", func() error {
			req := m.req
			req.Recipients = nil
			return ok(v.Client.Seal(ctx, req))
		}, true},
		{"seal with the recipient back", func() error { return ok(v.Client.Seal(ctx, m.req)) }, true},
		{"put an operator's value", func() error {
			return ok(v.Client.Put(ctx, client.PutRequest{Name: "smtp", Ciphertext: toVault("operator-value-1")}))
		}, true},
		{"put the same value", func() error {
			return ok(v.Client.Put(ctx, client.PutRequest{Name: "smtp", Ciphertext: toVault("operator-value-1")}))
		}, false},
		{"put a new value", func() error {
			return ok(v.Client.Put(ctx, client.PutRequest{Name: "smtp", Ciphertext: toVault("operator-value-2")}))
		}, true},
		{"adopt", func() error {
			return ok(v.Client.Adopt(ctx, client.AdoptRequest{Secrets: []client.AdoptSecret{{Name: "store", Ciphertext: toVault("genesis-value")}}}))
		}, true},
		{"adopt the same again", func() error {
			return ok(v.Client.Adopt(ctx, client.AdoptRequest{Secrets: []client.AdoptSecret{{Name: "store", Ciphertext: toVault("genesis-value")}}}))
		}, false},
		{"a refused rotation", func() error {
			if _, err := v.Client.Rotate(ctx, "smtp"); !errors.Is(err, client.ErrOperatorValue) {
				return errors.New("rotating an operator's value was not refused")
			}
			return nil
		}, false},
		{"rotate", func() error { return ok(v.Client.Rotate(ctx, "db")) }, true},
		{"seal during the rotation", func() error { return ok(v.Client.Seal(ctx, m.req)) }, true}, // new ciphertext cached
		{"seal again", func() error { return ok(v.Client.Seal(ctx, m.req)) }, false},
		{"confirm applied", func() error { return ok(m.confirm("applied", m.prov, 2)) }, true},
		{"confirm applied again", func() error { return ok(m.confirm("applied", m.prov, 2)) }, false},
		{"confirm read", func() error { return ok(m.confirm("read", r0, 2)) }, true},
		{"confirm retired", func() error { return ok(m.confirm("retired", m.prov, 1)) }, true},
		{"confirm read replayed", func() error { return ok(m.confirm("read", r0, 2)) }, false},
		{"rotate again", func() error { return ok(v.Client.Rotate(ctx, "db")) }, true},
		{"abandon", func() error { return ok(v.Client.Abandon(ctx, "db")) }, true},
		{"seal a secret with a maximum age", func() error { return ok(v.Client.Seal(ctx, aged.req)) }, true},
		{"a policy tick with nothing due", func() error { return ok(v.Vault.Tick(ctx)) }, false},
		{"the maximum age passes", func() error { c.add(25 * time.Hour); return nil }, false},
		{"the policy timer starts the rotation", func() error {
			started, err := v.Vault.Tick(ctx)
			if err == nil && len(started) != 1 {
				return errors.New("no rotation started")
			}
			return err
		}, true},
	}
	before, err := v.Client.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before.Epoch == "" {
		t.Fatal("no epoch")
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		after, err := v.Client.Generation(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if after.Epoch != before.Epoch {
			t.Fatalf("%s: the epoch changed", s.name)
		}
		if moved := after.Counter != before.Counter; moved != s.moves || after.Counter < before.Counter {
			t.Fatalf("%s: generation %d → %d, want moved=%v", s.name, before.Counter, after.Counter, s.moves)
		}
		before = after
	}
}

// TestGenerationSurvivesRestart: a clean restart keeps the token, and the
// next write raises it; another store has another epoch.
func TestGenerationSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "vault")
	v := vaulttest.StartWith(t, vaulttest.Options{Dir: dir})
	m := newMesh(t, v, "db", client.Spec{}, 1)
	m.seal()
	g1, err := v.Client.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v.Stop(t)

	v = vaulttest.StartWith(t, vaulttest.Options{Dir: dir})
	g2, err := v.Client.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g2 != g1 {
		t.Fatalf("a clean restart changed the generation %v → %v", g1, g2)
	}
	if _, err := v.Client.Rotate(ctx, "db"); err != nil {
		t.Fatal(err)
	}
	if g3, err := v.Client.Generation(ctx); err != nil || g3.Epoch != g1.Epoch || g3.Counter <= g2.Counter {
		t.Fatalf("a write after the restart: %v → %v (%v)", g2, g3, err)
	}

	other := vaulttest.Start(t)
	g4, err := other.Client.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g4.Epoch == g1.Epoch {
		t.Fatal("two stores share an epoch")
	}
}

// TestGenerationSurvivesKill9 kills the real vaultd binary with SIGKILL
// after writes and checks the counter never went back and still rises.
func TestGenerationSurvivesKill9(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "vault")
	sockDir := shortDir(t)
	node := vaulttest.NewNode(t)
	var last client.Generation
	for round := range 3 {
		d := startDaemon(t, dir, sockDir, &syncBuffer{})
		g, err := d.client.Generation(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if round > 0 && (g.Epoch != last.Epoch || g.Counter < last.Counter) {
			t.Fatalf("round %d: after kill -9 the generation went from %v to %v", round, last, g)
		}
		for i := range 5 {
			req := client.SealRequest{Name: "s" + string(rune('a'+round)) + string(rune('a'+i)), Recipients: recipients(node)}
			if _, err := d.client.Seal(ctx, req); err != nil {
				t.Fatal(err)
			}
			after, err := d.client.Generation(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if after.Counter <= g.Counter {
				t.Fatalf("round %d: a new secret left the generation at %v", round, after)
			}
			g = after
		}
		last = g
		d.kill()
	}
}
