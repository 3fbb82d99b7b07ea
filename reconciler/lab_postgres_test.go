package reconciler

import (
	"crypto/rand"
	"fmt"
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

// labPostgres renders the example mesh and returns n1's declaration and its
// postgres provisioner (the run-once step logins), checking that the step
// comes after the server and is handed the consumers' files.
func labPostgres(t *testing.T) (*declaration.Declaration, *declaration.Container) {
	t.Helper()
	repo, err := schema.LoadDir("../examples/lab")
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
	d := decls["n1"]
	at := func(id string) int {
		i := slices.IndexFunc(d.Resources, func(r declaration.Resource) bool { return r.ID == id })
		if i < 0 {
			t.Fatalf("n1 declares no %s", id)
		}
		return i
	}
	server, logins := at("postgres/server"), at("postgres/logins")
	step := d.Resources[logins].Container
	if step == nil || !step.RunOnce || logins < server {
		t.Fatalf("postgres/logins (at %d) is not a run-once step after postgres/server (at %d)", logins, server)
	}
	for _, id := range []string{"postgres/mesh.consumer.gitea__n2.db.json", "postgres/mesh.consumer.gitea__n2.db.password"} {
		if at(id) > logins || !slices.Contains(step.RestartOn, id) {
			t.Errorf("postgres/logins does not come after %s and name it under restartOn %v", id, step.RestartOn)
		}
	}
	if !slices.ContainsFunc(step.Mounts, func(m declaration.Mount) bool {
		return m.Target == ConsumersMount && m.ReadOnly && strings.HasSuffix(m.Source, "/postgres/.mesh/consumers")
	}) {
		t.Errorf("postgres/logins does not mount the consumers' files read-only at %s: %+v", ConsumersMount, step.Mounts)
	}
	return d, step
}

// TestLabPostgresLoginsRendered: the lab's postgres on n1 serves gitea@n2,
// so its provisioner runs after the server with gitea's files mounted.
func TestLabPostgresLoginsRendered(t *testing.T) { labPostgres(t) }

// TestLabPostgresCreatesTheLogins runs the lab's postgres provisioner, as
// rendered for n1, against a real PostgreSQL server: the consumer's login
// and database are created and its password works; running it again
// changes nothing; a new password replaces the old one. The mesh's paths
// (/run/meshgen/consumers, the superuser's password file) are bind-mounted
// in a mount namespace of the step's own, as podman would mount them.
func TestLabPostgresCreatesTheLogins(t *testing.T) {
	for _, tool := range []string{"initdb", "postgres", "psql", "pg_isready", "unshare", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian: postgresql, util-linux): %v", tool, err)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting the step's paths needs root")
	}
	d, step := labPostgres(t)

	// A real server, run as nobody (initdb refuses root), on a free port.
	dir, err := os.MkdirTemp("", "pg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	superuser := secretValue(t)
	suFile := filepath.Join(dir, "superuser-password")
	writeFile(t, suFile, superuser, 0o644) // nobody's initdb reads it
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	for _, p := range []string{dir, sock} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	asNobody := func(args ...string) *exec.Cmd {
		return exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups"}, args...)...)
	}
	if out, err := asNobody("initdb", "-D", data, "-U", "postgres", "--pwfile="+suFile, "--auth=scram-sha-256").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := freePort(t)
	server := asNobody("postgres", "-D", data, "-p", port, "-k", sock, "-c", "listen_addresses=127.0.0.1")
	var serverLog strings.Builder
	server.Stdout, server.Stderr = &serverLog, &serverLog
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		server.Process.Signal(os.Interrupt)
		server.Wait()
	})

	// The consumers' files, as hostd writes them: the JSON as rendered, the
	// password as the vault would deliver it.
	consumers := filepath.Join(dir, "consumers")
	var consumerDir string
	for _, m := range step.Mounts {
		if m.Target == ConsumersMount {
			consumerDir = m.Source
		}
	}
	password := filepath.Join(consumers, "gitea__n2.db.password")
	for _, r := range d.Resources {
		if r.File != nil && path.Dir(r.File.Path) == consumerDir && r.File.Secret == nil {
			writeFile(t, filepath.Join(consumers, path.Base(r.File.Path)), r.File.Content, 0o600)
		}
	}
	run := func() string {
		t.Helper()
		// The step's own mounts: the superuser's password is the one the
		// rendered step mounts.
		var binds []string
		for _, m := range step.Mounts {
			if m.Target == ConsumersMount {
				binds = append(binds, fmt.Sprintf("mkdir -p %[2]s; mount --bind -o ro %[1]s %[2]s", consumers, m.Target))
				continue
			}
			if path.Base(m.Source) != "superuser-password" {
				t.Fatalf("postgres/logins mounts %s, which the test does not provide", m.Source)
			}
			binds = append(binds, fmt.Sprintf("mkdir -p %[3]s; touch %[2]s; mount --bind -o ro %[1]s %[2]s", suFile, m.Target, path.Dir(m.Target)))
		}
		script := "set -e; mount -t tmpfs tmpfs /run; " + strings.Join(binds, "; ") + `; exec "$@"`
		cmd := exec.Command("unshare", append([]string{"-m", "sh", "-c", script, "sh"}, step.Command...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		for k, v := range step.Env {
			switch k {
			case "PGHOST":
				v = "127.0.0.1" // the node's address, here
			case "PGPORT":
				v = port
			}
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("postgres/logins: %v\n%s\nserver:\n%s", err, out, serverLog.String())
		}
		return string(out)
	}
	// connect logs in as gitea with pw and reports whether it could.
	connect := func(pw string) bool {
		cmd := exec.Command("psql", "-X", "-q", "-At", "-h", "127.0.0.1", "-p", port, "-U", "gitea__n2", "-d", "gitea__n2",
			"-c", "CREATE TABLE IF NOT EXISTS t (x int); SELECT current_user || ' ' || current_database()")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PGPASSWORD=" + pw, "PGCONNECT_TIMEOUT=10", "PGOPTIONS=-c client_min_messages=warning"}
		out, err := cmd.CombinedOutput()
		if err == nil && strings.TrimSpace(string(out)) != "gitea__n2 gitea__n2" {
			t.Fatalf("logged in as %q", out)
		}
		return err == nil
	}
	var outputs []string
	first := secretValue(t)
	writeFile(t, password, first, 0o600)
	outputs = append(outputs, run())
	if !connect(first) {
		t.Fatal("gitea cannot log in to its database with its password after the step ran")
	}
	outputs = append(outputs, run()) // again: nothing to create, nothing fails
	if !connect(first) {
		t.Fatal("gitea cannot log in after the step ran again")
	}
	second := secretValue(t)
	writeFile(t, password, second, 0o600)
	outputs = append(outputs, run())
	if !connect(second) || connect(first) {
		t.Fatal("after a new password the new one does not log in, or the old one still does")
	}
	for _, out := range append(outputs, serverLog.String()) {
		for _, secret := range []string{superuser, first, second} {
			if strings.Contains(out, secret) {
				t.Fatalf("a password's value was printed:\n%s", strings.ReplaceAll(out, secret, "<secret>"))
			}
		}
	}
	if !strings.Contains(outputs[0], "gitea__n2") {
		t.Errorf("the step does not say what it did:\n%s", outputs[0])
	}
}

// secretValue returns 32 random alphanumerics, like the contract's spec.
func secretValue(t *testing.T) string {
	t.Helper()
	return rand.Text()[:26] + "x0Yz9q"
}

func writeFile(t *testing.T, name, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
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
