package reconciler

import (
	"bufio"
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
)

// labWithBusConsumer copies examples/lab and adds a module consuming
// mqtt-broker, assigned to n3 (the lab itself has none): mosquitto@n1 then
// serves sensor@n3 an account.
func labWithBusConsumer(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "lab")
	if err := os.CopyFS(dir, os.DirFS("../examples/lab")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "catalog/modules/sensor/module.yaml"), `description: A sensor publishing on the bus with an account of its own.
requires:
  - name: data
    contract: host-directory
    provider: host
  - name: bus
    contract: mqtt-broker
    provider: module
resources:
  - file: bus-password
    path: ${{ data.path }}/bus-password
    secret: ${{ bus.password }}
    mode: "0400"
  - file: bus-user
    path: ${{ data.path }}/bus-user
    content: ${{ bus.username }}@${{ bus.host }}:${{ bus.port }}
`, 0o644)
	writeFile(t, filepath.Join(dir, "assignments/n3/sensor.yaml"), "", 0o644)
	return dir
}

// TestLabMosquittoAccountsRendered: mosquitto on n1 serving a consumer runs
// its provisioner after the broker with the consumer's files mounted, and
// logs in with the admin's password from the env-file the init step uses.
func TestLabMosquittoAccountsRendered(t *testing.T) {
	d := renderDir(t, labWithBusConsumer(t))["n1"]
	step := checkProvisioner(t, d, "mosquitto/accounts", "mosquitto/broker", "sensor__n3.bus")
	if !slices.ContainsFunc(step.EnvFiles, func(e declaration.EnvFile) bool { return e.File == "mosquitto/admin-env" }) {
		t.Errorf("mosquitto/accounts does not read the admin's password from mosquitto/admin-env: %+v", step.EnvFiles)
	}
}

// broker is a real mosquitto broker with the Dynamic Security plugin,
// seeded as the init step seeds it.
type broker struct {
	dir, port string
	// admin is the admin client's password.
	admin string
	log   *serverLog
	// marks counts the commands [broker.kicks] sent.
	marks int
}

func startMosquitto(t *testing.T) *broker {
	t.Helper()
	plugin := "/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so"
	if _, err := os.Stat(plugin); err != nil {
		t.Skipf("the Dynamic Security plugin is not installed: %v", err)
	}
	b := &broker{dir: nobodysDir(t), admin: secretValue()}
	dynsec := filepath.Join(b.dir, "dynamic-security.json")
	if out, err := asNobody("mosquitto_ctrl", "dynsec", "init", dynsec, "admin", b.admin).CombinedOutput(); err != nil {
		t.Fatalf("seed the admin: %v\n%s", err, out)
	}
	b.port = freePort(t)
	conf := filepath.Join(b.dir, "mosquitto.conf")
	writeFile(t, conf, "per_listener_settings false\nlistener "+b.port+" 127.0.0.1\nplugin "+plugin+"\nplugin_opt_config_file "+dynsec+"\n", 0o644)
	b.log = startServer(t, asNobody("mosquitto", "-c", conf))
	return b
}

// accountsStep returns how to run the rendered mosquitto/accounts step
// against b, with the consumers' files in consumers.
func (b *broker) accountsStep(step *declaration.Container, consumers string) stepRun {
	return stepRun{
		step:  step,
		binds: map[string]string{ConsumersMount: consumers},
		env:   map[string]string{"BROKER_HOST": "127.0.0.1", "BROKER_PORT": b.port, "MOSQUITTO_ADMIN_PASSWORD": b.admin},
	}
}

// client runs mosquitto_pub or mosquitto_sub as user with password.
func (b *broker) client(tool, user, password string, args ...string) (string, error) {
	args = append([]string{"-h", "127.0.0.1", "-p", b.port, "-u", user, "-P", password}, args...)
	out, err := exec.Command(tool, args...).CombinedOutput()
	return string(out), err
}

// dynsec runs a Dynamic Security command as the admin, whose password is
// in an options file, and returns its output.
func (b *broker) dynsec(t *testing.T, args ...string) string {
	t.Helper()
	cfg := filepath.Join(b.dir, "ctl")
	writeFile(t, filepath.Join(cfg, "mosquitto_ctrl"), "-h 127.0.0.1\n-p "+b.port+"\n-u admin\n-P "+b.admin+"\n", 0o600)
	cmd := exec.Command("mosquitto_ctrl", append([]string{"dynsec"}, args...)...)
	cmd.Env = []string{"XDG_CONFIG_HOME=" + cfg}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dynsec %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestLabMosquittoCreatesTheAccounts runs the lab's mosquitto provisioner,
// as rendered for n1 serving sensor@n3, against a real broker with the
// Dynamic Security plugin, seeded as the init step seeds it: the consumer
// gets an account that logs in and publishes and subscribes under its
// login; running it again changes nothing; a new password replaces the old
// (a secret applied in place).
func TestLabMosquittoCreatesTheAccounts(t *testing.T) {
	needTools(t, "mosquitto", "mosquitto_ctrl", "mosquitto_pub", "mosquitto_sub")
	d := renderDir(t, labWithBusConsumer(t))["n1"]
	step := checkProvisioner(t, d, "mosquitto/accounts", "mosquitto/broker", "sensor__n3.bus")
	b := startMosquitto(t)

	consumers := filepath.Join(b.dir, "consumers")
	writeConsumers(t, d, step, consumers, nil)
	password := filepath.Join(consumers, "sensor__n3.bus.password")
	var outputs []string
	apply := func() {
		t.Helper()
		out, err := runStep(t, b.accountsStep(step, consumers))
		outputs = append(outputs, out)
		if err != nil {
			t.Fatalf("mosquitto/accounts: %v\n%s\nbroker:\n%s", err, out, b.log)
		}
	}
	// roundTrip publishes a retained message under the consumer's login and
	// reads it back, as the consumer; it reports whether it could.
	roundTrip := func(pw, msg string) bool {
		t.Helper()
		if _, err := b.client("mosquitto_pub", "sensor__n3", pw, "-t", "sensor__n3/t", "-m", msg, "-r", "-q", "1"); err != nil {
			return false
		}
		out, _ := b.client("mosquitto_sub", "sensor__n3", pw, "-t", "sensor__n3/#", "-C", "1", "-W", "5")
		return strings.TrimSpace(out) == msg
	}
	first := secretValue()
	writeFile(t, password, first, 0o600)
	apply()
	if !roundTrip(first, "one") {
		t.Fatal("the sensor cannot publish and read back under its login after the step ran")
	}
	apply() // again: everything exists, nothing fails
	if !roundTrip(first, "two") {
		t.Fatal("the sensor cannot publish and read back after the step ran again")
	}
	second := secretValue()
	writeFile(t, password, second, 0o600)
	apply()
	if !roundTrip(second, "three") {
		t.Fatal("the sensor cannot use its new password")
	}
	if _, err := b.client("mosquitto_pub", "sensor__n3", first, "-t", "sensor__n3/t", "-m", "x"); err == nil {
		t.Fatal("the old password still logs in")
	}
	// The account is scoped: it reads nothing outside its login.
	if out, _ := b.client("mosquitto_sub", "sensor__n3", second, "-t", "other/#", "-C", "1", "-W", "2"); !strings.Contains(out, "denied") {
		t.Errorf("the sensor may subscribe outside its login: %q", out)
	}
	if !strings.Contains(outputs[0], "sensor__n3") {
		t.Errorf("the step does not say what it did:\n%s", outputs[0])
	}
	noSecretIn(t, append(outputs, b.log.String()), b.admin, first, second)
}

// TestLabMosquittoRotatesOverTwoAccounts: a broker account rotates over its
// two credentials, never without one that works, and the consumer's topics
// and what was retained under them stay (design 27, "Rotation"). The lab,
// with sensor@n3 on the bus, is rendered for n1 (mosquitto) and n3 at each
// phase of the rotation, and the provisioner's step, as rendered, runs
// against a real broker. After each run, the sensor's username as rendered
// for it, with the password it reads in that phase, publishes under its
// login and reads back what it published in every phase before; the new
// credential works before the sensor is given it; a retired client cannot
// connect, is disconnected, and is disabled, not deleted. A rotation back
// to the first slot, and one abandoned before the sensor moved, keep all
// of that true.
func TestLabMosquittoRotatesOverTwoAccounts(t *testing.T) {
	needTools(t, "mosquitto", "mosquitto_ctrl", "mosquitto_pub", "mosquitto_sub")
	lab := labWithBusConsumer(t)
	const secret, login = "mqtt-broker.sensor@n3.bus", "sensor__n3"
	for _, tt := range []struct {
		name   string
		phases []rotationPhase
	}{
		{"there and back", fullRotation},
		{"abandoned", abandonedRotation},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := resolveDir(t, lab)
			b := startMosquitto(t)
			values := rotationValues()
			consumers := filepath.Join(b.dir, "consumers")
			var outputs []string
			client := func(tool, user, pw string, args ...string) (string, error) {
				out, err := b.client(tool, user, pw, args...)
				outputs = append(outputs, out)
				return out, err
			}
			// readsAll reports what user reads under the sensor's topics:
			// the messages retained there, one for each phase so far.
			readsAll := func(user, pw string, n int) (string, bool) {
				t.Helper()
				out, err := client("mosquitto_sub", user, pw, "-t", login+"/#", "-v", "-C", fmt.Sprint(n), "-W", "10")
				lines := strings.Split(strings.TrimSpace(out), "\n")
				slices.Sort(lines)
				return strings.Join(lines, ","), err == nil
			}
			madeB := false // whether slot b's client was made
			kicks := 0     // clients the broker disconnected so far
			for i, ph := range tt.phases {
				decls := renderWith(t, res, rotationVault{secret: secret, phase: ph})
				n1, n3 := decls["n1"], decls["n3"]
				step := checkProvisioner(t, n1, "mosquitto/accounts", "mosquitto/broker", login+".bus")
				checkConsumerFile(t, n1, "mosquitto", login+".bus", login, ph)

				// A subscriber connected with the client being retired.
				var retired, inUse *subscriber
				if ph.retire != "" {
					prev := tt.phases[i-1].works
					old := prev[slices.IndexFunc(prev, func(c slotVersion) bool { return c.slot == ph.retire })]
					retired = subscribe(t, b, SlotLogin(login, old.slot), values[old.version], login+"/#")
				}
				// And the sensor, connected with what it held so far: the
				// step never disconnects it.
				if i > 0 {
					held := tt.phases[i-1].reads
					inUse = subscribe(t, b, SlotLogin(login, held.slot), values[held.version], login+"/#")
				}

				writeConsumers(t, n1, step, consumers, values)
				for run := range 2 { // a second run finds everything in place
					out, err := runStep(t, b.accountsStep(step, consumers))
					outputs = append(outputs, out)
					if err != nil {
						t.Fatalf("%s: mosquitto/accounts: %v\n%s\nbroker:\n%s", ph.name, err, out, b.log)
					}
					t.Logf("%s, run %d:\n%s", ph.name, run+1, out)
				}

				// The sensor, as rendered for this phase.
				user, _, _ := strings.Cut(resource(t, n3, "sensor/bus-user").File.Content, "@")
				version := readVersion(t, n3, "sensor/bus-password", secret)
				if user != SlotLogin(login, ph.reads.slot) || version != ph.reads.version {
					t.Fatalf("%s: the sensor presents %s with version %d; want %s version %d",
						ph.name, user, version, SlotLogin(login, ph.reads.slot), ph.reads.version)
				}
				topic := fmt.Sprintf("%s/p%d", login, i)
				if out, err := client("mosquitto_pub", user, values[version], "-t", topic, "-m", ph.name, "-r", "-q", "1"); err != nil {
					t.Fatalf("%s: the sensor cannot publish as %s: %v\n%s", ph.name, user, err, out)
				}
				var want []string
				for j, p := range tt.phases[:i+1] {
					want = append(want, fmt.Sprintf("%s/p%d %s", login, j, p.name))
				}
				slices.Sort(want)
				if got, ok := readsAll(user, values[version], i+1); !ok || got != strings.Join(want, ",") {
					t.Fatalf("%s: the sensor as %s reads %q, want %q", ph.name, user, got, strings.Join(want, ","))
				}
				for _, c := range ph.works {
					if got, ok := readsAll(SlotLogin(login, c.slot), values[c.version], i+1); !ok || got != strings.Join(want, ",") {
						t.Fatalf("%s: %s cannot connect as %s and read the sensor's topics: %q", ph.name, c, SlotLogin(login, c.slot), got)
					}
				}
				for _, c := range ph.refused {
					if out, err := client("mosquitto_pub", SlotLogin(login, c.slot), values[c.version], "-t", topic, "-m", "x"); err == nil {
						t.Fatalf("%s: %s still connects as %s: %s", ph.name, c, SlotLogin(login, c.slot), out)
					}
				}

				// Nothing was deleted: every client made is there with the
				// sensor's role; a retired one is disabled.
				madeB = madeB || ph.current.slot == "b" || ph.next != nil && ph.next.slot == "b"
				clients := []string{login}
				if madeB {
					clients = append(clients, SlotLogin(login, "b"))
				}
				for _, c := range clients {
					info := b.dynsec(t, "getClient", c)
					live := c == SlotLogin(login, ph.current.slot) || ph.next != nil && c == SlotLogin(login, ph.next.slot)
					if !strings.Contains(info, "Username: "+c) || !strings.Contains(info, " "+login+" (priority") ||
						strings.Contains(info, "Disabled: true") == live {
						t.Fatalf("%s: client %s (in use: %v):\n%s", ph.name, c, live, info)
					}
				}
				if got := b.dynsec(t, "listClients"); strings.Count(got, login) != len(clients) {
					t.Fatalf("%s: clients %q, want admin and %v", ph.name, got, clients)
				}

				if retired != nil {
					// The retired client was disconnected, and could not
					// connect again.
					code, out, err := retired.wait()
					outputs = append(outputs, out)
					if err == nil || code == subTimedOut {
						t.Fatalf("%s: a subscriber connected as the retired %s was not disconnected (exit %d)\n%s", ph.name, SlotLogin(login, ph.retire), code, out)
					}
				}
				// Only the retired client was disconnected, by the broker's
				// own count.
				wantKicks := 0
				if retired != nil {
					wantKicks = 1
				}
				if got := b.kicks(t); got-kicks != wantKicks {
					t.Fatalf("%s: the broker disconnected %d clients, want %d:\n%s", ph.name, got-kicks, wantKicks, b.log)
				} else {
					kicks = got
				}
				if inUse != nil {
					outputs = append(outputs, inUse.stop())
				}
				if ph.retire != "" && !strings.Contains(strings.Join(outputs, ""), "account "+SlotLogin(login, ph.retire)+" retired") {
					t.Fatalf("%s: the step does not say it retired %s", ph.name, SlotLogin(login, ph.retire))
				}
			}
			noSecretIn(t, append(outputs, b.log.String()), append(secretValues(values), b.admin)...)
		})
	}
}

// subTimedOut is mosquitto_sub's exit status when -W ran out.
const subTimedOut = 27

// subscriber is a mosquitto_sub connected.
type subscriber struct {
	cmd  *exec.Cmd
	done chan struct{}
	out  strings.Builder
}

// subscribe connects a mosquitto_sub as user to topic, and returns it once
// it received a retained message there, so its subscription is in place.
// It ends when disconnected and refused, or after two minutes (status
// subTimedOut) if it is never disconnected.
func subscribe(t *testing.T, b *broker, user, password, topic string) *subscriber {
	t.Helper()
	s := &subscriber{cmd: exec.Command("mosquitto_sub", "-h", "127.0.0.1", "-p", b.port, "-u", user, "-P", password, "-t", topic, "-W", "120"), done: make(chan struct{})}
	s.cmd.Stderr = &s.out
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop() })
	r := bufio.NewReader(stdout)
	_, err = r.ReadString('\n')
	go func() { io.Copy(io.Discard, r); close(s.done) }()
	if err != nil {
		_, out, _ := s.wait()
		t.Fatalf("a subscriber as %s received nothing: %v\n%s", user, err, out)
	}
	return s
}

// wait waits for s to end, and returns its status and what it said.
func (s *subscriber) wait() (int, string, error) {
	<-s.done // every read ends before Wait closes the pipe
	err := s.cmd.Wait()
	return s.cmd.ProcessState.ExitCode(), s.out.String(), err
}

// stop ends s and returns what it said.
func (s *subscriber) stop() string {
	if s.cmd.ProcessState == nil {
		s.cmd.Process.Kill()
		s.wait()
	}
	return s.out.String()
}

// kicks returns how many clients the broker disconnected so far, by its
// log. The log is read up to the broker's answer to a command the test
// sends now (the n-th such: kicks is the only one asking for the admin), so
// everything the broker did before is there.
func (b *broker) kicks(t *testing.T) int {
	t.Helper()
	b.dynsec(t, "getClient", "admin")
	b.marks++
	for range 600 {
		if log := b.log.String(); strings.Count(log, "| getClient | username=admin") >= b.marks {
			return strings.Count(log, "disconnected by administrative action")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the broker's log does not show the command the test sent:\n%s", b.log)
	return 0
}
