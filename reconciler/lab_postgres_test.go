package reconciler

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLabPostgresLoginsRendered: the lab's postgres on n1 serves gitea@n2,
// so its provisioner runs after the server with gitea's files mounted.
func TestLabPostgresLoginsRendered(t *testing.T) {
	d := renderDir(t, "../examples/lab")["n1"]
	checkProvisioner(t, d, "postgres/logins", "postgres/server", "gitea__n2.db")
}

// TestLabPostgresCreatesTheLogins runs the lab's postgres provisioner, as
// rendered for n1, against a real PostgreSQL server: the consumer's login
// and database are created and its password works; running it again
// changes nothing; a new password replaces the old one.
func TestLabPostgresCreatesTheLogins(t *testing.T) {
	needTools(t, "initdb", "postgres", "psql", "pg_isready")
	d := renderDir(t, "../examples/lab")["n1"]
	step := checkProvisioner(t, d, "postgres/logins", "postgres/server", "gitea__n2.db")

	dir := nobodysDir(t)
	superuser := secretValue()
	suFile := filepath.Join(dir, "superuser-password")
	writeFile(t, suFile, superuser, 0o644) // nobody's initdb reads it
	data := filepath.Join(dir, "data")
	if out, err := asNobody("initdb", "-D", data, "-U", "postgres", "--pwfile="+suFile, "--auth=scram-sha-256").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := freePort(t)
	serverLog := startServer(t, asNobody("postgres", "-D", data, "-p", port, "-k", dir, "-c", "listen_addresses=127.0.0.1"))

	consumers := filepath.Join(dir, "consumers")
	writeConsumers(t, d, step, consumers)
	password := filepath.Join(consumers, "gitea__n2.db.password")
	run := stepRun{
		step:  step,
		binds: map[string]string{ConsumersMount: consumers, "/run/secrets/superuser-password": suFile},
		env:   map[string]string{"PGHOST": "127.0.0.1", "PGPORT": port},
	}
	var outputs []string
	apply := func() {
		t.Helper()
		out, err := runStep(t, run)
		outputs = append(outputs, out)
		if err != nil {
			t.Fatalf("postgres/logins: %v\n%s\nserver:\n%s", err, out, serverLog)
		}
	}
	// connect logs in as gitea with pw, in its own database, and creates a
	// table there; it reports whether it could.
	connect := func(pw string) bool {
		t.Helper()
		cmd := exec.Command("psql", "-X", "-q", "-At", "-h", "127.0.0.1", "-p", port, "-U", "gitea__n2", "-d", "gitea__n2",
			"-c", "CREATE TABLE IF NOT EXISTS t (x int); SELECT current_user || ' ' || current_database()")
		cmd.Env = []string{"PGPASSWORD=" + pw, "PGCONNECT_TIMEOUT=10", "PGOPTIONS=-c client_min_messages=warning"}
		out, err := cmd.CombinedOutput()
		if err == nil && strings.TrimSpace(string(out)) != "gitea__n2 gitea__n2" {
			t.Fatalf("logged in as %q", out)
		}
		return err == nil
	}
	first := secretValue()
	writeFile(t, password, first, 0o600)
	apply()
	if !connect(first) {
		t.Fatal("gitea cannot log in to its database with its password after the step ran")
	}
	apply() // again: nothing to create, nothing fails
	if !connect(first) {
		t.Fatal("gitea cannot log in after the step ran again")
	}
	second := secretValue()
	writeFile(t, password, second, 0o600)
	apply()
	if !connect(second) || connect(first) {
		t.Fatal("after a new password the new one does not log in, or the old one still does")
	}
	if !strings.Contains(outputs[0], "gitea__n2") {
		t.Errorf("the step does not say what it did:\n%s", outputs[0])
	}
	noSecretIn(t, append(outputs, serverLog.String()), superuser, first, second)
}
