package reconciler

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
	if _, err := os.Stat("/bin/busybox"); err != nil {
		missing("busybox-static is not installed: %v", err)
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
	return renderWith(t, resolveDir(t, dir), Unsealed{})
}

// resolveDir loads the mesh repository in dir and resolves it.
func resolveDir(t *testing.T, dir string) *Resolution {
	t.Helper()
	repo, err := schema.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Resolve(repo, ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// renderWith renders res with what sealed says each node holds.
func renderWith(t *testing.T, res *Resolution, sealed SealedSecrets) map[string]*declaration.Declaration {
	t.Helper()
	decls, err := Render(res, sealed)
	if err != nil {
		t.Fatal(err)
	}
	return decls
}

// resource returns the resource of d whose ID is id.
func resource(t *testing.T, d *declaration.Declaration, id string) *declaration.Resource {
	t.Helper()
	return &d.Resources[indexOf(t, d, id)]
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
	indexOf(t, d, module+"/mesh.consumer."+consumer+".json")
	src := ""
	if i := slices.IndexFunc(c.Mounts, func(m declaration.Mount) bool {
		return m.Target == ConsumersMount && m.ReadOnly && strings.HasSuffix(m.Source, "/"+module+"/.mesh/consumers")
	}); i >= 0 {
		src = c.Mounts[i].Source
	} else {
		t.Errorf("%s does not mount the consumers' files read-only at %s: %+v", step, ConsumersMount, c.Mounts)
	}
	// Every file the mesh writes there, each credential's password among
	// them, is in place before the step and runs it again when it changes.
	n := 0
	for i, r := range d.Resources {
		if r.File == nil || path.Dir(r.File.Path) != src {
			continue
		}
		n++
		if i > at || !slices.Contains(c.RestartOn, r.ID) {
			t.Errorf("%s does not come after %s and name it under restartOn %v", step, r.ID, c.RestartOn)
		}
	}
	if n < 2 {
		t.Errorf("%s: %d files in %s, want a consumer's file and its password at least", step, n, src)
	}
	return c
}

// writeConsumers writes into dir, emptied first, the files d declares in
// step's consumers directory, as hostd would: the consumers' files as
// rendered, and each secret file's value of the version it names from
// values (a derived form as a stand-in, which no step here reads). With no
// values only the consumers' files are written, and the secrets are the
// test's to write.
func writeConsumers(t *testing.T, d *declaration.Declaration, step *declaration.Container, dir string, values map[uint64]string) {
	t.Helper()
	var src string
	for _, m := range step.Mounts {
		if m.Target == ConsumersMount {
			src = m.Source
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range d.Resources {
		f := r.File
		if f == nil || path.Dir(f.Path) != src {
			continue
		}
		name := filepath.Join(dir, path.Base(f.Path))
		switch {
		case f.Secret == nil:
			writeFile(t, name, f.Content, 0o600)
			n++
		case values == nil:
		case f.Secret.Sealed == DerivedPath(f.Secret.Name, f.Secret.Version):
			writeFile(t, name, fmt.Sprintf("derived form of version %d", f.Secret.Version), 0o600)
		default:
			v, ok := values[f.Secret.Version]
			if !ok {
				t.Fatalf("%s holds version %d of %s, which the test never made", r.ID, f.Secret.Version, f.Secret.Name)
			}
			writeFile(t, name, v, 0o600)
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

// alpineTools are the programs the lab's steps run that their images
// (alpine's) take from busybox.
var alpineTools = []string{"sh", "sed", "grep", "cut", "wc", "cat", "mktemp", "rm", "sleep"}

// busyboxPath returns a directory where each of alpineTools is busybox,
// for a step to find them first, as in its image.
func busyboxPath(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, tool := range alpineTools {
		if err := os.Symlink("/bin/busybox", filepath.Join(dir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runStep runs r's command in a mount namespace whose /run is a fresh
// tmpfs holding the step's mounts, with the shell and text tools of its
// image (busybox), and returns its output.
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
	cmd.Env = []string{"PATH=" + busyboxPath(t) + string(os.PathListSeparator) + os.Getenv("PATH")}
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

// serverLog is a server's output, read while the server writes it.
type serverLog struct {
	mu  sync.Mutex
	out strings.Builder
}

func (l *serverLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.Write(p)
}

func (l *serverLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.String()
}

// startServer starts cmd and stops it when the test ends; its output goes
// to the returned log.
func startServer(t *testing.T, cmd *exec.Cmd) *serverLog {
	t.Helper()
	log := &serverLog{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	return log
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

// A two-party rotation (design 27, "Rotation"; ADR 0114), as the vault
// drives it and the renderer renders it, phase by phase: each phase is what
// the provider's node holds of the consumer's secret (as its applier) and
// what the consumer's node reads, and what must then log in and what must
// not, against the real server, once the provider's step ran.

// slotVersion is one credential of a consumer: the slot whose login it is
// ([SlotLogin]) and the version of the secret that is its password.
type slotVersion struct {
	slot    string
	version uint64
}

func (c slotVersion) String() string { return fmt.Sprintf("slot %s v%d", c.slot, c.version) }

// rotationPhase is one step of a rotation.
type rotationPhase struct {
	name string
	// current, next and retire are what the provider holds ([Held]).
	current slotVersion
	next    *slotVersion
	retire  string
	// reads is the credential the consumer reads.
	reads slotVersion
	// works must log in after the provider's step ran; refused must not.
	works, refused []slotVersion
}

// The credentials of a rotation from slot a to b and back.
var slotA1, slotB2, slotA3 = slotVersion{"a", 1}, slotVersion{"b", 2}, slotVersion{"a", 3}

// fullRotation rotates a credential from slot a to slot b and back: the
// applier ensures the new credential beside the one in use; then the reader
// is given it while the applier holds both; then the old one is retired.
var fullRotation = []rotationPhase{
	{name: "in use", current: slotA1, reads: slotA1, works: []slotVersion{slotA1}},
	{name: "applying", current: slotA1, next: &slotB2, reads: slotA1, works: []slotVersion{slotA1, slotB2}},
	{name: "reading", current: slotA1, next: &slotB2, reads: slotB2, works: []slotVersion{slotA1, slotB2}},
	{name: "retiring", current: slotB2, retire: "a", reads: slotB2, works: []slotVersion{slotB2}, refused: []slotVersion{slotA1}},
	{name: "done", current: slotB2, reads: slotB2, works: []slotVersion{slotB2}, refused: []slotVersion{slotA1}},
	{name: "applying back", current: slotB2, next: &slotA3, reads: slotB2, works: []slotVersion{slotB2, slotA3}, refused: []slotVersion{slotA1}},
	{name: "reading back", current: slotB2, next: &slotA3, reads: slotA3, works: []slotVersion{slotB2, slotA3}, refused: []slotVersion{slotA1}},
	{name: "retiring back", current: slotA3, retire: "b", reads: slotA3, works: []slotVersion{slotA3}, refused: []slotVersion{slotA1, slotB2}},
	{name: "done back", current: slotA3, reads: slotA3, works: []slotVersion{slotA3}, refused: []slotVersion{slotA1, slotB2}},
}

// abandonedRotation gives up a rotation before readers moved: the new
// credential is retired and the one in use never stops working.
var abandonedRotation = []rotationPhase{
	{name: "in use", current: slotA1, reads: slotA1, works: []slotVersion{slotA1}},
	{name: "applying", current: slotA1, next: &slotB2, reads: slotA1, works: []slotVersion{slotA1, slotB2}},
	{name: "abandoned", current: slotA1, retire: "b", reads: slotA1, works: []slotVersion{slotA1}, refused: []slotVersion{slotB2}},
	{name: "in use after", current: slotA1, reads: slotA1, works: []slotVersion{slotA1}, refused: []slotVersion{slotB2}},
}

// rotationVault stands in for the vault at one phase of a rotation of
// secret: the provider's node holds it as applier, the consumer's reads
// it; every other secret is at version 1 with no rotation.
type rotationVault struct {
	secret string
	phase  rotationPhase
}

// Sealed implements [SealedSecrets].
func (v rotationVault) Sealed(name, _ string, role Role) (Held, bool) {
	switch {
	case name != v.secret:
		return Held{Current: sealedAt(name, slotVersion{"", 1})}, true
	case role == Reader:
		return Held{Current: sealedAt(name, v.phase.reads)}, true
	}
	h := Held{Current: sealedAt(name, v.phase.current), Retire: v.phase.retire}
	if v.phase.next != nil {
		next := sealedAt(name, *v.phase.next)
		h.Next = &next
	}
	return h, true
}

// sealedAt is c of secret name as vaultd seals it, with its derived form.
func sealedAt(name string, c slotVersion) Credential {
	form := func(p string) SealedSecret {
		sum := sha256.Sum256([]byte(p))
		return SealedSecret{Version: c.version, SHA256: hex.EncodeToString(sum[:]), Path: p}
	}
	derived := form(DerivedPath(name, c.version))
	return Credential{SealedSecret: form(SealedPath(name, c.version)), Slot: c.slot, Derived: &derived}
}

// rotationValues makes the value of each version a rotation uses.
func rotationValues() map[uint64]string {
	return map[uint64]string{1: secretValue(), 2: secretValue(), 3: secretValue()}
}

// secretValues lists values' values, for [noSecretIn].
func secretValues(values map[uint64]string) []string {
	return slices.Collect(maps.Values(values))
}

// readVersion returns the version of the secret file id of d holds, and
// fails unless it is secret.
func readVersion(t *testing.T, d *declaration.Declaration, id, secret string) uint64 {
	t.Helper()
	f := resource(t, d, id).File
	if f == nil || f.Secret == nil || f.Secret.Name != secret {
		t.Fatalf("%s on %s is not a file holding %s: %+v", id, d.Node, secret, f)
	}
	return f.Secret.Version
}

// checkConsumerFile checks the consumer's file d's provider holds for
// consumer (its login and requirement, "gitea__n2.db") lists, under its
// login, the credentials and retired login of phase.
func checkConsumerFile(t *testing.T, d *declaration.Declaration, module, consumer, login string, ph rotationPhase) {
	t.Helper()
	content := resource(t, d, module+"/mesh.consumer."+consumer+".json").File.Content
	var info struct {
		Login       string `json:"login"`
		Credentials []struct {
			Login string `json:"login"`
		} `json:"credentials"`
		Retire []struct {
			Login string `json:"login"`
		} `json:"retire"`
	}
	if err := json.Unmarshal([]byte(content), &info); err != nil {
		t.Fatalf("%s: %v\n%s", ph.name, err, content)
	}
	want := []string{SlotLogin(login, ph.current.slot)}
	if ph.next != nil {
		want = append(want, SlotLogin(login, ph.next.slot))
	}
	var got, retired []string
	for _, c := range info.Credentials {
		got = append(got, c.Login)
	}
	for _, r := range info.Retire {
		retired = append(retired, r.Login)
	}
	var wantRetired []string
	if ph.retire != "" {
		wantRetired = []string{SlotLogin(login, ph.retire)}
	}
	if info.Login != login || !slices.Equal(got, want) || !slices.Equal(retired, wantRetired) {
		t.Fatalf("%s: the provider is told login %s, credentials %v, retire %v; want %s, %v, %v\n%s",
			ph.name, info.Login, got, retired, login, want, wantRetired, content)
	}
}
