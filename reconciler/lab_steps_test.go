package reconciler

import (
	"crypto/rand"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/hostd/declaration"
)

// The lab's provisioners (run-once steps applying per-consumer secrets) are
// tested as rendered, against real servers on this machine: the images are
// not reachable here, so a step's command runs with the machine's own
// tools, in a mount namespace where its mounts are bound as podman would
// bind them.

// needTools makes sure the tools a provisioner's test needs are there,
// finding PostgreSQL's server programs where Debian puts them. Outside CI a
// test without them skips; in CI (CI is set), where .ci/install-deps installs
// them, it fails rather than pass without running.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	if dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin"); len(dirs) > 0 {
		slices.Sort(dirs)
		t.Setenv("PATH", os.Getenv("PATH")+string(os.PathListSeparator)+dirs[len(dirs)-1])
	}
	missing := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf(format+" (CI installs it with .ci/install-deps)", args...)
		}
		t.Skipf(format, args...)
	}
	for _, tool := range append(tools, "unshare", "setpriv") {
		if _, err := exec.LookPath(tool); err != nil {
			missing("%s is not installed: %v", tool, err)
		}
	}
	if os.Geteuid() != 0 {
		missing("mounting a step's paths needs root")
	}
}

// renderDir loads the mesh repository in dir, resolves and renders it.
func renderDir(t *testing.T, dir string) map[string]*declaration.Declaration {
	t.Helper()
	repo, err := schema.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Resolve(repo, ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	decls, err := Render(res, Unsealed{})
	if err != nil {
		t.Fatal(err)
	}
	return decls
}

// indexOf returns the position of resource id in d.
func indexOf(t *testing.T, d *declaration.Declaration, id string) int {
	t.Helper()
	i := slices.IndexFunc(d.Resources, func(r declaration.Resource) bool { return r.ID == id })
	if i < 0 {
		t.Fatalf("%s declares no %s", d.Node, id)
	}
	return i
}

// checkProvisioner checks that step (a provider's resource) is a run-once
// step after server, handed the files of consumer (its login and
// requirement, "gitea__n2.db"): after them, naming them under restartOn,
// mounting them read-only. It returns the step.
func checkProvisioner(t *testing.T, d *declaration.Declaration, step, server, consumer string) *declaration.Container {
	t.Helper()
	module, _, _ := strings.Cut(step, "/")
	at, serverAt := indexOf(t, d, step), indexOf(t, d, server)
	c := d.Resources[at].Container
	if c == nil || !c.RunOnce || at < serverAt {
		t.Fatalf("%s (at %d) is not a run-once step after %s (at %d)", step, at, server, serverAt)
	}
	for _, ext := range []string{".json", ".password"} {
		id := module + "/mesh.consumer." + consumer + ext
		if indexOf(t, d, id) > at || !slices.Contains(c.RestartOn, id) {
			t.Errorf("%s does not come after %s and name it under restartOn %v", step, id, c.RestartOn)
		}
	}
	if !slices.ContainsFunc(c.Mounts, func(m declaration.Mount) bool {
		return m.Target == ConsumersMount && m.ReadOnly && strings.HasSuffix(m.Source, "/"+module+"/.mesh/consumers")
	}) {
		t.Errorf("%s does not mount the consumers' files read-only at %s: %+v", step, ConsumersMount, c.Mounts)
	}
	return c
}

// writeConsumers writes into dir the consumers' JSON files d declares for
// step, as hostd would; the secrets are the test's to write.
func writeConsumers(t *testing.T, d *declaration.Declaration, step *declaration.Container, dir string) {
	t.Helper()
	var src string
	for _, m := range step.Mounts {
		if m.Target == ConsumersMount {
			src = m.Source
		}
	}
	n := 0
	for _, r := range d.Resources {
		if r.File != nil && path.Dir(r.File.Path) == src && r.File.Secret == nil {
			writeFile(t, filepath.Join(dir, path.Base(r.File.Path)), r.File.Content, 0o600)
			n++
		}
	}
	if n == 0 {
		t.Fatalf("%s: no consumer's file under %s", d.Node, src)
	}
}

// stepRun says how to run a rendered step here.
type stepRun struct {
	step *declaration.Container
	// binds maps each of the step's mount targets (under /run) to the local
	// path bound there, read-only.
	binds map[string]string
	// env is added to the step's environment, replacing what it names (the
	// node's address is 127.0.0.1 here; env-files are read by the test).
	env map[string]string
}

// runStep runs r's command in a mount namespace whose /run is a fresh
// tmpfs holding the step's mounts, and returns its output.
func runStep(t *testing.T, r stepRun) (string, error) {
	t.Helper()
	var binds []string
	for _, m := range r.step.Mounts {
		src, ok := r.binds[m.Target]
		if !ok || !strings.HasPrefix(m.Target, "/run/") {
			t.Fatalf("the step mounts %s at %s, which the test does not provide", m.Source, m.Target)
		}
		if st, err := os.Stat(src); err == nil && st.IsDir() {
			binds = append(binds, fmt.Sprintf("mkdir -p %[2]s; mount --bind -o ro %[1]s %[2]s", src, m.Target))
		} else {
			binds = append(binds, fmt.Sprintf("mkdir -p %[3]s; touch %[2]s; mount --bind -o ro %[1]s %[2]s", src, m.Target, path.Dir(m.Target)))
		}
	}
	script := "set -e; mount -t tmpfs tmpfs /run; " + strings.Join(binds, "; ") + `; exec "$@"`
	cmd := exec.Command("unshare", append([]string{"-m", "sh", "-c", script, "sh"}, r.step.Command...)...)
	env := maps.Clone(r.step.Env)
	maps.Copy(env, r.env)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// asNobody runs a server as nobody (initdb and others refuse root).
func asNobody(args ...string) *exec.Cmd {
	return exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups"}, args...)...)
}

// nobodysDir makes a directory nobody owns.
func nobodysDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lab")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startServer starts cmd and stops it when the test ends; its output goes
// to the returned builder.
func startServer(t *testing.T, cmd *exec.Cmd) *strings.Builder {
	t.Helper()
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	return &log
}

// noSecretIn fails the test if any output holds a secret's value.
func noSecretIn(t *testing.T, outputs []string, secrets ...string) {
	t.Helper()
	for _, out := range outputs {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Fatalf("a secret's value was printed:\n%s", strings.ReplaceAll(out, s, "<secret>"))
			}
		}
	}
}

// secretValue returns 32 random alphanumerics, as the contracts' specs ask.
func secretValue() string { return rand.Text()[:26] + "x0Yz9q" }

func writeFile(t *testing.T, name, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}
