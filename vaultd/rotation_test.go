package vaultd_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// mesh is a provider node and reader nodes sealing one secret.
type mesh struct {
	t       *testing.T
	v       *vaulttest.Vault
	prov    *age.X25519Identity
	readers []*age.X25519Identity
	req     client.SealRequest
}

func newMesh(t *testing.T, v *vaulttest.Vault, name string, spec client.Spec, readers int) *mesh {
	m := &mesh{t: t, v: v, prov: vaulttest.NewNode(t)}
	for range readers {
		m.readers = append(m.readers, vaulttest.NewNode(t))
	}
	m.req = client.SealRequest{Name: name, Spec: spec, Appliers: recipients(m.prov), Recipients: recipients(m.readers...)}
	return m
}

// seal seals as the reconciler does on each reconcile.
func (m *mesh) seal() *client.SealResponse {
	m.t.Helper()
	resp, err := m.v.Client.Seal(context.Background(), m.req)
	if err != nil {
		m.t.Fatalf("seal: %v", err)
	}
	return resp
}

// held is what a node holds after a reconcile: slot and version to value.
type held struct {
	slot    client.Slot
	version uint64
	value   string
	current bool
}

func (m *mesh) applierHolds(resp *client.SealResponse) []held {
	m.t.Helper()
	var out []held
	for _, s := range resp.For(m.prov.Recipient().String(), client.RoleApplier) {
		if s.Item == client.ItemValue {
			out = append(out, held{s.Slot, s.Version, string(vaulttest.Open(m.t, m.prov, s.Ciphertext)), s.Current})
		}
	}
	return out
}

func (m *mesh) readerHolds(resp *client.SealResponse, i int) held {
	m.t.Helper()
	s := one(m.t, resp, m.readers[i], client.RoleReader, client.ItemValue)
	return held{s.Slot, s.Version, string(vaulttest.Open(m.t, m.readers[i], s.Ciphertext)), s.Current}
}

func (m *mesh) confirm(step string, who *age.X25519Identity, version uint64) (*client.Rotation, error) {
	req := client.ConfirmRequest{Name: m.req.Name, Recipient: who.Recipient().String(), Version: version}
	ctx := context.Background()
	switch step {
	case "applied":
		return m.v.Client.ConfirmApplied(ctx, req)
	case "read":
		return m.v.Client.ConfirmRead(ctx, req)
	case "retired":
		return m.v.Client.ConfirmRetired(ctx, req)
	}
	panic(step)
}

func (m *mesh) mustConfirm(step string, who *age.X25519Identity, version uint64) *client.Rotation {
	m.t.Helper()
	rot, err := m.confirm(step, who, version)
	if err != nil {
		m.t.Fatalf("confirm %s v%d: %v", step, version, err)
	}
	return rot
}

func waits(rot *client.Rotation) []string {
	var out []string
	for _, p := range rot.WaitsOn {
		out = append(out, p.Recipient)
	}
	slices.Sort(out)
	return out
}

func TestTwoPartyRotation(t *testing.T) {
	ctx := context.Background()
	v := vaulttest.Start(t)
	m := newMesh(t, v, "db/gitea", client.Spec{Rotation: client.TwoParty}, 2)
	r0, r1 := m.readers[0], m.readers[1]

	start := m.seal()
	old := m.readerHolds(start, 0)
	if old.slot != client.SlotA || old.version != 1 {
		t.Fatalf("a new two-party secret uses slot A, version 1: %+v", old)
	}

	rot, err := v.Client.Rotate(ctx, "db/gitea")
	if err != nil {
		t.Fatal(err)
	}
	if rot.Phase != client.PhaseApplying || rot.From != 1 || rot.To != 2 || rot.Reason != "operator" || !slices.Equal(waits(rot), recipients(m.prov)) {
		t.Fatalf("rotation started as %+v", rot)
	}
	// Applying: the provider ensures the unused slot; readers keep the old.
	resp := m.seal()
	ah := m.applierHolds(resp)
	if len(ah) != 2 || ah[0] != old || ah[1].slot != client.SlotB || ah[1].version != 2 || ah[1].current || ah[1].value == old.value {
		t.Fatalf("applier holds %+v", ah)
	}
	newValue := ah[1].value
	for i := range m.readers {
		if got := m.readerHolds(resp, i); got != old {
			t.Fatalf("reader %d was given %+v before the applier confirmed", i, got)
		}
	}
	if _, err := m.confirm("read", r0, 2); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("a reader confirming before the applier: %v, want conflict", err)
	}

	// The applier confirmed: readers are given the new slot (a new version,
	// so hostd recreates them).
	rot = m.mustConfirm("applied", m.prov, 2)
	if rot.Phase != client.PhaseReading || !slices.Equal(waits(rot), sorted(recipients(r0, r1))) {
		t.Fatalf("after the applier: %+v", rot)
	}
	resp = m.seal()
	for i := range m.readers {
		if got := m.readerHolds(resp, i); got.slot != client.SlotB || got.version != 2 || got.value != newValue {
			t.Fatalf("reader %d holds %+v after the applier confirmed", i, got)
		}
	}
	if resp.Version != 2 || resp.Slot != client.SlotB {
		t.Fatalf("readers' version %d slot %s", resp.Version, resp.Slot)
	}
	// The old credential stays while any reader has not confirmed: r1 is
	// unreachable.
	rot = m.mustConfirm("read", r0, 2)
	if !slices.Equal(waits(rot), recipients(r1)) {
		t.Fatalf("waits on %v", waits(rot))
	}
	if _, err := m.confirm("retired", m.prov, 1); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("retiring while a reader has not moved: %v, want conflict", err)
	}
	if ah := m.applierHolds(m.seal()); len(ah) != 2 || ah[0] != old {
		t.Fatalf("the old credential left the applier while r1 still uses it: %+v", ah)
	}
	st, err := v.Client.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Secrets[0].Rotation; got == nil || got.Phase != client.PhaseReading || !slices.Equal(waits(got), recipients(r1)) {
		t.Fatalf("status does not show whom the rotation waits on: %+v", got)
	}

	// r1 returns: only now is the old one retired.
	rot = m.mustConfirm("read", r1, 2)
	if rot.Phase != client.PhaseRetiring || !slices.Equal(waits(rot), recipients(m.prov)) {
		t.Fatalf("after every reader: %+v", rot)
	}
	if _, err := v.Client.Abandon(ctx, "db/gitea"); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("abandon while retiring: %v, want conflict", err)
	}
	resp = m.seal()
	if ah := m.applierHolds(resp); len(ah) != 1 || ah[0].slot != client.SlotB || !ah[0].current {
		t.Fatalf("retiring: applier holds %+v", ah)
	}
	if !slices.Contains(resp.Slots, client.SlotState{Slot: client.SlotA, Version: 1, State: "retiring"}) {
		t.Fatalf("slot A is not listed retiring: %+v", resp.Slots)
	}
	rot = m.mustConfirm("retired", m.prov, 1)
	if rot.Phase != client.PhaseDone {
		t.Fatalf("after retiring: %+v", rot)
	}
	// Replayed confirmations (the reconciler reads the same reports again)
	// are harmless.
	m.mustConfirm("read", r1, 2)

	// The next rotation uses slot A again, with a new value.
	if _, err := v.Client.Rotate(ctx, "db/gitea"); err != nil {
		t.Fatal(err)
	}
	ah = m.applierHolds(m.seal())
	if len(ah) != 2 || ah[1].slot != client.SlotA || ah[1].version != 3 || ah[1].value == old.value || ah[1].value == newValue {
		t.Fatalf("second rotation: %+v", ah)
	}
}

func sorted(s []string) []string { slices.Sort(s); return s }

func TestTwoPartyAbandon(t *testing.T) {
	ctx := context.Background()
	for _, after := range []string{"start", "applied"} {
		t.Run(after, func(t *testing.T) {
			v := vaulttest.Start(t)
			m := newMesh(t, v, "mq/app", client.Spec{Rotation: client.TwoParty}, 1)
			old := m.readerHolds(m.seal(), 0)
			if _, err := v.Client.Rotate(ctx, "mq/app"); err != nil {
				t.Fatal(err)
			}
			if after == "applied" {
				m.mustConfirm("applied", m.prov, 2)
				if got := m.readerHolds(m.seal(), 0); got.version != 2 {
					t.Fatalf("reader not moved: %+v", got)
				}
			}
			rot, err := v.Client.Abandon(ctx, "mq/app")
			if err != nil {
				t.Fatal(err)
			}
			if !rot.Abandoned {
				t.Fatalf("abandon: %+v", rot)
			}
			// Readers are back on the old credential.
			if got := m.readerHolds(m.seal(), 0); got != old {
				t.Fatalf("after abandon the reader holds %+v, want %+v", got, old)
			}
			if after == "applied" {
				if rot.Phase != client.PhaseReading {
					t.Fatalf("abandon while reading: %+v", rot)
				}
				rot = m.mustConfirm("read", m.readers[0], 1)
			}
			// The new slot is retired; the old stays.
			if rot.Phase != client.PhaseRetiring {
				t.Fatalf("abandon: %+v", rot)
			}
			resp := m.seal()
			if !slices.Contains(resp.Slots, client.SlotState{Slot: client.SlotB, Version: 2, State: "retiring"}) {
				t.Fatalf("new slot not retiring: %+v", resp.Slots)
			}
			if rot := m.mustConfirm("retired", m.prov, 2); rot.Phase != client.PhaseDone {
				t.Fatalf("after retiring the abandoned slot: %+v", rot)
			}
			if got := m.readerHolds(m.seal(), 0); got != old {
				t.Fatalf("after an abandoned rotation the reader holds %+v", got)
			}
		})
	}
}

func TestOnePartyRotation(t *testing.T) {
	ctx := context.Background()
	t.Run("applied: staged beside the current value", func(t *testing.T) {
		v := vaulttest.Start(t)
		m := newMesh(t, v, "store-superuser", client.Spec{}, 1)
		old := m.readerHolds(m.seal(), 0)
		if _, err := v.Client.Rotate(ctx, "store-superuser"); err != nil {
			t.Fatal(err)
		}
		resp := m.seal()
		ah := m.applierHolds(resp)
		if len(ah) != 2 || !ah[0].current || ah[0].value != old.value || ah[1].current || ah[1].version != 2 || ah[1].slot != client.SlotNone {
			t.Fatalf("staged: applier holds %+v", ah)
		}
		if got := m.readerHolds(resp, 0); got != old {
			t.Fatalf("the reader was given the staged value: %+v", got)
		}
		if _, err := v.Client.Abandon(ctx, "store-superuser"); err != nil {
			t.Fatalf("abandon while staged: %v", err)
		}
		if ah := m.applierHolds(m.seal()); len(ah) != 1 || ah[0].value != old.value {
			t.Fatalf("abandoned: applier holds %+v", ah)
		}
		// Again, to the end.
		if _, err := v.Client.Rotate(ctx, "store-superuser"); err != nil {
			t.Fatal(err)
		}
		next := m.applierHolds(m.seal())[1]
		rot := m.mustConfirm("applied", m.prov, next.version)
		if rot.Phase != client.PhaseReading {
			t.Fatalf("after the applier: %+v", rot)
		}
		resp = m.seal()
		if got := m.readerHolds(resp, 0); got.value != next.value || got.version != next.version {
			t.Fatalf("reader after the applier: %+v", got)
		}
		if ah := m.applierHolds(resp); len(ah) != 1 || ah[0].value != next.value || !ah[0].current {
			t.Fatalf("applier after applying: %+v", ah)
		}
		if _, err := v.Client.Abandon(ctx, "store-superuser"); !errors.Is(err, client.ErrConflict) {
			t.Fatalf("abandon after the value was replaced in place: %v, want conflict", err)
		}
		if rot := m.mustConfirm("read", m.readers[0], next.version); rot.Phase != client.PhaseDone {
			t.Fatalf("after the reader: %+v", rot)
		}
	})
	t.Run("read at start: delivered at once", func(t *testing.T) {
		v := vaulttest.Start(t)
		reader := vaulttest.NewNode(t)
		req := client.SealRequest{Name: "session-key", Recipients: recipients(reader)}
		first, err := v.Client.Seal(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		rot, err := v.Client.Rotate(ctx, "session-key")
		if err != nil {
			t.Fatal(err)
		}
		if rot.Phase != client.PhaseReading || !slices.Equal(waits(rot), recipients(reader)) {
			t.Fatalf("rotation: %+v", rot)
		}
		resp, err := v.Client.Seal(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Version != 2 || bytes.Equal(vaulttest.Open(t, reader, resp.Sealed[0].Ciphertext), vaulttest.Open(t, reader, first.Sealed[0].Ciphertext)) {
			t.Fatal("the reader was not given a new value")
		}
		rot, err = v.Client.ConfirmRead(ctx, client.ConfirmRequest{Name: "session-key", Recipient: reader.Recipient().String(), Version: 2})
		if err != nil || rot.Phase != client.PhaseDone {
			t.Fatalf("confirm read: %v %+v", err, rot)
		}
	})
}

func TestNotRotatable(t *testing.T) {
	ctx := context.Background()
	v := vaulttest.Start(t)
	m := newMesh(t, v, "ldap-bind", client.Spec{NotRotatable: "the directory takes it only at first initialisation", MaxAge: client.Duration(time.Nanosecond)}, 1)
	m.seal()
	_, err := v.Client.Rotate(ctx, "ldap-bind")
	if !errors.Is(err, client.ErrNotRotatable) || !strings.Contains(err.Error(), "the directory takes it only at first initialisation") {
		t.Fatalf("rotate a secret not rotatable: %v", err)
	}
	// Nor does its maximum age rotate it.
	if started, err := v.Vault.Tick(ctx); err != nil || len(started) != 0 {
		t.Fatalf("tick: %v %v", started, err)
	}
}

// clock is a settable clock for maximum-age tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestMaxAge(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	v := vaulttest.StartWith(t, vaulttest.Options{Now: c.now})
	m := newMesh(t, v, "api-token", client.Spec{Rotation: client.TwoParty, MaxAge: client.Duration(30 * 24 * time.Hour)}, 1)
	other := newMesh(t, v, "other", client.Spec{MaxAge: client.Duration(60 * 24 * time.Hour)}, 1)
	m.seal()
	other.seal()
	c.add(29 * 24 * time.Hour)
	if resp := m.seal(); resp.Rotation != nil {
		t.Fatalf("rotated before its maximum age: %+v", resp.Rotation)
	}
	c.add(2 * 24 * time.Hour)
	// The vault's policy starts it on its timer...
	started, err := v.Vault.Tick(ctx)
	if err != nil || !slices.Equal(started, []string{"api-token"}) {
		t.Fatalf("tick started %v, %v", started, err)
	}
	resp := m.seal()
	if resp.Rotation == nil || resp.Rotation.Reason != "max-age" || resp.Rotation.Phase != client.PhaseApplying {
		t.Fatalf("after the maximum age: %+v", resp.Rotation)
	}
	// ...and a seal of a secret past its age starts it too.
	c.add(30 * 24 * time.Hour)
	if resp := other.seal(); resp.Rotation == nil || resp.Rotation.Reason != "max-age" || resp.Rotation.Phase != client.PhaseApplying {
		t.Fatalf("sealed past its maximum age: %+v", resp.Rotation)
	}
}

// TestOneNodeBothRoles: the provider and its consumer on one node. The node
// is an applier and a reader, each confirmed in its own role.
func TestOneNodeBothRoles(t *testing.T) {
	ctx := context.Background()
	v := vaulttest.Start(t)
	node := vaulttest.NewNode(t)
	req := client.SealRequest{Name: "db/local", Spec: client.Spec{Rotation: client.TwoParty}, Appliers: recipients(node), Recipients: recipients(node)}
	if _, err := v.Client.Seal(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Client.Rotate(ctx, "db/local"); err != nil {
		t.Fatal(err)
	}
	confirm := client.ConfirmRequest{Name: "db/local", Recipient: node.Recipient().String(), Version: 2}
	if _, err := v.Client.ConfirmRead(ctx, confirm); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("the node confirmed as reader while applying: %v", err)
	}
	rot, err := v.Client.ConfirmApplied(ctx, confirm)
	if err != nil || rot.Phase != client.PhaseReading || rot.WaitsOn[0].Role != client.RoleReader {
		t.Fatalf("after applying: %v %+v", err, rot)
	}
	if rot, err = v.Client.ConfirmRead(ctx, confirm); err != nil || rot.Phase != client.PhaseRetiring {
		t.Fatalf("after reading: %v %+v", err, rot)
	}
	confirm.Version = 1
	if rot, err = v.Client.ConfirmRetired(ctx, confirm); err != nil || rot.Phase != client.PhaseDone {
		t.Fatalf("after retiring: %v %+v", err, rot)
	}
}

// TestKindChange: a one-party secret asked for as two-party while idle takes
// slot A and keeps its value; while a rotation runs, the change is refused.
func TestKindChange(t *testing.T) {
	ctx := context.Background()
	v := vaulttest.Start(t)
	m := newMesh(t, v, "app/token", client.Spec{}, 1)
	before := m.readerHolds(m.seal(), 0)
	m.req.Spec.Rotation = client.TwoParty
	after := m.readerHolds(m.seal(), 0)
	if after.slot != client.SlotA || after.value != before.value || after.version != before.version {
		t.Fatalf("one-party %+v became two-party %+v", before, after)
	}
	if _, err := v.Client.Rotate(ctx, "app/token"); err != nil {
		t.Fatal(err)
	}
	m.req.Spec.Rotation = client.OneParty
	if _, err := v.Client.Seal(ctx, m.req); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("a kind change mid-rotation: %v", err)
	}
}
