package hostd

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/hostd/podman"
	"github.com/meshgen/meshgen/internal/ocitest"
)

// The podman store and images every test of this binary shares; each test
// uses its own mesh (label) and container names, so they never meet.
var shared struct {
	store  *ocitest.Store
	image  string // localhost/busybox@sha256:...
	image2 string // another digest
}

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	s, err := ocitest.OpenStore()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	shared.store = s
	if shared.image, err = s.LoadImage("busybox"); err == nil {
		shared.image2, err = s.LoadImageVariant("busybox", "two")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// fixture is one node: its roots, keys, state and a Host on the shared store.
type fixture struct {
	t        testing.TB
	mesh     string
	node     string
	root     string
	cfg      Config
	host     *Host
	signer   signature.Signer
	identity *age.X25519Identity
	gen      uint64
}

type fixtureOptions struct {
	// Roots beyond the node root.
	ExtraRoots []string
	// Remote and PushURL of the mesh repository.
	Remote, PushURL string
}

func newFixture(t testing.TB, opts fixtureOptions) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{t: t, mesh: meshName(t), node: "n1", root: filepath.Join(dir, "root")}
	if err := os.MkdirAll(f.root, 0o755); err != nil {
		t.Fatal(err)
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	if f.signer, err = signature.LoadECDSASignerVerifier(priv, crypto.SHA256); err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(dir, "keys")
	if _, err := Init(keys); err != nil {
		t.Fatal(err)
	}
	ids, err := readIdentity(filepath.Join(keys, IdentityFile))
	if err != nil {
		t.Fatal(err)
	}
	f.identity = ids[0].(*age.X25519Identity)
	if err := os.WriteFile(filepath.Join(keys, "reconciler.pub"), pubPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	zero := 0
	s := shared.store
	if opts.Remote == "" {
		opts.Remote = "file:///nonexistent"
	}
	f.cfg = Config{
		Node: f.node, Mesh: f.mesh, Remote: opts.Remote, PushURL: opts.PushURL,
		PublicKey: filepath.Join(keys, "reconciler.pub"), Identity: filepath.Join(keys, IdentityFile),
		StateDir: filepath.Join(dir, "state"), Root: f.root, ExtraRoots: opts.ExtraRoots,
		Podman: PodmanConfig{Root: s.Root, RunRoot: s.RunRoot, TmpDir: s.TmpDir, StopTimeout: &zero},
	}
	if f.host, err = New(f.cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.removeContainers() })
	return f
}

// meshName makes a mesh name (and container name prefix) unique to the test.
func meshName(t testing.TB) string {
	sum := sha256.Sum256([]byte(t.Name()))
	return "m" + hex.EncodeToString(sum[:5])
}

// cname is a container name unique to this test.
func (f *fixture) cname(s string) string { return f.mesh + "-" + s }

func (f *fixture) path(p string) string { return filepath.Join(f.root, p) }

// podman runs podman on the shared store.
func (f *fixture) podman(args ...string) (string, error) {
	out, err := shared.store.Podman(context.Background(), args...)
	return string(out), err
}

func (f *fixture) mustPodman(args ...string) string {
	f.t.Helper()
	out, err := f.podman(args...)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fixture) removeContainers() {
	out, err := f.podman("ps", "-a", "-q", "--filter", "label="+podman.LabelMesh+"="+f.mesh)
	if err != nil {
		return
	}
	ids := strings.Fields(out)
	if len(ids) > 0 {
		f.podman(append([]string{"rm", "-f", "-t", "0"}, ids...)...)
	}
}

// containers lists this test's containers: name -> state.
func (f *fixture) containers() map[string]string {
	f.t.Helper()
	out := f.mustPodman("ps", "-a", "--format", "json", "--filter", "name=^"+f.mesh+"-")
	var ps []struct {
		Names []string
		State string
		ID    string `json:"Id"`
	}
	if err := json.Unmarshal([]byte(out), &ps); err != nil {
		f.t.Fatal(err)
	}
	m := map[string]string{}
	for _, c := range ps {
		m[c.Names[0]] = c.State
	}
	return m
}

// containerID returns a container's ID.
func (f *fixture) containerID(name string) string {
	f.t.Helper()
	return strings.TrimSpace(f.mustPodman("container", "inspect", "--format", "{{.Id}}", name))
}

// decl starts a declaration of the next generation.
func (f *fixture) decl(rs ...declaration.Resource) *declaration.Declaration {
	f.gen++
	return &declaration.Declaration{Format: declaration.Version, Mesh: f.mesh, Node: f.node, Generation: f.gen, Source: "0123456789abcdef", Resources: rs}
}

// sealed is a secret sealed to this node.
type sealed struct {
	ref *declaration.SecretRef
	ct  []byte
}

func (f *fixture) seal(name string, version uint64, plaintext string) sealed {
	f.t.Helper()
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, f.identity.Recipient())
	if err != nil {
		f.t.Fatal(err)
	}
	w.Write([]byte(plaintext))
	if err := w.Close(); err != nil {
		f.t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return sealed{
		ref: &declaration.SecretRef{Name: name, Version: version, Sealed: "secrets/" + name + ".age", SHA256: hex.EncodeToString(sum[:])},
		ct:  buf.Bytes(),
	}
}

// branch signs d as `cosign sign-blob` does and carries the sealed files.
func (f *fixture) branch(d *declaration.Declaration, secrets ...sealed) Branch {
	f.t.Helper()
	data, err := declaration.Marshal(d)
	if err != nil {
		f.t.Fatal(err)
	}
	br := Branch{Commit: fmt.Sprintf("commit-%d", d.Generation), Declaration: data, Signature: signBlob(f.t, f.signer, data), Sealed: map[string][]byte{}}
	for _, s := range secrets {
		br.Sealed[s.ref.Sealed] = s.ct
	}
	return br
}

func signBlob(t testing.TB, s signature.Signer, data []byte) []byte {
	t.Helper()
	sig, err := s.SignMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(base64.StdEncoding.EncodeToString(sig))
}

// apply adopts and applies a declaration; the error is returned, not fatal.
func (f *fixture) apply(d *declaration.Declaration, secrets ...sealed) (declaration.Report, error) {
	f.t.Helper()
	if err := f.host.Adopt(f.branch(d, secrets...)); err != nil {
		return declaration.Report{}, err
	}
	return f.host.ApplyTarget(context.Background())
}

func (f *fixture) mustApply(d *declaration.Declaration, secrets ...sealed) declaration.Report {
	f.t.Helper()
	rep, err := f.apply(d, secrets...)
	if err != nil {
		f.t.Fatalf("apply generation %d: %v\n%s", d.Generation, err, FormatText(rep))
	}
	return rep
}

// outcome returns one resource's result.
func outcome(t testing.TB, rep declaration.Report, id string) declaration.Result {
	t.Helper()
	for _, r := range rep.Resources {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no result for %q in\n%s", id, FormatText(rep))
	return declaration.Result{}
}

func expectOutcome(t testing.TB, rep declaration.Report, id string, want declaration.Outcome) declaration.Result {
	t.Helper()
	r := outcome(t, rep, id)
	if r.Outcome != want {
		t.Fatalf("%s: outcome %s (%s), want %s\n%s", id, r.Outcome, r.Reason, want, FormatText(rep))
	}
	return r
}

// Resource builders.

func fileRes(id, path, content string) declaration.Resource {
	return declaration.Resource{ID: id, Kind: declaration.KindFile, Module: "m", File: &declaration.File{Path: path, Mode: "0644", Content: content}}
}

func dirRes(id, path string) declaration.Resource {
	return declaration.Resource{ID: id, Kind: declaration.KindDirectory, Module: "m", Directory: &declaration.Directory{Path: path, Mode: "0755"}}
}

func ctrRes(id string, c declaration.Container) declaration.Resource {
	if c.Image == "" {
		c.Image = shared.image
	}
	return declaration.Resource{ID: id, Kind: declaration.KindContainer, Module: "m", Container: &c}
}

// sleeper is a long-running container command.
var sleeper = []string{"sleep", "3600"}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func lines(t testing.TB, p string) int {
	t.Helper()
	return strings.Count(readFile(t, p), "\n")
}

// waitFor polls cond until it holds (a container's own start is
// asynchronous); the test's deadline bounds it.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for !cond() {
		time.Sleep(50 * time.Millisecond)
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func writeTestFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
