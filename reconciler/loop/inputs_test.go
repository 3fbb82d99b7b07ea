package loop

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/internal/meshtest"
	"github.com/meshgen/meshgen/reconciler/branch"
	"github.com/meshgen/meshgen/reconciler/sign"
	"github.com/meshgen/meshgen/reconciler/sign/signtest"
	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// oneShot is a fresh reconciler's one reconcile, as a new `meshgen
// reconcile` process runs it: an empty seal cache, and vaultd's real client
// counting seals. Any resolution seals every secret the mesh needs, so no
// seal at all proves nothing was resolved or rendered.
type oneShot struct {
	out   *Outcome
	err   error
	seals int64
	log   string
}

func runOnce(t *testing.T, m *meshtest.Mesh, v *vaulttest.Vault, signer branch.Signer, tweak func(*Reconciler)) oneShot {
	t.Helper()
	cv := &countingVault{Client: v.Client}
	var log strings.Builder
	r, err := New(Options{Repo: m.Bare, Vault: cv, Signer: signer, Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if tweak != nil {
		tweak(r)
	}
	out, err := r.Once(context.Background())
	return oneShot{out: out, err: err, seals: cv.seals.Load(), log: log.String()}
}

func testSigner(t *testing.T) *sign.Signer {
	t.Helper()
	s, _ := signtest.Signer(t)
	return s
}

// TestOneShotUnchangedInputs: a new process reconciling a mesh where
// nothing changed since the last reconcile reads the refs, vaultd's status
// and the record on meshgen/state, and does nothing else: no seal (so no
// resolution), no ref moved, one log line saying so, and the outcome the
// last reconcile had (every node unchanged, the same requirement waiting).
func TestOneShotUnchangedInputs(t *testing.T) {
	m := newMesh(t)
	v := vaulttest.Start(t)
	signer := testSigner(t)
	first := runOnce(t, m, v, signer, nil)
	if first.err != nil || len(first.out.Written) != 3 || first.out.InputsUnchanged {
		t.Fatalf("first reconcile: %+v, %v", first.out, first.err)
	}
	files, err := branch.ReadStateFiles(m.Bare)
	if err != nil {
		t.Fatal(err)
	}
	var rec inputs
	if err := json.Unmarshal(files[InputsFile], &rec); err != nil {
		t.Fatalf("no record of inputs on %s: %v", branch.StateRef, err)
	}
	if rec.Main != first.out.Source || len(rec.Nodes) != 3 || !strings.HasPrefix(rec.Vault, "generation ") || rec.Signer == "" ||
		!strings.HasPrefix(rec.Build, "format ") || rec.State != digest(files[branch.StateFile]) {
		t.Fatalf("record of inputs: %s", files[InputsFile])
	}
	before := meshtest.Git(t, m.Bare, "for-each-ref")

	// The seals of the first reconcile changed vaultd (secrets made), and
	// they explain every change: the very next process is skipped already.
	for i := range 2 {
		got := runOnce(t, m, v, signer, nil)
		if got.err != nil {
			t.Fatal(got.err)
		}
		if !got.out.InputsUnchanged || got.seals != 0 || got.out.Sealed != 0 {
			t.Fatalf("run %d: unchanged inputs were reconciled again: %+v, %d seals", i, got.out, got.seals)
		}
		if got.out.Source != first.out.Source || !slices.Equal(got.out.Unchanged, []string{"n1", "n2", "n3"}) ||
			len(got.out.Written) != 0 || !sameJSON(got.out.Waiting, first.out.Waiting) || len(got.out.Waiting) == 0 {
			t.Errorf("run %d: outcome %+v; want the first's source and waiting, every node unchanged", i, got.out)
		}
		if after := meshtest.Git(t, m.Bare, "for-each-ref"); after != before {
			t.Errorf("run %d: a skipped reconcile moved refs:\n%s\n%s", i, before, after)
		}
		if n := strings.Count(got.log, "\n"); n != 1 || !strings.Contains(got.log, `"msg":"unchanged"`) {
			t.Errorf("run %d: want one log line saying unchanged, got:\n%s", i, got.log)
		}
	}
}

// TestOneShotChangedInput: any input of the last reconcile that changed
// makes a new process reconcile in full (it seals every secret again), and
// what the change calls for is done; the process after it is skipped again.
func TestOneShotChangedInput(t *testing.T) {
	other, err := sign.GenerateKeyPair([]byte("other"))
	if err != nil {
		t.Fatal(err)
	}
	otherSigner, err := sign.LoadSigner(other.Private, []byte("other"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		change func(t *testing.T, m *meshtest.Mesh, v *vaulttest.Vault)
		signer *sign.Signer      // the next process's, when it changes
		tweak  func(*Reconciler) // the next process's build, when it changes
		check  func(t *testing.T, m *meshtest.Mesh, out *Outcome)
	}{
		{
			name:   "a push to main",
			change: func(t *testing.T, m *meshtest.Mesh, _ *vaulttest.Vault) { m.Push(t, "nothing changes") },
			check: func(t *testing.T, m *meshtest.Mesh, out *Outcome) {
				if len(out.Written) != 0 {
					t.Errorf("an empty push wrote %v", out.Written)
				}
			},
		},
		{
			name: "a node's age key",
			change: func(t *testing.T, m *meshtest.Mesh, _ *vaulttest.Vault) {
				id := vaulttest.NewNode(t)
				p := filepath.Join(m.Work, "nodes", "n3.yaml")
				b, _ := os.ReadFile(p)
				b = regexp.MustCompile(`(?m)^recipient: .*$`).ReplaceAll(b, []byte("recipient: "+id.Recipient().String()))
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
				m.IDs["n3"] = id
				m.Push(t, "n3 has a new key")
			},
			check: func(t *testing.T, m *meshtest.Mesh, out *Outcome) {
				if !slices.Contains(out.Written, "n3") {
					t.Errorf("n3's new key wrote %v", out.Written)
				}
			},
		},
		{
			name: "a status report",
			change: func(t *testing.T, m *meshtest.Mesh, _ *vaulttest.Vault) {
				m.PushReport(t, "n3", []byte(`{"mesh":"lab","node":"n3","generation":1,"attempted":1,"source":"x","time":"2026-01-01T00:00:00Z","answers":{"ca/init":{"root":"ROOT-FROM-N3"}}}`))
			},
			check: func(t *testing.T, m *meshtest.Mesh, out *Outcome) {
				if len(out.Waiting) != 0 || !slices.Contains(out.Written, "n2") {
					t.Errorf("after the CA's answer: waiting %v, wrote %v", out.Waiting, out.Written)
				}
			},
		},
		{
			name: "a rotation started with meshgen vault rotate",
			change: func(t *testing.T, _ *meshtest.Mesh, v *vaulttest.Vault) {
				if _, err := v.Client.Rotate(context.Background(), "mosquitto@n1.admin"); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, m *meshtest.Mesh, out *Outcome) {
				if !slices.Equal(out.Written, []string{"n1"}) {
					t.Errorf("the rotation wrote %v, want [n1]", out.Written)
				}
			},
		},
		{
			name:   "the signing key",
			signer: otherSigner,
			check: func(t *testing.T, m *meshtest.Mesh, out *Outcome) {
				if out.InputsUnchanged {
					t.Error("a new signing key was not seen")
				}
			},
		},
		{
			name:  "a new build",
			tweak: func(r *Reconciler) { r.build = buildID(FormatVersion + 1) },
			check: func(t *testing.T, m *meshtest.Mesh, out *Outcome) {
				if len(out.Written) != 0 {
					t.Errorf("a new build rendering the same wrote %v", out.Written)
				}
			},
		},
		{
			name: "a node branch changed behind the reconciler's back",
			change: func(t *testing.T, m *meshtest.Mesh, _ *vaulttest.Vault) {
				c := strings.TrimSpace(meshtest.Git(t, m.Bare, "commit-tree", "node/n1^{tree}", "-p", "node/n2", "-m", "tampered"))
				meshtest.Git(t, m.Bare, "update-ref", "refs/heads/node/n2", c)
			},
			check: func(t *testing.T, m *meshtest.Mesh, out *Outcome) {
				if !slices.Equal(out.Written, []string{"n2"}) {
					t.Errorf("a tampered node/n2 wrote %v, want [n2]", out.Written)
				}
				checkNodeBranch(t, m, "n2")
			},
		},
		{
			name: "a node branch deleted behind the reconciler's back",
			change: func(t *testing.T, m *meshtest.Mesh, _ *vaulttest.Vault) {
				meshtest.Git(t, m.Bare, "update-ref", "-d", "refs/heads/node/n2")
			},
			check: func(t *testing.T, m *meshtest.Mesh, out *Outcome) {
				if !slices.Equal(out.Written, []string{"n2"}) {
					t.Errorf("a deleted node/n2 wrote %v, want [n2]", out.Written)
				}
				checkNodeBranch(t, m, "n2")
			},
		},
		{
			name: "the recorded state edited by hand",
			change: func(t *testing.T, m *meshtest.Mesh, _ *vaulttest.Vault) {
				tree := meshtest.Git(t, m.Bare, "ls-tree", branch.StateRef)
				blob := strings.TrimSpace(gitRunIn(t, m.Bare, `{"ports":{}}`, "hash-object", "-w", "--stdin"))
				tree = regexp.MustCompile(`[0-9a-f]{40}(\t`+branch.StateFile+`)`).ReplaceAllString(tree, blob+"$1")
				th := strings.TrimSpace(gitRunIn(t, m.Bare, tree, "mktree"))
				c := strings.TrimSpace(meshtest.Git(t, m.Bare, "commit-tree", th, "-p", branch.StateRef, "-m", "edited"))
				meshtest.Git(t, m.Bare, "update-ref", branch.StateRef, c)
			},
			check: func(t *testing.T, m *meshtest.Mesh, out *Outcome) {
				if out.InputsUnchanged {
					t.Error("an edited state was not seen")
				}
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newMesh(t)
			v := vaulttest.Start(t)
			signer := testSigner(t)
			if got := runOnce(t, m, v, signer, nil); got.err != nil || len(got.out.Written) != 3 {
				t.Fatalf("first reconcile: %+v, %v", got.out, got.err)
			}
			// Before the change, the next process is skipped: the change,
			// not anything else, is what makes it run in full.
			if got := runOnce(t, m, v, signer, nil); got.err != nil || !got.out.InputsUnchanged {
				t.Fatalf("before the change: %+v, %v", got.out, got.err)
			}
			if tt.change != nil {
				tt.change(t, m, v)
			}
			if tt.signer != nil {
				signer = tt.signer
			}
			got := runOnce(t, m, v, signer, tt.tweak)
			if got.err != nil {
				t.Fatal(got.err)
			}
			if got.out.InputsUnchanged || got.seals == 0 || strings.Contains(got.log, `"msg":"unchanged"`) {
				t.Fatalf("after the change, not reconciled in full: %+v, %d seals\n%s", got.out, got.seals, got.log)
			}
			tt.check(t, m, got.out)
			if again := runOnce(t, m, v, signer, tt.tweak); again.err != nil || !again.out.InputsUnchanged || again.seals != 0 {
				t.Errorf("the process after the full reconcile: %+v, %d seals, %v", again.out, again.seals, again.err)
			}
		})
	}
}

// checkNodeBranch: node's branch holds a declaration for node, signed by
// the reconciler's key.
func checkNodeBranch(t *testing.T, m *meshtest.Mesh, node string) {
	t.Helper()
	_, pub := signtest.Signer(t)
	body := meshtest.Git(t, m.Bare, "cat-file", "blob", "node/"+node+":declaration.json")
	sig := meshtest.Git(t, m.Bare, "cat-file", "blob", "node/"+node+":declaration.json.sig")
	if err := sign.Verify(pub, []byte(body), []byte(sig)); err != nil {
		t.Errorf("node/%s: %v", node, err)
	}
	d, err := declaration.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if d.Node != node {
		t.Errorf("node/%s holds the declaration of %s", node, d.Node)
	}
}

// gitRunIn is gitRun with stdin.
func gitRunIn(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// statusOnlyVault is vaultd's real client without its generation: a vault
// that offers none is fingerprinted by its whole status.
type statusOnlyVault struct {
	c *countingVault
}

func (v statusOnlyVault) Seal(ctx context.Context, req client.SealRequest) (*client.SealResponse, error) {
	return v.c.Seal(ctx, req)
}
func (v statusOnlyVault) Status(ctx context.Context) (*client.Status, error) {
	return v.c.Status(ctx)
}
func (v statusOnlyVault) ConfirmApplied(ctx context.Context, req client.ConfirmRequest) (*client.Rotation, error) {
	return v.c.ConfirmApplied(ctx, req)
}
func (v statusOnlyVault) ConfirmRead(ctx context.Context, req client.ConfirmRequest) (*client.Rotation, error) {
	return v.c.ConfirmRead(ctx, req)
}
func (v statusOnlyVault) ConfirmRetired(ctx context.Context, req client.ConfirmRequest) (*client.Rotation, error) {
	return v.c.ConfirmRetired(ctx, req)
}

// TestOneShotVaultFingerprint: the record holds vaultd's generation when it
// offers one, else the digest of its whole status; either way the process
// after a first reconcile is skipped, and an operator's rotation (a write
// in vaultd, nothing else changed) is seen.
func TestOneShotVaultFingerprint(t *testing.T) {
	for _, tt := range []struct {
		name       string
		hide       bool // the vault offers no generation
		recordLike *regexp.Regexp
	}{
		{"generation", false, regexp.MustCompile(`^generation [0-9a-f]{32}:[0-9]+$`)},
		{"whole status", true, regexp.MustCompile(`^[0-9a-f]{64}$`)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newMesh(t)
			v := vaulttest.Start(t)
			signer := testSigner(t)
			run := func() oneShot {
				t.Helper()
				cv := &countingVault{Client: v.Client}
				var vault Vault = cv
				if tt.hide {
					vault = statusOnlyVault{cv}
				}
				r, err := New(Options{Repo: m.Bare, Vault: vault, Signer: signer, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				out, err := r.Once(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return oneShot{out: out, seals: cv.seals.Load()}
			}
			if got := run(); len(got.out.Written) != 3 {
				t.Fatalf("first reconcile: %+v", got.out)
			}
			files, err := branch.ReadStateFiles(m.Bare)
			if err != nil {
				t.Fatal(err)
			}
			var rec inputs
			if err := json.Unmarshal(files[InputsFile], &rec); err != nil || !tt.recordLike.MatchString(rec.Vault) {
				t.Fatalf("the vault recorded as %q (%v), want %s", rec.Vault, err, tt.recordLike)
			}
			if got := run(); !got.out.InputsUnchanged || got.seals != 0 {
				t.Fatalf("the process after the first: %+v, %d seals", got.out, got.seals)
			}
			if _, err := v.Client.Rotate(context.Background(), "mosquitto@n1.admin"); err != nil {
				t.Fatal(err)
			}
			if got := run(); got.out.InputsUnchanged || !slices.Equal(got.out.Written, []string{"n1"}) {
				t.Fatalf("after a rotation: %+v", got.out)
			}
			if got := run(); !got.out.InputsUnchanged || got.seals != 0 {
				t.Fatalf("the process after the rotation's reconcile: %+v, %d seals", got.out, got.seals)
			}
		})
	}
}

// testClock is a settable clock for vaultd's maximum ages.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestOneShotMaxAgeRotation: a secret's maximum age passing writes nothing
// in vaultd, so its generation, and the one-shot skip, stay as they were;
// once vaultd's policy timer starts the due rotation (a write), the next
// process reconciles in full and gives the applier the new value, and the
// one after it is skipped again. The no-change skip relies on that timer
// (vaultd checks every minute by default).
func TestOneShotMaxAgeRotation(t *testing.T) {
	const secret = "mosquitto@n1.admin"
	ctx := context.Background()
	c := &testClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := newMesh(t)
	p := filepath.Join(m.Work, "catalog", "modules", "mosquitto", "module.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	nb := strings.Replace(string(b), "spec: {length: 32, alphabet: alnum}", "spec: {length: 32, alphabet: alnum, maxAge: 720h}", 1)
	if nb == string(b) {
		t.Fatal("the lab's mosquitto admin secret spec moved: update this test")
	}
	if err := os.WriteFile(p, []byte(nb), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Push(t, "mosquitto's admin password rotates every 30 days")
	v := vaulttest.StartWith(t, vaulttest.Options{Now: c.now})
	signer := testSigner(t)
	run := func() oneShot {
		t.Helper()
		got := runOnce(t, m, v, signer, nil)
		if got.err != nil {
			t.Fatal(got.err)
		}
		return got
	}
	if got := run(); len(got.out.Written) != 3 {
		t.Fatalf("first reconcile: %+v", got.out)
	}
	if got := run(); !got.out.InputsUnchanged {
		t.Fatalf("before the maximum age: %+v", got.out)
	}
	c.add(721 * time.Hour)
	if got := run(); !got.out.InputsUnchanged || got.seals != 0 {
		t.Fatalf("the age alone (no write in vaultd) made a full reconcile: %+v", got.out)
	}
	started, err := v.Vault.Tick(ctx)
	if err != nil || !slices.Equal(started, []string{secret}) {
		t.Fatalf("the policy timer started %v, %v", started, err)
	}
	got := run()
	if got.out.InputsUnchanged || !slices.Equal(got.out.Written, []string{"n1"}) {
		t.Fatalf("after the policy started the rotation: %+v", got.out)
	}
	st, err := v.Client.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Secrets {
		if s.Name == secret && (s.Rotation == nil || s.Rotation.Reason != "max-age") {
			t.Fatalf("%s: rotation %+v", secret, s.Rotation)
		}
	}
	if again := run(); !again.out.InputsUnchanged || again.seals != 0 {
		t.Fatalf("the process after: %+v, %d seals", again.out, again.seals)
	}
}
