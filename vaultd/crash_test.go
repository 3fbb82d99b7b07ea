package vaultd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// TestKill9DuringWrites kills the real vaultd with SIGKILL while several
// clients make new secrets, deliver operator values and adopt genesis
// values, restarts it, and checks that every write that was answered is
// there (a made secret seals to the same bytes, a delivered value is the
// value delivered), and that no interrupted write is left behind.
func TestKill9DuringWrites(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "vault")
	sockDir := shortDir(t)
	node := vaulttest.NewNode(t)
	type ack struct {
		spec  client.Spec
		ct    []byte // what a made secret sealed to
		value string // what was delivered
	}
	acked := map[string]ack{}
	var mu sync.Mutex
	for round := range 6 {
		d := startDaemon(t, dir, sockDir, &syncBuffer{})
		// Everything answered before survived.
		for name, a := range acked {
			resp, err := d.client.Seal(ctx, client.SealRequest{Name: name, Spec: a.spec, Recipients: recipients(node)})
			if err != nil {
				t.Fatalf("round %d: %s lost: %v", round, name, err)
			}
			if a.ct != nil && !bytes.Equal(resp.Sealed[0].Ciphertext, a.ct) {
				t.Fatalf("round %d: %s seals to other bytes after kill -9", round, name)
			}
			if a.value != "" && string(vaulttest.Open(t, node, resp.Sealed[0].Ciphertext)) != a.value {
				t.Fatalf("round %d: the value delivered as %s changed after kill -9", round, name)
			}
		}
		tmp, _ := filepath.Glob(filepath.Join(dir, "records", ".*"))
		if len(tmp) != 0 {
			t.Fatalf("round %d: interrupted writes left behind: %v", round, tmp)
		}
		rcpt, err := d.client.Recipient(ctx)
		if err != nil {
			t.Fatal(err)
		}
		enough := make(chan struct{})
		var once sync.Once
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					name := fmt.Sprintf("r%d-w%d-%d", round, w, i)
					value := "delivered-" + name
					ct, _ := client.SealToVault(rcpt, []byte(value))
					var a ack
					var err error
					switch w % 3 {
					case 0:
						var resp *client.SealResponse
						if resp, err = d.client.Seal(ctx, client.SealRequest{Name: name, Recipients: recipients(node)}); err == nil {
							a.ct = resp.Sealed[0].Ciphertext
						}
					case 1:
						_, err = d.client.Put(ctx, client.PutRequest{Name: name, Ciphertext: ct})
						a = ack{spec: client.Spec{Operator: true}, value: value}
					case 2:
						_, err = d.client.Adopt(ctx, client.AdoptRequest{Secrets: []client.AdoptSecret{{Name: name, Ciphertext: ct}}})
						a = ack{value: value}
					}
					if err != nil {
						return // killed
					}
					mu.Lock()
					acked[name] = a
					if len(acked) >= 60*(round+1) {
						once.Do(func() { close(enough) })
					}
					mu.Unlock()
				}
			}()
		}
		stopped := make(chan struct{})
		go func() { wg.Wait(); close(stopped) }()
		select {
		case <-enough:
		case <-stopped:
			t.Fatalf("round %d: every writer failed before the kill:\n%s", round, d.out.Bytes())
		}
		d.kill() // while the writers are mid-request
		<-stopped
	}
	d := startDaemon(t, dir, sockDir, &syncBuffer{})
	st, err := d.client.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Secrets) < len(acked) {
		t.Fatalf("%d secrets after the crashes, %d were answered", len(st.Secrets), len(acked))
	}
}

// TestKill9DuringRotation runs a two-party and a one-party rotation through
// the real vaultd, killing it with SIGKILL during and after every step. After
// each restart the step is confirmed again, as the reconciler would from the
// same hostd reports, and the rotation resumes where it was.
func TestKill9DuringRotation(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{client.TwoParty, client.OneParty} {
		t.Run(kind, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "vault")
			sockDir := shortDir(t)
			out := &syncBuffer{}
			prov, r0, r1 := vaulttest.NewNode(t), vaulttest.NewNode(t), vaulttest.NewNode(t)
			req := client.SealRequest{Name: "db/app", Spec: client.Spec{Rotation: kind}, Appliers: recipients(prov), Recipients: recipients(r0, r1)}
			d := startDaemon(t, dir, sockDir, out)
			if _, err := d.client.Seal(ctx, req); err != nil {
				t.Fatal(err)
			}
			type step struct {
				do    func(c *client.Client) error
				phase client.Phase // after the step
			}
			confirm := func(fn func(*client.Client) func(context.Context, client.ConfirmRequest) (*client.Rotation, error), who string, version uint64) func(*client.Client) error {
				return func(c *client.Client) error {
					_, err := fn(c)(ctx, client.ConfirmRequest{Name: "db/app", Recipient: who, Version: version})
					return err
				}
			}
			applied := func(c *client.Client) func(context.Context, client.ConfirmRequest) (*client.Rotation, error) {
				return c.ConfirmApplied
			}
			read := func(c *client.Client) func(context.Context, client.ConfirmRequest) (*client.Rotation, error) {
				return c.ConfirmRead
			}
			retired := func(c *client.Client) func(context.Context, client.ConfirmRequest) (*client.Rotation, error) {
				return c.ConfirmRetired
			}
			rotate := func(c *client.Client) error {
				_, err := c.Rotate(ctx, "db/app")
				if errors.Is(err, client.ErrConflict) { // the first try was stored
					return nil
				}
				return err
			}
			steps := []step{
				{do: rotate, phase: client.PhaseApplying},
				{do: confirm(applied, prov.Recipient().String(), 2), phase: client.PhaseReading},
				{do: confirm(read, r0.Recipient().String(), 2), phase: client.PhaseReading},
			}
			if kind == client.TwoParty {
				steps = append(steps,
					step{do: confirm(read, r1.Recipient().String(), 2), phase: client.PhaseRetiring},
					step{do: confirm(retired, prov.Recipient().String(), 1), phase: ""})
			} else {
				steps = append(steps, step{do: confirm(read, r1.Recipient().String(), 2), phase: ""})
			}
			var before *client.SealResponse
			for i, s := range steps {
				// Kill during the step: it may or may not have been stored.
				done := make(chan error, 1)
				go func() { done <- s.do(d.client) }()
				d.kill()
				<-done
				d = startDaemon(t, dir, sockDir, out)
				if before != nil {
					// What was sealed before the crash is sealed again, byte for byte.
					after, err := d.client.Seal(ctx, req)
					if err != nil {
						t.Fatal(err)
					}
					if phaseOf(after) == phaseOf(before) {
						sameSealed(t, before, after)
					}
				}
				// The reconciler confirms again from the same reports.
				if err := s.do(d.client); err != nil {
					t.Fatalf("step %d again after kill -9: %v", i, err)
				}
				// Kill after the step: it must be stored.
				d.kill()
				d = startDaemon(t, dir, sockDir, out)
				resp, err := d.client.Seal(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if got := phaseOf(resp); got != s.phase {
					t.Fatalf("step %d: phase %q after kill -9, want %q", i, got, s.phase)
				}
				before = resp
			}
			if before.Version != 2 {
				t.Fatalf("rotation ended on version %d, want 2", before.Version)
			}
			d.stop(t)
			if bytes.Contains(out.Bytes(), []byte("level=ERROR")) {
				t.Fatalf("vaultd logged errors:\n%s", out.Bytes())
			}
		})
	}
}

func phaseOf(r *client.SealResponse) client.Phase {
	if r.Rotation == nil {
		return ""
	}
	return r.Rotation.Phase
}

// TestInterruptedWriteIsRemoved leaves what a crash between the temporary
// file and the rename leaves, and checks the store starts, ignores it and
// removes it.
func TestInterruptedWriteIsRemoved(t *testing.T) {
	ctx := context.Background()
	v := vaulttest.Start(t)
	node := vaulttest.NewNode(t)
	if _, err := v.Client.Seal(ctx, client.SealRequest{Name: "kept", Recipients: recipients(node)}); err != nil {
		t.Fatal(err)
	}
	v.Stop(t)
	stray := filepath.Join(v.Dir, "records", ".0123abcd4567")
	if err := os.WriteFile(stray, []byte("age-encryption.org/v1\n-> half a rec"), 0o600); err != nil {
		t.Fatal(err)
	}
	v = vaulttest.StartWith(t, vaulttest.Options{Dir: v.Dir})
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatalf("interrupted write not removed: %v", err)
	}
	st, err := v.Client.Status(ctx)
	if err != nil || len(st.Secrets) != 1 || st.Secrets[0].Name != "kept" {
		t.Fatalf("status after an interrupted write: %v %+v", err, st)
	}
}

// TestStoreIsEncryptedAtRest checks no record on disk names its secret or
// holds its value, and that the identity is private.
func TestStoreIsEncryptedAtRest(t *testing.T) {
	ctx := context.Background()
	v := vaulttest.Start(t)
	node := vaulttest.NewNode(t)
	resp, err := v.Client.Seal(ctx, client.SealRequest{Name: "visible-name-xyz", Recipients: recipients(node)})
	if err != nil {
		t.Fatal(err)
	}
	value := vaulttest.Open(t, node, resp.Sealed[0].Ciphertext)
	for _, p := range []string{v.Dir, filepath.Join(v.Dir, "identity"), filepath.Join(v.Dir, "records")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Fatalf("%s is mode %v, want owner only", filepath.Base(p), fi.Mode().Perm())
		}
	}
	recs, _ := filepath.Glob(filepath.Join(v.Dir, "records", "*"))
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	b, err := os.ReadFile(recs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "age-encryption.org/v1\n") || bytes.Contains(b, value) || bytes.Contains(b, []byte("visible-name-xyz")) {
		t.Fatal("a record is not age-encrypted at rest")
	}
}

// TestKill9DuringBatches kills the real vaultd with SIGKILL while several
// clients seal batches of new secrets, and restarts it: every batch that
// was answered is there, sealing to the same bytes; every batch that was
// not is there whole or not at all (one group write), each of its secrets
// either absent or a whole value; the generation never went back; no
// interrupted write is left behind.
func TestKill9DuringBatches(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "vault")
	sockDir := shortDir(t)
	node := vaulttest.NewNode(t)
	const size = 40
	acked := map[string][]byte{} // name: ciphertext answered
	var unanswered [][]string
	var last client.Generation
	for round := range 4 {
		d := startDaemon(t, dir, sockDir, &syncBuffer{})
		// Answered batches survived; unanswered ones are all or nothing.
		st, err := d.client.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held := map[string]bool{}
		for _, s := range st.Secrets {
			held[s.Name] = true
		}
		whole := 0
		for _, batch := range unanswered {
			n := 0
			for _, name := range batch {
				if held[name] {
					n++
				}
			}
			if n != 0 && n != len(batch) {
				t.Fatalf("round %d: %d of the %d secrets of a batch killed mid-write are there", round, n, len(batch))
			}
			if n > 0 {
				whole++
			}
			for _, name := range batch {
				if !held[name] {
					continue
				}
				resp, err := d.client.Seal(ctx, client.SealRequest{Name: name, Recipients: recipients(node)})
				if err != nil {
					t.Fatal(err)
				}
				if v := vaulttest.Open(t, node, resp.Sealed[0].Ciphertext); len(v) != 32 || resp.Version != 1 {
					t.Fatalf("round %d: %s is there but not whole (version %d, %d bytes)", round, name, resp.Version, len(v))
				}
			}
		}
		if round > 0 {
			t.Logf("round %d: %d batches unanswered at the kill: %d written whole, the rest not at all", round, len(unanswered), whole)
		}
		unanswered = nil
		var names []string
		for name := range acked {
			names = append(names, name)
		}
		for chunk := range slices.Chunk(names, client.MaxSealBatch) {
			reqs := make([]client.SealRequest, len(chunk))
			for i, name := range chunk {
				reqs[i] = client.SealRequest{Name: name, Recipients: recipients(node)}
			}
			res, err := d.client.SealBatch(ctx, reqs)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.Err != nil || !bytes.Equal(r.Response.Sealed[0].Ciphertext, acked[chunk[i]]) {
					t.Fatalf("round %d: %s, answered before the kill, is lost or changed: %v", round, chunk[i], r.Err)
				}
			}
		}
		g, err := d.client.Generation(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if round > 0 && (g.Epoch != last.Epoch || g.Counter < last.Counter) {
			t.Fatalf("round %d: generation %s after kill -9, %s was answered before", round, g, last)
		}
		if tmp, _ := filepath.Glob(filepath.Join(dir, "records", ".*")); len(tmp) != 0 {
			t.Fatalf("round %d: interrupted writes left behind: %v", round, tmp)
		}

		enough := make(chan struct{})
		var once sync.Once
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					batch := make([]string, size)
					reqs := make([]client.SealRequest, size)
					for j := range batch {
						batch[j] = fmt.Sprintf("r%d-w%d-b%d-%d", round, w, i, j)
						reqs[j] = client.SealRequest{Name: batch[j], Recipients: recipients(node)}
					}
					mu.Lock()
					unanswered = append(unanswered, batch)
					mu.Unlock()
					res, err := d.client.SealBatch(ctx, reqs)
					if err != nil {
						return // killed
					}
					g, gerr := d.client.Generation(ctx)
					mu.Lock()
					unanswered = slices.DeleteFunc(unanswered, func(b []string) bool { return b[0] == batch[0] })
					for j, r := range res {
						if r.Err != nil {
							t.Errorf("%s: %v", batch[j], r.Err)
							continue
						}
						acked[batch[j]] = r.Response.Sealed[0].Ciphertext
					}
					if gerr == nil && g.Counter > last.Counter {
						last = g
					}
					if len(acked) >= 6*size*(round+1) {
						once.Do(func() { close(enough) })
					}
					mu.Unlock()
					if gerr != nil {
						return // killed
					}
				}
			})
		}
		stopped := make(chan struct{})
		go func() { wg.Wait(); close(stopped) }()
		select {
		case <-enough:
		case <-stopped:
			t.Fatalf("round %d: every writer failed before the kill:\n%s", round, d.out.Bytes())
		}
		d.kill() // while batches are mid-request
		<-stopped
		if len(unanswered) == 0 {
			t.Logf("round %d: no batch was in flight at the kill", round)
		}
	}
}
