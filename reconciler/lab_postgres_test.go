package reconciler

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshgen/meshgen/hostd/declaration"
)

// TestLabPostgresLoginsRendered: the lab's postgres on n1 serves gitea@n2,
// so its provisioner runs after the server with gitea's files mounted.
func TestLabPostgresLoginsRendered(t *testing.T) {
	d := renderDir(t, "../examples/lab")["n1"]
	checkProvisioner(t, d, "postgres/logins", "postgres/server", "gitea__n2.db")
}

// pgServer is a real PostgreSQL server, initialised as the image
// initialises it: superuser postgres with a password, every login by
// password.
type pgServer struct {
	dir, port string
	// superuser is the superuser's password, in suFile.
	superuser, suFile string
	log               *serverLog
}

func startPostgres(t *testing.T) *pgServer {
	t.Helper()
	s := &pgServer{dir: nobodysDir(t), superuser: secretValue()}
	s.suFile = filepath.Join(s.dir, "superuser-password")
	writeFile(t, s.suFile, s.superuser, 0o644) // nobody's initdb reads it
	data := filepath.Join(s.dir, "data")
	if out, err := asNobody("initdb", "-D", data, "-U", "postgres", "--pwfile="+s.suFile, "--auth=scram-sha-256").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	s.port = freePort(t)
	s.log = startServer(t, asNobody("postgres", "-D", data, "-p", s.port, "-k", s.dir, "-c", "listen_addresses=127.0.0.1"))
	return s
}

// psql returns a psql running sql as user with password in database db;
// its password is in its environment, never on its command line.
func (s *pgServer) psql(user, password, db, sql string) *exec.Cmd {
	cmd := exec.Command("psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", s.port, "-U", user, "-d", db, "-c", sql)
	cmd.Env = []string{"PGPASSWORD=" + password, "PGCONNECT_TIMEOUT=10", "PGOPTIONS=-c client_min_messages=warning"}
	return cmd
}

// query runs sql as the superuser in database db and returns its output.
func (s *pgServer) query(t *testing.T, db, sql string) string {
	t.Helper()
	out, err := s.psql("postgres", s.superuser, db, sql).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", sql, err, out)
	}
	return strings.TrimSpace(string(out))
}

// loginsStep returns how to run the rendered postgres/logins step
// against s, with the consumers' files in consumers.
func (s *pgServer) loginsStep(step *declaration.Container, consumers string) stepRun {
	return stepRun{
		step:  step,
		binds: map[string]string{ConsumersMount: consumers, "/run/secrets/superuser-password": s.suFile},
		env:   map[string]string{"PGHOST": "127.0.0.1", "PGPORT": s.port},
	}
}

// TestLabPostgresCreatesTheLogins runs the lab's postgres provisioner, as
// rendered for n1, against a real PostgreSQL server: the consumer's login
// and database are created and its password works; running it again
// changes nothing; a new password replaces the old one (a secret applied
// in place).
func TestLabPostgresCreatesTheLogins(t *testing.T) {
	needTools(t, "initdb", "postgres", "psql", "pg_isready")
	d := renderDir(t, "../examples/lab")["n1"]
	step := checkProvisioner(t, d, "postgres/logins", "postgres/server", "gitea__n2.db")
	pg := startPostgres(t)

	consumers := filepath.Join(pg.dir, "consumers")
	writeConsumers(t, d, step, consumers, nil)
	password := filepath.Join(consumers, "gitea__n2.db.password")
	var outputs []string
	apply := func() {
		t.Helper()
		out, err := runStep(t, pg.loginsStep(step, consumers))
		outputs = append(outputs, out)
		if err != nil {
			t.Fatalf("postgres/logins: %v\n%s\nserver:\n%s", err, out, pg.log)
		}
	}
	// connect logs in as gitea with pw, in its own database, and creates a
	// table there; it reports whether it could.
	connect := func(pw string) bool {
		t.Helper()
		out, err := pg.psql("gitea__n2", pw, "gitea__n2", "CREATE TABLE IF NOT EXISTS t (x int); SELECT current_user || ' ' || current_database()").CombinedOutput()
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
	noSecretIn(t, append(outputs, pg.log.String()), pg.superuser, first, second)
}

// TestLabPostgresRotatesOverTwoLogins: a database credential rotates over
// its two credentials, the consumer recreated by derivation, never without
// a working login, and its data intact (design 27, "Rotation"). The lab is
// rendered for n1 (postgres) and n2 (gitea) at each phase of the rotation,
// and the provisioner's step, as rendered, runs against a real server.
// After each run, gitea's login as rendered in its environment, with the
// password it reads in that phase, logs in and reads every table it made
// before, all owned by its one role; the new credential logs in before
// gitea is given it; a retired login cannot log in, its open session is
// ended, and its role stays. A rotation back to the first slot, and a
// rotation abandoned before gitea moved, keep all of that true.
func TestLabPostgresRotatesOverTwoLogins(t *testing.T) {
	needTools(t, "initdb", "postgres", "psql", "pg_isready")
	const secret, login = "postgres-database.gitea@n2.db", "gitea__n2"
	for _, tt := range []struct {
		name   string
		phases []rotationPhase
	}{
		{"there and back", fullRotation},
		{"abandoned", abandonedRotation},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := resolveDir(t, "../examples/lab")
			pg := startPostgres(t)
			values := rotationValues()
			consumers := filepath.Join(pg.dir, "consumers")
			var outputs []string
			// works reports whether user logs in with pw and reads every
			// table gitea made; made is how many.
			made := 0
			works := func(user, pw string) (string, bool) {
				t.Helper()
				q := "SELECT current_user"
				for i := range made {
					q += fmt.Sprintf(" || (SELECT ' ' || string_agg(x, ',') FROM p%d)", i)
				}
				out, err := pg.psql(user, pw, login, q).CombinedOutput()
				outputs = append(outputs, string(out))
				return strings.TrimSpace(string(out)), err == nil
			}
			madeB := false // whether slot b's login was made
			for i, ph := range tt.phases {
				decls := renderWith(t, res, rotationVault{secret: secret, phase: ph})
				n1, n2 := decls["n1"], decls["n2"]
				step := checkProvisioner(t, n1, "postgres/logins", "postgres/server", login+".db")
				checkConsumerFile(t, n1, "postgres", login+".db", login, ph)

				// A session opened with the login being retired.
				var session *pgSession
				if ph.retire != "" {
					prev := tt.phases[i-1].works
					old := prev[slices.IndexFunc(prev, func(c slotVersion) bool { return c.slot == ph.retire })]
					session = openSession(t, pg, SlotLogin(login, old.slot), values[old.version])
				}

				writeConsumers(t, n1, step, consumers, values)
				for run := range 2 { // a second run finds everything in place
					out, err := runStep(t, pg.loginsStep(step, consumers))
					outputs = append(outputs, out)
					if err != nil {
						t.Fatalf("%s: postgres/logins: %v\n%s\nserver:\n%s", ph.name, err, out, pg.log)
					}
					t.Logf("%s, run %d:\n%s", ph.name, run+1, out)
				}

				// gitea, as rendered for this phase.
				server := resource(t, n2, "gitea/server").Container
				user, db := server.Env["GITEA__database__USER"], server.Env["GITEA__database__NAME"]
				version := readVersion(t, n2, "gitea/db-password", secret)
				if user != SlotLogin(login, ph.reads.slot) || version != ph.reads.version || db != login {
					t.Fatalf("%s: gitea presents %s with version %d against database %s; want %s version %d against %s",
						ph.name, user, version, db, SlotLogin(login, ph.reads.slot), ph.reads.version, login)
				}
				// It is recreated when the password it reads changes: a
				// restart the renderer derives, no definition declares.
				if !slices.Contains(server.RestartOn, "gitea/db-password") {
					t.Fatalf("%s: gitea/server is not recreated by gitea/db-password: restartOn %v", ph.name, server.RestartOn)
				}
				out, err := pg.psql(user, values[version], db, fmt.Sprintf(
					"CREATE TABLE p%d (x text); INSERT INTO p%[1]d VALUES ('%s')", i, ph.name)).CombinedOutput()
				outputs = append(outputs, string(out))
				if err != nil {
					t.Fatalf("%s: gitea cannot log in as %s and make a table: %v\n%s", ph.name, user, err, out)
				}
				made++
				want := login
				for _, p := range tt.phases[:made] {
					want += " " + p.name
				}
				if got, ok := works(user, values[version]); !ok || got != want {
					t.Fatalf("%s: gitea as %s reads %q, want %q", ph.name, user, got, want)
				}
				for _, c := range ph.works {
					if got, ok := works(SlotLogin(login, c.slot), values[c.version]); !ok || got != want {
						t.Fatalf("%s: %s cannot log in as %s and read gitea's data: %q", ph.name, c, SlotLogin(login, c.slot), got)
					}
				}
				for _, c := range ph.refused {
					if _, ok := works(SlotLogin(login, c.slot), values[c.version]); ok {
						t.Fatalf("%s: %s still logs in as %s", ph.name, c, SlotLogin(login, c.slot))
					}
				}

				// Nothing was dropped: every login made is there, one role
				// owns the database and every table in it.
				madeB = madeB || ph.current.slot == "b" || ph.next != nil && ph.next.slot == "b"
				roles := login
				if madeB {
					roles += "," + SlotLogin(login, "b")
				}
				if got := pg.query(t, "postgres", "SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles WHERE rolname LIKE 'gitea%'"); got != roles {
					t.Fatalf("%s: roles %s, want %s", ph.name, got, roles)
				}
				owners := pg.query(t, "postgres", "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = '"+login+"'")
				tables := strings.Fields(pg.query(t, login, "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'"))
				if owners != login || len(tables) != 1 || tables[0] != login {
					t.Fatalf("%s: the database belongs to %s and its tables to %v; want %s alone", ph.name, owners, tables, login)
				}

				if session != nil {
					// The retired login's session was ended with it.
					out, err := session.close("SELECT 'still here';")
					outputs = append(outputs, out)
					if err == nil || strings.Contains(out, "still here") {
						t.Fatalf("%s: a session of the retired login %s outlived it: %v\n%s", ph.name, SlotLogin(login, ph.retire), err, out)
					}
				}
				if ph.retire != "" && !strings.Contains(strings.Join(outputs, ""), "login "+SlotLogin(login, ph.retire)+" retired") {
					t.Fatalf("%s: the step does not say it retired %s", ph.name, SlotLogin(login, ph.retire))
				}
			}
			noSecretIn(t, append(outputs, pg.log.String()), append(secretValues(values), pg.superuser)...)
		})
	}
}

// pgSession is a psql session kept open.
type pgSession struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    io.Reader
	stderr strings.Builder
}

// openSession logs in to gitea's database as user with password, and
// returns the session once it answered.
func openSession(t *testing.T, pg *pgServer, user, password string) *pgSession {
	t.Helper()
	s := &pgSession{cmd: exec.Command("psql", "-X", "-q", "-At", "-h", "127.0.0.1", "-p", pg.port, "-U", user, "-d", "gitea__n2")}
	s.cmd.Env = []string{"PGPASSWORD=" + password, "PGCONNECT_TIMEOUT=10"}
	s.cmd.Stderr = &s.stderr
	var err error
	if s.in, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.cmd.Process.Kill(); s.cmd.Wait() })
	s.out = bufio.NewReader(stdout)
	fmt.Fprintln(s.in, "SELECT 'ready';")
	if line, err := s.out.(*bufio.Reader).ReadString('\n'); line != "ready\n" {
		s.cmd.Wait()
		t.Fatalf("a session as %s did not open: %v\n%s%s", user, err, line, s.stderr.String())
	}
	return s
}

// close runs sql in the session, ends its input and returns all it wrote
// and how it ended.
func (s *pgSession) close(sql string) (string, error) {
	fmt.Fprintln(s.in, sql)
	s.in.Close()
	out, _ := io.ReadAll(s.out)
	err := s.cmd.Wait()
	return string(out) + s.stderr.String(), err
}
