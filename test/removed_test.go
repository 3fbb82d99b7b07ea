package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/internal/meshtest"
	"github.com/meshgen/meshgen/internal/ocitest"
	"github.com/meshgen/meshgen/reconciler/status"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// idleModule runs one container from the test image (digest-pinned ref)
// that writes into its data directory and sleeps, with a secret file.
const idleModule = `description: a container that keeps a file in its data directory and sleeps
requires:
  - name: data
    contract: host-directory
    provider: host
  - name: token
    contract: secret
    provider: module
    seat: mesh-vault
    spec: {length: 24, alphabet: alnum}
resources:
  - directory: data
    path: ${{ data.path }}/idle
    mode: "0755"
  - file: token
    path: ${{ data.path }}/token
    secret: ${{ token.value }}
    mode: "0400"
  - container: idle
    image: %s
    command: [sh, -c, "echo kept > /data/kept && exec sleep 3600"]
    mounts:
      - source: ${{ data.path }}/idle
        target: /data
`

// TestRemovedNodeStopsItsContainers: node n4 runs a container under the real
// hostd binary and podman. Removed from the mesh, its branch gets a final,
// empty declaration; hostd applies it, removes the container it ran and
// keeps its data directory, and removes the secret file it wrote; meshgen
// status lists n4 as removed.
func TestRemovedNodeStopsItsContainers(t *testing.T) {
	ctx := context.Background()
	bin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/meshgen/meshgen/cmd/hostd").CombinedOutput(); err != nil {
		t.Fatalf("build hostd: %v\n%s", err, out)
	}
	hostdBin := filepath.Join(bin, "hostd")
	store := ocitest.NewStore(t)
	image := store.Load(t, "idle")

	m := newMesh(t)
	root := filepath.Join(t.TempDir(), "root")
	stateDir := filepath.Join(t.TempDir(), "hostd")
	recipient := strings.TrimSpace(run(t, hostdBin, "init", "--dir", stateDir))
	write := func(p, body string) {
		t.Helper()
		p = filepath.Join(m.Work, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("catalog/modules/idle/module.yaml", fmt.Sprintf(idleModule, image))
	write("nodes/n4.yaml", "recipient: "+recipient+"\nroot: "+root+"\nfacts:\n  address: 10.0.0.4\n")
	write("assignments/n4/idle.yaml", "{}\n")
	m.Push(t, "enrol n4, running idle")

	r, pub := newReconciler(t, m, vaulttest.Start(t), io.Discard)
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	pubFile := enrolmentKey(t, pub)
	config := filepath.Join(t.TempDir(), "hostd.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`node: n4
mesh: lab
remote: file://%[1]s
pushURL: file://%[1]s
publicKey: %[2]s
identity: %[3]s/age-identity.txt
stateDir: %[3]s
root: %[4]s
podman:
  root: %[5]s
  runRoot: %[6]s
  tmpDir: %[7]s
  stopTimeout: 1
`, m.Bare, pubFile, stateDir, root, store.Root, store.RunRoot, store.TmpDir)), 0o644); err != nil {
		t.Fatal(err)
	}
	apply := func() declaration.Report {
		t.Helper()
		var rep declaration.Report
		out := run(t, hostdBin, "apply", "--once", "--json", "--config", config)
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("hostd's report: %v\n%s", err, out)
		}
		return rep
	}
	containers := func() string {
		t.Helper()
		out, err := store.Podman(ctx, "ps", "-a", "--format", "{{.Names}}")
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}

	rep := apply()
	if !rep.OK() || rep.Generation != 1 {
		t.Fatalf("hostd did not apply n4's first declaration: %+v", rep)
	}
	var d declaration.Declaration
	if err := jsonUnmarshal(meshtest.Git(t, m.Bare, "cat-file", "blob", "node/n4:declaration.json"), &d); err != nil {
		t.Fatal(err)
	}
	var name, dataDir, token string
	for _, res := range d.Resources {
		switch {
		case res.Container != nil:
			name = res.Container.Name
		case res.Directory != nil:
			dataDir = res.Directory.Path
		case res.File != nil && res.File.Secret != nil:
			token = res.File.Path
		}
	}
	if name == "" || dataDir == "" || !strings.Contains(containers(), name) {
		t.Fatalf("container %q (data %q) is not running after the first apply:\n%s", name, dataDir, containers())
	}
	if b, err := os.ReadFile(token); err != nil || len(b) != 24 {
		t.Fatalf("secret file %q after the first apply: %d bytes, %v", token, len(b), err)
	}
	// The container writes its file as it starts: wait for it (hostd does
	// not wait for a container's command).
	kept := filepath.Join(dataDir, "kept")
	for i := 0; ; i++ {
		if _, err := os.Stat(kept); err == nil {
			break
		} else if i == 200 {
			t.Fatalf("the container never wrote %s: %v", kept, err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	meshtest.Git(t, m.Work, "rm", "-q", "-r", "nodes/n4.yaml", "assignments/n4")
	m.Push(t, "n4 leaves the mesh")
	out, err := r.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Removed, []string{"n4"}) {
		t.Fatalf("reconcile after n4 left: removed %v", out.Removed)
	}

	rep = apply()
	if rep.Refused != "" || !rep.OK() || rep.Generation != 2 || len(rep.Resources) != 0 {
		t.Fatalf("hostd on n4 did not apply its empty declaration: %+v", rep)
	}
	if !slices.Contains(rep.Removed, name) {
		t.Fatalf("hostd's report removed %v, want %s", rep.Removed, name)
	}
	if strings.Contains(containers(), name) {
		t.Fatalf("container %s still exists after the empty declaration:\n%s", name, containers())
	}
	if b, err := os.ReadFile(kept); err != nil || string(b) != "kept\n" {
		t.Fatalf("the removed node's data was not kept: %q, %v", b, err)
	}
	if _, err := os.Stat(token); !os.IsNotExist(err) || !slices.Contains(rep.RemovedFiles, token) {
		t.Fatalf("the secret file %s is still held (stat: %v; report removed %v)", token, err, rep.RemovedFiles)
	}

	nodes, err := status.Read(m.Bare, status.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum := status.Summarize(nodes, status.SummaryOptions{Now: time.Now(), Interval: time.Minute, StaleAfter: 3})
	i := slices.IndexFunc(sum.Nodes, func(e status.Entry) bool { return e.Node == "n4" })
	if i < 0 || sum.Nodes[i].State != status.Removed || sum.Nodes[i].Applied != 2 || sum.Removed != 1 {
		t.Fatalf("status of n4: %+v", sum.Nodes)
	}
}

// run runs a binary and returns its standard output, failing the test with
// its standard error if it fails.
func run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s\n%s", filepath.Base(bin), strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}
