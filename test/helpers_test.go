// Package test holds meshgen's end-to-end tests: a real bare repository,
// a real vaultd (vaulttest), real age identities and real cosign-format
// keys, driven through the reconciler's loop as `meshgen reconcile` does.
package test

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"filippo.io/age"

	"github.com/meshgen/meshgen/reconciler/loop"
	"github.com/meshgen/meshgen/reconciler/sign"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

var testKey = sync.OnceValues(func() (*sign.KeyPair, error) {
	return sign.GenerateKeyPair([]byte("pw"))
})

func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=op", "GIT_AUTHOR_EMAIL=op@lab", "GIT_COMMITTER_NAME=op", "GIT_COMMITTER_EMAIL=op@lab")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// mesh is a bare repository holding examples/lab on main, each node's
// recipient replaced by a fresh age identity the test holds, and the work
// tree an operator pushes from.
type mesh struct {
	bare, work string
	ids        map[string]*age.X25519Identity
}

func newMesh(t *testing.T) *mesh {
	t.Helper()
	m := &mesh{bare: filepath.Join(t.TempDir(), "mesh.git"), work: filepath.Join(t.TempDir(), "work"), ids: map[string]*age.X25519Identity{}}
	gitRun(t, "", "init", "-q", "--bare", "-b", "main", m.bare)
	if err := os.CopyFS(m.work, os.DirFS("../examples/lab")); err != nil {
		t.Fatal(err)
	}
	nodes, _ := filepath.Glob(filepath.Join(m.work, "nodes", "*.yaml"))
	re := regexp.MustCompile(`(?m)^recipient: .*$`)
	for _, p := range nodes {
		id := vaulttest.NewNode(t)
		m.ids[strings.TrimSuffix(filepath.Base(p), ".yaml")] = id
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, re.ReplaceAll(b, []byte("recipient: "+id.Recipient().String())), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitRun(t, m.work, "init", "-q", "-b", "main")
	m.push(t, "the lab")
	return m
}

func (m *mesh) push(t *testing.T, msg string) string {
	t.Helper()
	gitRun(t, m.work, "add", "-A")
	gitRun(t, m.work, "commit", "-q", "--allow-empty", "-m", msg)
	gitRun(t, m.work, "push", "-q", "-f", m.bare, "main")
	return strings.TrimSpace(gitRun(t, m.work, "rev-parse", "HEAD"))
}

// pushReport pushes report.json to status/<node>, as hostd does.
func (m *mesh) pushReport(t *testing.T, node string, body []byte) {
	t.Helper()
	work := t.TempDir()
	gitRun(t, work, "init", "-q", "-b", "x")
	os.WriteFile(filepath.Join(work, "report.json"), body, 0o644)
	gitRun(t, work, "add", "report.json")
	gitRun(t, work, "commit", "-q", "-m", "report")
	gitRun(t, work, "push", "-q", "-f", m.bare, "x:refs/heads/status/"+node)
}

func newReconciler(t *testing.T, m *mesh, v *vaulttest.Vault, log io.Writer) (*loop.Reconciler, []byte) {
	t.Helper()
	kp, err := testKey()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := sign.LoadSigner(kp.Private, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := loop.New(loop.Options{Repo: m.bare, Vault: v.Client, Signer: signer, Logger: slog.New(slog.NewJSONHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, kp.Public
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
