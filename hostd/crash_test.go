package hostd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/meshgen/meshgen/hostd/declaration"
)

// helperEnv, when set in the environment, makes the test binary act as hostd:
// it reads a Config (JSON) from the file named and applies its target once.
const helperEnv = "HOSTD_TEST_HELPER_CONFIG"

// hostdProcess writes f's configuration beside its root and returns a
// function that makes a command running this test binary as hostd on it
// (helperMain): a real process, for the kill -9 tests.
func (f *fixture) hostdProcess(t *testing.T) func() *exec.Cmd {
	t.Helper()
	cfgFile := f.path("../hostd.json")
	cfg, err := json.Marshal(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	return func() *exec.Cmd {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), helperEnv+"="+cfgFile)
		return cmd
	}
}

func helperMain() int {
	data, err := os.ReadFile(os.Getenv(helperEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var cfg Config
	if err := json.Unmarshal(data, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	h, err := New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rep, err := h.ApplyTarget(context.Background())
	fmt.Print(FormatText(rep))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// A hostd killed (SIGKILL) in the middle of a step leaves a state from which
// the next apply converges: the step runs again (it had no marker), what
// follows it is made, and a third apply changes nothing.
func TestKilledMidApplyConverges(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	out := f.path("out")
	d := f.decl(
		dirRes("m/out", out),
		fileRes("m/conf", f.path("app.conf"), "a=1\n"),
		seedStep(f, out, declaration.Container{Command: []string{"sh", "-c",
			"echo started >> /out/starts; while [ ! -e /out/go ]; do sleep 0.1; done; echo ran >> /out/runs"}}),
		ctrRes("m/web", declaration.Container{Name: f.cname("web"), Command: sleeper, RestartOn: []string{"m/seed"}}),
	)
	if err := f.host.Adopt(f.branch(d)); err != nil {
		t.Fatal(err)
	}
	hostdProcess := f.hostdProcess(t)
	cmd := hostdProcess()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it while the step is running.
	waitFor(t, func() bool { _, err := os.Stat(out + "/starts"); return err == nil })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the killed hostd exited 0")
	}
	st, err := f.host.loadState()
	if err != nil {
		t.Fatalf("the state after the kill does not load: %v", err)
	}
	if _, ok := st.Markers["m/seed"]; ok {
		t.Fatal("the killed step has a marker")
	}
	if st.Applied["m/conf"] != d.Digests()["m/conf"] {
		t.Fatal("the file written before the kill is not recorded")
	}
	if _, ok := f.containers()[f.cname("web")]; ok {
		t.Fatal("the container after the step was started")
	}

	// Run hostd again, as a fresh process. It must remove the killed step's
	// container (still waiting) before it runs the step again; then the step
	// may finish.
	again := hostdProcess()
	var output strings.Builder
	again.Stdout, again.Stderr = &output, &output
	if err := again.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { b, _ := os.ReadFile(out + "/starts"); return strings.Count(string(b), "\n") == 2 })
	if err := os.WriteFile(out+"/go", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := again.Wait(); err != nil {
		t.Fatalf("the apply after the kill failed: %v\n%s", err, output.String())
	}
	rep, err := f.host.Status()
	if err != nil {
		t.Fatal(err)
	}
	expectOutcome(t, rep, "m/conf", declaration.Unchanged)
	expectOutcome(t, rep, "m/seed", declaration.Ran)
	expectOutcome(t, rep, "m/web", declaration.Created)
	if n := lines(t, out+"/starts"); n != 2 {
		t.Fatalf("the step started %d times, want 2", n)
	}
	if n := lines(t, out+"/runs"); n != 1 {
		t.Fatalf("the step completed %d times, want 1", n)
	}
	if s := f.containers()[f.cname("web")]; s != "running" {
		t.Fatalf("web is %q", s)
	}

	rep, err = f.host.ApplyTarget(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Resources {
		if r.Outcome != declaration.Unchanged {
			t.Fatalf("third apply: %s is %s (%s)", r.ID, r.Outcome, r.Reason)
		}
	}
}
