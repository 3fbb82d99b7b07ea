package reconciler

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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

// TestLabMosquittoCreatesTheAccounts runs the lab's mosquitto provisioner,
// as rendered for n1 serving sensor@n3, against a real broker with the
// Dynamic Security plugin, seeded as the init step seeds it: the consumer
// gets an account that logs in and publishes and subscribes under its
// login; running it again changes nothing; a new password replaces the old.
func TestLabMosquittoCreatesTheAccounts(t *testing.T) {
	needTools(t, "mosquitto", "mosquitto_ctrl", "mosquitto_pub", "mosquitto_sub")
	plugin := "/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so"
	if _, err := os.Stat(plugin); err != nil {
		t.Skipf("the Dynamic Security plugin is not installed: %v", err)
	}
	d := renderDir(t, labWithBusConsumer(t))["n1"]
	step := checkProvisioner(t, d, "mosquitto/accounts", "mosquitto/broker", "sensor__n3.bus")

	dir := nobodysDir(t)
	admin := secretValue()
	dynsec := filepath.Join(dir, "dynamic-security.json")
	if out, err := asNobody("mosquitto_ctrl", "dynsec", "init", dynsec, "admin", admin).CombinedOutput(); err != nil {
		t.Fatalf("seed the admin: %v\n%s", err, out)
	}
	port := freePort(t)
	conf := filepath.Join(dir, "mosquitto.conf")
	writeFile(t, conf, "per_listener_settings false\nlistener "+port+" 127.0.0.1\nplugin "+plugin+"\nplugin_opt_config_file "+dynsec+"\n", 0o644)
	brokerLog := startServer(t, asNobody("mosquitto", "-c", conf))

	consumers := filepath.Join(dir, "consumers")
	writeConsumers(t, d, step, consumers)
	password := filepath.Join(consumers, "sensor__n3.bus.password")
	run := stepRun{
		step:  step,
		binds: map[string]string{ConsumersMount: consumers},
		env:   map[string]string{"BROKER_HOST": "127.0.0.1", "BROKER_PORT": port, "MOSQUITTO_ADMIN_PASSWORD": admin},
	}
	var outputs []string
	apply := func() {
		t.Helper()
		out, err := runStep(t, run)
		outputs = append(outputs, out)
		if err != nil {
			t.Fatalf("mosquitto/accounts: %v\n%s\nbroker:\n%s", err, out, brokerLog)
		}
	}
	// client runs mosquitto_pub or mosquitto_sub as the sensor.
	client := func(tool, pw string, args ...string) (string, error) {
		args = append([]string{"-h", "127.0.0.1", "-p", port, "-u", "sensor__n3", "-P", pw}, args...)
		out, err := exec.Command(tool, args...).CombinedOutput()
		return string(out), err
	}
	// roundTrip publishes a retained message under the consumer's login and
	// reads it back, as the consumer; it reports whether it could.
	roundTrip := func(pw, msg string) bool {
		t.Helper()
		if _, err := client("mosquitto_pub", pw, "-t", "sensor__n3/t", "-m", msg, "-r", "-q", "1"); err != nil {
			return false
		}
		out, _ := client("mosquitto_sub", pw, "-t", "sensor__n3/#", "-C", "1", "-W", "5")
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
	if _, err := client("mosquitto_pub", first, "-t", "sensor__n3/t", "-m", "x"); err == nil {
		t.Fatal("the old password still logs in")
	}
	// The account is scoped: it reads nothing outside its login.
	if out, _ := client("mosquitto_sub", second, "-t", "other/#", "-C", "1", "-W", "2"); !strings.Contains(out, "denied") {
		t.Errorf("the sensor may subscribe outside its login: %q", out)
	}
	if !strings.Contains(outputs[0], "sensor__n3") {
		t.Errorf("the step does not say what it did:\n%s", outputs[0])
	}
	noSecretIn(t, append(outputs, brokerLog.String()), admin, first, second)
}
