package hostd

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/hostd/podman"
)

// A secret file's new version recreates the container that reads it (mounted
// directly, or as an env-file), with no restartOn declared: restarts are
// derived. The plaintext reaches only the target file and the container, never
// a report, a record or an error.
func TestSecretChangeRecreatesItsReader(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	values := []string{"pw-one-9f3a1c", "pw-two-77b0e2", "env-one-51d2", "env-two-c4a8"}
	unrelated := "x"
	decl := func(file, env sealed) *declaration.Declaration {
		env.ref.EnvVar = "DB_PASSWORD"
		return f.decl(
			declaration.Resource{ID: "m/token", Kind: declaration.KindFile, Module: "m",
				File: &declaration.File{Path: f.path("secrets/token"), Mode: "0600", Secret: file.ref}},
			declaration.Resource{ID: "m/db-env", Kind: declaration.KindFile, Module: "m",
				File: &declaration.File{Path: f.path("secrets/db.env"), Mode: "0600", Secret: env.ref}},
			fileRes("m/unrelated", f.path("unrelated.conf"), unrelated),
			ctrRes("m/app", declaration.Container{
				Name: f.cname("app"), Command: sleeper,
				Mounts:   []declaration.Mount{{Source: f.path("secrets/token"), Target: "/run/secrets/token", ReadOnly: true}},
				EnvFiles: []declaration.EnvFile{{File: "m/db-env", Reason: "the image reads DB_PASSWORD only from its environment"}},
			}),
		)
	}
	var outputs []string
	keep := func(rep declaration.Report, err error) declaration.Report {
		b, _ := json.Marshal(rep)
		outputs = append(outputs, string(b), FormatText(rep), Textfile(rep))
		if err != nil {
			outputs = append(outputs, err.Error())
			t.Fatal(err)
		}
		return rep
	}
	file1, env1 := f.seal("token", 1, values[0]), f.seal("db", 1, values[2])
	rep := keep(f.apply(decl(file1, env1), file1, env1))
	expectOutcome(t, rep, "m/app", declaration.Created)
	if got := readFile(t, f.path("secrets/token")); got != values[0] {
		t.Fatal("the secret file does not hold the plaintext")
	}
	if fi, _ := os.Stat(f.path("secrets/token")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file mode %v", fi.Mode())
	}
	if got := f.mustPodman("exec", f.cname("app"), "sh", "-c", "cat /run/secrets/token; echo; echo $DB_PASSWORD"); got != values[0]+"\n"+values[2]+"\n" {
		t.Fatalf("the container reads %q", got)
	}

	// A changed unrelated file does not touch the container.
	unrelated = "y"
	rep = keep(f.apply(decl(file1, env1), file1, env1))
	expectOutcome(t, rep, "m/unrelated", declaration.Corrected)
	expectOutcome(t, rep, "m/app", declaration.Unchanged)

	file2 := f.seal("token", 2, values[1])
	rep = keep(f.apply(decl(file2, env1), file2, env1))
	r := expectOutcome(t, rep, "m/app", declaration.Recreated)
	if r.Reason != `"m/token" changed` {
		t.Fatalf("reason %q", r.Reason)
	}
	if got := f.mustPodman("exec", f.cname("app"), "cat", "/run/secrets/token"); got != values[1] {
		t.Fatalf("after rotation the container reads %q", got)
	}

	env2 := f.seal("db", 2, values[3])
	rep = keep(f.apply(decl(file2, env2), file2, env2))
	r = expectOutcome(t, rep, "m/app", declaration.Recreated)
	if r.Reason != `"m/db-env" changed` {
		t.Fatalf("reason %q", r.Reason)
	}
	if got := f.mustPodman("exec", f.cname("app"), "sh", "-c", "echo $DB_PASSWORD"); got != values[3]+"\n" {
		t.Fatalf("after rotation the env holds %q", got)
	}

	// No plaintext in any report, text, textfile, error or record.
	filepath.WalkDir(f.cfg.StateDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			outputs = append(outputs, string(b))
		}
		return nil
	})
	for _, out := range outputs {
		for _, v := range values {
			if strings.Contains(out, v) {
				t.Fatalf("a secret's plaintext leaked into output or records")
			}
		}
	}
}

// A container stopped by hand is started again; one recreated by hand with
// another env, or another image, is put back. Both are corrected, with what
// differed.
func TestContainerDriftIsCorrected(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	name := f.cname("web")
	data := f.path("data")
	port := freePort(t)
	envFile := f.path("web.env")
	d := f.decl(dirRes("m/data", data), fileRes("m/env", envFile, "# the mode\nMODE=declared\n"), ctrRes("m/web", declaration.Container{
		Name: name, Command: sleeper, Env: map[string]string{"GREETING": "hello"},
		EnvFiles: []declaration.EnvFile{{File: "m/env", Reason: "the image reads MODE from its environment"}},
		Mounts:   []declaration.Mount{{Source: data, Target: "/data"}},
		Ports:    []declaration.Port{{Host: port, Container: 8080}},
	}))
	f.mustApply(d)
	labels := func() []string {
		out := f.mustPodman("container", "inspect", "--format", "{{json .Config.Labels}}", name)
		var m map[string]string
		json.Unmarshal([]byte(out), &m)
		var args []string
		for k, v := range m {
			if strings.HasPrefix(k, "meshgen.") {
				args = append(args, "--label", k+"="+v)
			}
		}
		return args
	}
	// Recreate by hand under the same name, labels (digest included) copied.
	byHand := func(image string, env string, extra ...string) {
		l := labels()
		f.mustPodman("rm", "-f", "-t", "0", name)
		args := append([]string{"run", "-d", "--pull=never", "--name", name, "--env", env}, l...)
		f.mustPodman(append(append(args, extra...), image, "sleep", "3600")...)
	}
	same := []string{"--volume", data + ":/data", "--publish", fmt.Sprintf("%d:8080", port), "--env-file", envFile}
	cases := []struct {
		name   string
		drift  func()
		reason string
	}{
		{"stopped by hand", func() { f.mustPodman("stop", "-t", "0", name) }, "was exited, started again"},
		{"recreated with another env", func() { byHand(shared.image, "GREETING=bye", same...) }, "running configuration differed: env GREETING"},
		{"recreated with another image", func() { byHand(shared.image2, "GREETING=hello", same...) }, "running configuration differed: image"},
		{"recreated with another env-file value", func() { byHand(shared.image, "GREETING=hello", append(same, "--env", "MODE=mine")...) }, "running configuration differed: env MODE"},
		{"recreated without its mount and port", func() { byHand(shared.image, "GREETING=hello", "--env-file", envFile) }, "running configuration differed: mounts, ports"},
		{"recreated just as declared", func() { byHand(shared.image, "GREETING=hello", same...) }, ""},
	}
	for _, tc := range cases {
		tc.drift()
		rep, err := f.host.ApplyTarget(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tc.reason == "" {
			// Made by hand exactly as declared: adopted, not touched.
			before := f.containerID(name)
			expectOutcome(t, rep, "m/web", declaration.Unchanged)
			if f.containerID(name) != before {
				t.Fatal("a container as declared was recreated")
			}
			continue
		}
		r := expectOutcome(t, rep, "m/web", declaration.Corrected)
		if r.Reason != tc.reason {
			t.Fatalf("%s: reason %q, want %q", tc.name, r.Reason, tc.reason)
		}
		if got := f.mustPodman("exec", name, "sh", "-c", "echo $GREETING $MODE"); got != "hello declared\n" {
			t.Fatalf("%s: GREETING is %q after the apply", tc.name, got)
		}
		rep, _ = f.host.ApplyTarget(context.Background())
		expectOutcome(t, rep, "m/web", declaration.Unchanged)
	}
}

// A changed declaration recreates the container with the reason; directories
// are created with their mode and never deleted when a declaration stops
// naming them.
func TestContainerRecreatedAndDirectoriesKept(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	data := f.path("data")
	c := declaration.Container{Name: f.cname("db"), Command: sleeper, Env: map[string]string{"V": "1"},
		Mounts: []declaration.Mount{{Source: data, Target: "/data"}}}
	d := dirRes("m/data", data)
	d.Directory.Mode = "0750"
	d.Directory.Owner = "1000:1000"
	rep := f.mustApply(f.decl(d, ctrRes("m/db", c)))
	expectOutcome(t, rep, "m/data", declaration.Created)
	fi, err := os.Stat(data)
	if err != nil || fi.Mode().Perm() != 0o750 || fi.Sys().(*syscall.Stat_t).Uid != 1000 || fi.Sys().(*syscall.Stat_t).Gid != 1000 {
		t.Fatalf("directory: %v %v", fi, err)
	}
	// Mode and owner drift is put back.
	os.Chmod(data, 0o777)
	os.Chown(data, 0, 0)
	rep = f.mustApply(f.decl(d, ctrRes("m/db", c)))
	if r := expectOutcome(t, rep, "m/data", declaration.Corrected); r.Reason != "mode was 0777, owner was 0:0" {
		t.Fatalf("reason %q", r.Reason)
	}
	first := f.containerID(f.cname("db"))
	obs, err := f.host.rt.List(context.Background(), f.mesh)
	if err != nil {
		t.Fatal(err)
	}
	if o := obs[f.cname("db")]; o.Labels[podman.LabelDigest] != f.digest(rep, "m/db") || o.Labels[podman.LabelID] != "m/db" {
		t.Fatalf("labels %v", o.Labels)
	}

	c.Env = map[string]string{"V": "2"}
	rep = f.mustApply(f.decl(ctrRes("m/db", declaration.Container{Name: c.Name, Command: sleeper, Env: c.Env})))
	r := expectOutcome(t, rep, "m/db", declaration.Recreated)
	if r.Reason != "its declaration changed" || f.containerID(f.cname("db")) == first {
		t.Fatalf("reason %q", r.Reason)
	}
	if _, err := os.Stat(data); err != nil {
		t.Fatalf("a directory the declaration stopped naming was removed: %v", err)
	}
}

func (f *fixture) digest(rep declaration.Report, id string) string {
	return outcome(f.t, rep, id).Digest
}

// A step's Answer file is carried back in the report.
func TestStepAnswerIsReported(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	out := f.path("out")
	step := seedStep(f, out, declaration.Container{Command: []string{"sh", "-c", `echo '{"host":"db.n1","port":5432}' > /out/answer.json`}})
	step.Container.Answer = out + "/answer.json"
	rep := f.mustApply(f.decl(dirRes("m/out", out), step))
	want := map[string]string{"host": "db.n1", "port": "5432"}
	if got := rep.Answers["m/seed"]; len(got) != 2 || got["host"] != want["host"] || got["port"] != want["port"] {
		t.Fatalf("answers %v", rep.Answers)
	}
}

// countingRuntime counts the queries an apply makes.
type countingRuntime struct {
	Runtime
	lists, inspects, inspected int
}

func (c *countingRuntime) List(ctx context.Context, mesh string) (map[string]podman.Observed, error) {
	c.lists++
	return c.Runtime.List(ctx, mesh)
}

func (c *countingRuntime) Inspect(ctx context.Context, names []string) (map[string]podman.Observed, error) {
	if len(names) > 0 {
		c.inspects++
		c.inspected += len(names)
	}
	return c.Runtime.Inspect(ctx, names)
}

// An apply queries podman once for all its containers, and inspects (once)
// only those replaced outside hostd.
func TestApplyQueriesPodmanOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	var rs []declaration.Resource
	for i := 0; i < 3; i++ {
		rs = append(rs, ctrRes(fmt.Sprintf("m/c%d", i), declaration.Container{Name: f.cname(fmt.Sprint("c", i)), Command: sleeper}))
	}
	f.mustApply(f.decl(rs...))
	counter := &countingRuntime{Runtime: f.host.rt}
	f.host.rt = counter
	if _, err := f.host.ApplyTarget(context.Background()); err != nil {
		t.Fatal(err)
	}
	if counter.lists != 1 || counter.inspects != 0 {
		t.Fatalf("a no-op apply of 3 containers made %d lists and %d inspects, want 1 and 0", counter.lists, counter.inspects)
	}
	// Two replaced by hand: one more query for both.
	for _, n := range []string{"c0", "c2"} {
		f.mustPodman("rm", "-f", "-t", "0", f.cname(n))
		f.mustPodman("run", "-d", "--pull=never", "--label", podman.LabelMesh+"="+f.mesh, "--name", f.cname(n), shared.image, "sleep", "3600")
	}
	rep, err := f.host.ApplyTarget(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if counter.lists != 2 || counter.inspects != 1 || counter.inspected != 2 {
		t.Fatalf("lists %d, inspects %d of %d containers; want 2, 1, 2", counter.lists, counter.inspects, counter.inspected)
	}
	// Made by hand without hostd's digest label: recreated.
	expectOutcome(t, rep, "m/c0", declaration.Recreated)
	expectOutcome(t, rep, "m/c1", declaration.Unchanged)
}

// A container the declaration stops naming is removed (after a complete
// apply); its data directory stays. A container of another node in the same
// mesh is not touched.
func TestUndeclaredContainerIsRemoved(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	data := f.path("old/data")
	keep := ctrRes("m/keep", declaration.Container{Name: f.cname("keep"), Command: sleeper})
	old := ctrRes("old/server", declaration.Container{Name: f.cname("old"), Command: sleeper,
		Mounts: []declaration.Mount{{Source: data, Target: "/data"}}})
	f.mustApply(f.decl(dirRes("old/data", data), keep, old))
	f.mustPodman("run", "-d", "--pull=never", "--name", f.cname("n2"), "--label", podman.LabelMesh+"="+f.mesh,
		"--label", podman.LabelNode+"=n2", shared.image, "sleep", "3600")

	// A failed apply removes nothing.
	bad := ctrRes("m/bad", declaration.Container{Name: f.cname("bad"), RunOnce: true, Command: []string{"false"}})
	rep, err := f.apply(f.decl(keep, bad))
	if err == nil || len(rep.Removed) != 0 || f.containers()[f.cname("old")] != "running" {
		t.Fatalf("a failed apply removed %v (%v)", rep.Removed, err)
	}

	rep = f.mustApply(f.decl(keep))
	if len(rep.Removed) != 1 || rep.Removed[0] != f.cname("old") {
		t.Fatalf("removed %v", rep.Removed)
	}
	cs := f.containers()
	if _, ok := cs[f.cname("old")]; ok || cs[f.cname("keep")] != "running" || cs[f.cname("n2")] != "running" {
		t.Fatalf("containers after the apply: %v", cs)
	}
	if _, err := os.Stat(data); err != nil {
		t.Fatalf("the data directory went with the container: %v", err)
	}
	if !strings.Contains(FormatText(rep), "removed    container "+f.cname("old")+": no longer declared") {
		t.Fatalf("text report:\n%s", FormatText(rep))
	}
}
