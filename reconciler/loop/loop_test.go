package loop

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/internal/meshtest"
	"github.com/meshgen/meshgen/reconciler"
	"github.com/meshgen/meshgen/reconciler/branch"
	"github.com/meshgen/meshgen/reconciler/sign"
	"github.com/meshgen/meshgen/reconciler/sign/signtest"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

func newMesh(t *testing.T) *meshtest.Mesh {
	t.Helper()
	return meshtest.New(t, "../../examples/lab")
}

// refs lists the node branches of m's bare repository.
func refs(t *testing.T, m *meshtest.Mesh) string {
	return meshtest.Git(t, m.Bare, "for-each-ref", "refs/heads/node")
}

func newReconciler(t *testing.T, m *meshtest.Mesh, log io.Writer) (*Reconciler, []byte) {
	t.Helper()
	r, pub, _ := newReconcilerVault(t, m, log)
	return r, pub
}

// newReconcilerVault is newReconciler that also returns the real vaultd it
// reconciles with.
func newReconcilerVault(t *testing.T, m *meshtest.Mesh, log io.Writer) (*Reconciler, []byte, *vaulttest.Vault) {
	t.Helper()
	_, pub := signtest.Signer(t)
	v := vaulttest.Start(t)
	return reconcilerOf(t, m.Bare, v.Client, log), pub, v
}

// reconcilerOf opens a Reconciler of the repository repo that asks v,
// signs with the test key and logs JSON lines to log; it is closed when
// the test ends.
func reconcilerOf(t *testing.T, repo string, v Vault, log io.Writer) *Reconciler {
	t.Helper()
	signer, _ := signtest.Signer(t)
	r, err := New(Options{Repo: repo, Vault: v, Signer: signer, Logger: slog.New(slog.NewJSONHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestReconcileLab(t *testing.T) {
	ctx := context.Background()
	m := newMesh(t)
	var log strings.Builder
	r, pub := newReconciler(t, m, &log)

	out, err := r.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Written, []string{"n1", "n2", "n3"}) {
		t.Fatalf("first reconcile wrote %v", out.Written)
	}
	if out.Sealed == 0 {
		t.Fatal("the lab's secrets were not sealed")
	}
	// Every branch verifies with the public key, and every sealed file
	// opens with its node's own identity.
	var values []string
	for node, id := range m.IDs {
		body := meshtest.Git(t, m.Bare, "cat-file", "blob", "node/"+node+":declaration.json")
		sig := meshtest.Git(t, m.Bare, "cat-file", "blob", "node/"+node+":declaration.json.sig")
		if err := sign.Verify(pub, []byte(body), []byte(sig)); err != nil {
			t.Errorf("node %s: %v", node, err)
		}
		d, err := declaration.Parse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if d.Source != out.Source || d.Generation != 1 {
			t.Errorf("node %s: source %s generation %d", node, d.Source, d.Generation)
		}
		for _, res := range d.Resources {
			if res.File == nil || res.File.Secret == nil {
				continue
			}
			ct := meshtest.Git(t, m.Bare, "cat-file", "blob", "node/"+node+":"+res.File.Secret.Sealed)
			plain := vaulttest.Open(t, id, []byte(ct))
			if len(plain) == 0 {
				t.Errorf("node %s: %s opened empty", node, res.File.Secret.Sealed)
			}
			values = append(values, string(plain))
		}
	}
	// No value appears in the log or in anything on the branches but the
	// age ciphertext.
	everything := log.String() + meshtest.Git(t, m.Bare, "log", "--all", "-p", "--", ":!*.age")
	if !strings.Contains(everything, `"generation": 1`) || len(values) == 0 {
		t.Fatal("the search for secret values has nothing to search or nothing to look for")
	}
	for _, v := range values {
		if strings.Contains(everything, v) {
			t.Errorf("a secret's value appears in the log or in a branch's clear text")
		}
	}
	if n := strings.Count(log.String(), `"msg":"reconciled"`); n != 1 {
		t.Errorf("want one log line per reconcile, got %d:\n%s", n, log.String())
	}
	// The line states how long each step took.
	ph := out.Phases
	if ph.Resolve <= 0 || ph.Seal <= 0 || ph.Render <= 0 || ph.Write <= 0 || ph.Resolve+ph.Seal+ph.Render+ph.Write > out.Duration {
		t.Errorf("phases %+v do not add up within the reconcile's %s", ph, out.Duration)
	}
	if !strings.Contains(log.String(), `"phases":{"resolve":"`) {
		t.Errorf("the log line does not state the phases:\n%s", log.String())
	}

	// An unchanged push commits nothing: same bytes, secrets included.
	before := refs(t, m)
	m.Push(t, "nothing changes")
	out, err = r.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Written) != 0 || out.Objects != 0 || refs(t, m) != before {
		t.Fatalf("unchanged push wrote %v (%d objects)", out.Written, out.Objects)
	}

	// A push touching one node's assignment writes only that branch.
	p := filepath.Join(m.Work, "nodes", "n3.yaml")
	b, _ := os.ReadFile(p)
	os.WriteFile(p, []byte(strings.Replace(string(b), "10.0.0.3", "10.0.0.33", 1)), 0o644)
	m.Push(t, "n3 moves")
	out, err = r.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Written) == 0 || len(out.Written) == 3 {
		t.Fatalf("a change to n3's facts wrote %v; want the affected branches only", out.Written)
	}

	// A refused push leaves every branch as it was.
	before = refs(t, m)
	os.MkdirAll(filepath.Join(m.Work, "assignments", "ghost"), 0o755)
	os.WriteFile(filepath.Join(m.Work, "assignments", "ghost", "gitea.yaml"), []byte("values: {}\n"), 0o644)
	m.Push(t, "a node that does not exist")
	out, err = r.Once(ctx)
	if err == nil || !out.Refused {
		t.Fatalf("a refused push: outcome %+v, err %v", out, err)
	}
	if refs(t, m) != before {
		t.Fatal("a refused push moved branches")
	}
	if !strings.Contains(log.String(), "reconcile refused") {
		t.Errorf("the refusal was not logged:\n%s", log.String())
	}
}

// TestWatchCoalescesPushes: a burst of pushes to main is one reconcile.
func TestWatchCoalescesPushes(t *testing.T) {
	m := newMesh(t)
	r, _ := newReconciler(t, m, io.Discard)
	outcomes, stop := watching(t, r, WatchOptions{Interval: time.Hour, Quiet: 300 * time.Millisecond})
	first := <-outcomes
	if len(first.Written) != 3 {
		t.Fatalf("first reconcile wrote %v", first.Written)
	}
	var last string
	for i := range 5 {
		p := filepath.Join(m.Work, "nodes", "n3.yaml")
		b, _ := os.ReadFile(p)
		os.WriteFile(p, []byte(strings.Replace(string(b), "address: 10.0.0.3", "address: 10.0.0.3"+string(rune('0'+i)), 1)), 0o644)
		last = m.Push(t, "burst")
	}
	o := <-outcomes
	if o.Source != last {
		// The burst may be split if the machine is slow; the last
		// reconcile must reach the last push.
		for o.Source != last {
			o = <-outcomes
		}
	}
	stop()
	if n := len(outcomes); n > 0 {
		t.Errorf("%d extra reconciles after the burst was reconciled", n)
	}
	var d declaration.Declaration
	json.Unmarshal([]byte(meshtest.Git(t, m.Bare, "cat-file", "blob", "node/n3:declaration.json")), &d)
	if d.Source != last {
		t.Errorf("node/n3 holds source %s, want the last push %s", d.Source, last)
	}
}

// TestStateKeptAcrossReconciles: what a resolution decided is recorded on
// meshgen/state and handed to the next, so moving the vault's seat is
// refused as the genesis act it is (design 27), and ports never move.
func TestStateKeptAcrossReconciles(t *testing.T) {
	ctx := context.Background()
	m := newMesh(t)
	r, _ := newReconciler(t, m, io.Discard)
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := branch.ReadState(m.Bare)
	if err != nil {
		t.Fatal(err)
	}
	var st reconciler.State
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Seats["mesh-vault"] != "vault@n1" || len(st.Ports) == 0 {
		t.Fatalf("recorded state %s", b)
	}
	before := meshtest.Git(t, m.Bare, "for-each-ref")

	meshtest.Git(t, m.Work, "mv", "assignments/n1/vault.yaml", "assignments/n3/vault.yaml")
	m.Push(t, "move the vault")
	out, err := r.Once(ctx)
	if err == nil || !out.Refused || !strings.Contains(err.Error(), "mesh-vault") {
		t.Fatalf("moving the vault: outcome %+v, err %v", out, err)
	}
	// Every ref but main (the push) is as it was: node branches and state.
	after := meshtest.Git(t, m.Bare, "for-each-ref")
	if strings.Count(after, "\n") != strings.Count(before, "\n") {
		t.Fatalf("refs were added or removed:\n%s\n%s", before, after)
	}
	for _, line := range strings.Split(strings.TrimSpace(before), "\n") {
		if !strings.HasSuffix(line, "refs/heads/main") && !strings.Contains(after, line) {
			t.Errorf("a refused reconcile moved %s", line)
		}
	}
}

// TestWatchSeesARotation: an operator's rotation changes no ref, yet the
// watching reconciler renders it at its next look.
func TestWatchSeesARotation(t *testing.T) {
	m := newMesh(t)
	r, _, v := newReconcilerVault(t, m, io.Discard)
	outcomes, stop := watching(t, r, WatchOptions{Interval: 100 * time.Millisecond})
	<-outcomes
	if _, err := v.Client.Rotate(context.Background(), "mosquitto@n1.admin"); err != nil {
		t.Fatal(err)
	}
	o := <-outcomes
	stop()
	if !slices.Equal(o.Written, []string{"n1"}) {
		t.Fatalf("after the rotation wrote %v, want [n1]", o.Written)
	}
}

// watching runs r.Watch with opts in a goroutine, sending every outcome to
// the channel it returns (a failed reconcile fails the test); stop cancels
// the watch and fails the test if it ended with an error.
func watching(t *testing.T, r *Reconciler, opts WatchOptions) (outcomes chan *Outcome, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	outcomes = make(chan *Outcome, 16)
	done := make(chan error, 1)
	opts.Reconciled = func(o *Outcome, err error) {
		if err != nil {
			t.Errorf("reconcile: %v", err)
		}
		outcomes <- o
	}
	go func() { done <- r.Watch(ctx, opts) }()
	var once sync.Once
	stop = func() {
		t.Helper()
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Cleanup(func() { once.Do(func() { cancel(); <-done }) })
	return outcomes, stop
}
