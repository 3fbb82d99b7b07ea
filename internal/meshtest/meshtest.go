// Package meshtest makes mesh repositories for tests: a real bare git
// repository holding a copy of an example mesh, with each node's recipient
// replaced by a fresh age identity the test holds, and a git daemon on
// 127.0.0.1 to serve it when a remote is the point.
package meshtest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// Git runs git with args in dir under a clean environment (no global or
// system configuration, a fixed author and committer) and returns its
// output; it fails the test if git does.
func Git(t testing.TB, dir string, args ...string) string {
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

// Mesh is a bare repository holding an example mesh on main, with each
// node's recipient replaced by a fresh age identity the test holds, and the
// work tree an operator pushes from.
type Mesh struct {
	// Bare is the bare repository's directory.
	Bare string
	// Work is the operator's work tree.
	Work string
	// IDs holds each node's age identity, by node name.
	IDs map[string]*age.X25519Identity
}

// New copies the example mesh in dir (such as "../examples/lab") into a
// fresh work tree, gives every node a fresh age identity, and pushes it to
// main of a fresh bare repository.
func New(t testing.TB, dir string) *Mesh {
	t.Helper()
	m := &Mesh{Bare: filepath.Join(t.TempDir(), "mesh.git"), Work: filepath.Join(t.TempDir(), "work"), IDs: map[string]*age.X25519Identity{}}
	Git(t, "", "init", "-q", "--bare", "-b", "main", m.Bare)
	if err := os.CopyFS(m.Work, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	nodes, _ := filepath.Glob(filepath.Join(m.Work, "nodes", "*.yaml"))
	re := regexp.MustCompile(`(?m)^recipient: .*$`)
	for _, p := range nodes {
		id := vaulttest.NewNode(t)
		m.IDs[strings.TrimSuffix(filepath.Base(p), ".yaml")] = id
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, re.ReplaceAll(b, []byte("recipient: "+id.Recipient().String())), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, m.Work, "init", "-q", "-b", "main")
	m.Push(t, "the lab")
	return m
}

// Push commits everything in the work tree with msg (even nothing), force
// pushes it to main of the bare repository, and returns the commit.
func (m *Mesh) Push(t testing.TB, msg string) string {
	t.Helper()
	Git(t, m.Work, "add", "-A")
	Git(t, m.Work, "commit", "-q", "--allow-empty", "-m", msg)
	Git(t, m.Work, "push", "-q", "-f", m.Bare, "main")
	return strings.TrimSpace(Git(t, m.Work, "rev-parse", "HEAD"))
}

// PushReport pushes body as report.json to status/<node> of the bare
// repository, as hostd does.
func (m *Mesh) PushReport(t testing.TB, node string, body []byte) {
	t.Helper()
	work := t.TempDir()
	Git(t, work, "init", "-q", "-b", "x")
	if err := os.WriteFile(filepath.Join(work, "report.json"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	Git(t, work, "add", "report.json")
	Git(t, work, "commit", "-q", "-m", "report")
	Git(t, work, "push", "-q", "-f", m.Bare, "x:refs/heads/status/"+node)
}

// GitDaemon serves the bare repositories under base on 127.0.0.1, with
// pushes enabled, until the test ends, and returns the git:// URL of base.
func GitDaemon(t testing.TB, base string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack",
		"--listen=127.0.0.1", fmt.Sprintf("--port=%d", port), "--base-path="+base, "--informative-errors", base)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	go func() {
		for sc := bufio.NewScanner(stderr); sc.Scan(); {
		}
	}()
	for range 100 {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return fmt.Sprintf("git://127.0.0.1:%d/", port)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("git daemon did not start listening")
	return ""
}
