package hostd

import (
	"os"
	"strings"
	"testing"

	"github.com/meshgen/meshgen/hostd/declaration"
)

// seedStep is a step that appends a line to /out/runs each time it runs, after
// a pause, so a detached run would be caught by the count.
func seedStep(f *fixture, out string, c declaration.Container) declaration.Resource {
	c.Name = f.cname("seed")
	c.RunOnce = true
	if c.Command == nil {
		c.Command = []string{"sh", "-c", "sleep 1; echo ran >> /out/runs"}
	}
	c.Mounts = append(c.Mounts, declaration.Mount{Source: out, Target: "/out"})
	return ctrRes("m/seed", c)
}

// ADR 0052: a run-once step runs to completion, exit 0 required, and is not
// left running.
func TestStepRunsToCompletion(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	out := f.path("out")
	d := f.decl(dirRes("m/out", out), seedStep(f, out, declaration.Container{}))
	rep := f.mustApply(d)
	if r := expectOutcome(t, rep, "m/seed", declaration.Ran); r.Reason != "first run" {
		t.Fatalf("reason %q", r.Reason)
	}
	if n := lines(t, out+"/runs"); n != 1 {
		t.Fatalf("the step wrote %d lines when Apply returned, want 1 (it must run to completion, attached)", n)
	}
	if state, ok := f.containers()[f.cname("seed")]; ok {
		t.Fatalf("the step's container is left behind (%s)", state)
	}
	st, err := f.host.loadState()
	if err != nil {
		t.Fatal(err)
	}
	if st.Markers["m/seed"] != d.Digests()["m/seed"] {
		t.Fatalf("marker %q, want the step's digest %q", st.Markers["m/seed"], d.Digests()["m/seed"])
	}
}

// ADR 0052: a step that exits non-zero fails the apply naming the step, and
// what follows is gated and never started; nothing is recorded, so the next
// apply tries again.
func TestStepFailureGatesWhatFollows(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	out := f.path("out")
	d := f.decl(
		dirRes("m/out", out),
		seedStep(f, out, declaration.Container{Command: []string{"sh", "-c", "echo ran >> /out/runs; exit 3"}}),
		ctrRes("m/web", declaration.Container{Name: f.cname("web"), Command: sleeper}),
		fileRes("m/after", f.path("after.conf"), "x"),
	)
	for attempt := 1; attempt <= 2; attempt++ {
		rep, err := f.apply(d)
		if err == nil || !strings.Contains(err.Error(), `"m/seed"`) {
			t.Fatalf("attempt %d: error %v, want one naming the step", attempt, err)
		}
		r := expectOutcome(t, rep, "m/seed", declaration.Failed)
		if !strings.Contains(r.Reason, `step "m/seed" exited with status 3`) {
			t.Fatalf("reason %q", r.Reason)
		}
		expectOutcome(t, rep, "m/web", declaration.Gated)
		expectOutcome(t, rep, "m/after", declaration.Gated)
		if rep.OK() {
			t.Fatal("report says OK")
		}
		if _, ok := f.containers()[f.cname("web")]; ok {
			t.Fatal("the gated container exists")
		}
		if _, err := os.Stat(f.path("after.conf")); !os.IsNotExist(err) {
			t.Fatalf("the gated file was written: %v", err)
		}
		st, _ := f.host.loadState()
		if _, ok := st.Markers["m/seed"]; ok {
			t.Fatal("a failed step has a marker")
		}
		if n := lines(t, out+"/runs"); n != attempt {
			t.Fatalf("attempt %d: the step ran %d times (a failed step is retried each apply)", attempt, n)
		}
		if st.Generation != 0 {
			t.Fatalf("generation %d recorded as applied after a failure", st.Generation)
		}
	}
}

// ADR 0052: an identical re-apply runs nothing.
func TestStepNotRerunOnIdenticalApply(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	out := f.path("out")
	res := []declaration.Resource{dirRes("m/out", out), seedStep(f, out, declaration.Container{})}
	d := f.decl(res...)
	f.mustApply(d)
	// The same declaration again, then a new generation with the same resources.
	for _, again := range []*declaration.Declaration{d, f.decl(res...)} {
		rep := f.mustApply(again)
		expectOutcome(t, rep, "m/seed", declaration.Unchanged)
		expectOutcome(t, rep, "m/out", declaration.Unchanged)
		if n := lines(t, out+"/runs"); n != 1 {
			t.Fatalf("the step ran %d times, want 1", n)
		}
	}
}

// ADR 0052: a changed image or env runs the step again.
func TestStepRerunsWhenItsDeclarationChanged(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		change func(*declaration.Container)
	}{
		{"image", func(c *declaration.Container) { c.Image = shared.image2 }},
		{"env", func(c *declaration.Container) { c.Env = map[string]string{"MODE": "two"} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{})
			out := f.path("out")
			c := declaration.Container{Env: map[string]string{"MODE": "one"}}
			f.mustApply(f.decl(dirRes("m/out", out), seedStep(f, out, c)))
			tc.change(&c)
			rep := f.mustApply(f.decl(dirRes("m/out", out), seedStep(f, out, c)))
			r := expectOutcome(t, rep, "m/seed", declaration.Ran)
			if r.Reason != "its declaration changed" {
				t.Fatalf("reason %q", r.Reason)
			}
			if n := lines(t, out+"/runs"); n != 2 {
				t.Fatalf("the step ran %d times, want 2", n)
			}
		})
	}
}

// ADR 0099: a step naming a file under restartOn runs again when the file
// changed, and not when it did not; a change in this apply (a file put back
// after a hand edit) counts too.
func TestStepRunsAgainWhenANamedFileChanged(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	out := f.path("out")
	bind := f.path("bind/ca.addr")
	step := func() declaration.Resource {
		return seedStep(f, out, declaration.Container{
			RestartOn: []string{"m/bind"},
			Command:   []string{"sh", "-c", "cp /bind/ca.addr /out/fetched; echo ran >> /out/runs"},
			Mounts:    []declaration.Mount{{Source: f.path("bind"), Target: "/bind", ReadOnly: true}},
		})
	}
	decl := func(addr, other string) *declaration.Declaration {
		return f.decl(dirRes("m/out", out), fileRes("m/bind", bind, addr), fileRes("m/other", f.path("other"), other), step())
	}
	f.mustApply(decl("10.0.0.1", "x"))
	steps := []struct {
		name    string
		decl    *declaration.Declaration
		edit    func()
		want    declaration.Outcome
		reason  string
		runs    int
		fetched string
	}{
		{name: "nothing changed", decl: decl("10.0.0.1", "x"), want: declaration.Unchanged, runs: 1, fetched: "10.0.0.1"},
		{name: "an unnamed file changed", decl: decl("10.0.0.1", "y"), want: declaration.Unchanged, runs: 1, fetched: "10.0.0.1"},
		{name: "the named file changed", decl: decl("10.0.0.2", "y"), want: declaration.Ran, reason: `"m/bind" changed in this apply`, runs: 2, fetched: "10.0.0.2"},
		{name: "again, nothing changed", decl: decl("10.0.0.2", "y"), want: declaration.Unchanged, runs: 2, fetched: "10.0.0.2"},
		{name: "the named file edited by hand", decl: decl("10.0.0.2", "y"), edit: func() { os.WriteFile(bind, []byte("evil"), 0o644) },
			want: declaration.Ran, reason: `"m/bind" changed in this apply`, runs: 3, fetched: "10.0.0.2"},
	}
	for _, s := range steps {
		if s.edit != nil {
			s.edit()
		}
		rep := f.mustApply(s.decl)
		if s.edit != nil {
			// Put back from drift, not a declared change.
			if r := expectOutcome(t, rep, "m/bind", declaration.Corrected); r.Reason != "content differed" {
				t.Fatalf("%s: the file's reason %q", s.name, r.Reason)
			}
		}
		r := expectOutcome(t, rep, "m/seed", s.want)
		if r.Reason != s.reason {
			t.Fatalf("%s: reason %q, want %q", s.name, r.Reason, s.reason)
		}
		if n := lines(t, out+"/runs"); n != s.runs {
			t.Fatalf("%s: the step ran %d times, want %d", s.name, n, s.runs)
		}
		if got := readFile(t, out+"/fetched"); got != s.fetched {
			t.Fatalf("%s: the step fetched %q, want %q", s.name, got, s.fetched)
		}
	}
}

// ADR 0099: a container naming a step is recreated after the step ran, with
// the step as the stated reason, and holds what the step made.
func TestContainerNamingAStepIsRecreatedAfterIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	out := f.path("out")
	decl := func(addr string) *declaration.Declaration {
		return f.decl(
			dirRes("m/out", out),
			fileRes("m/bind", f.path("bind/addr"), addr),
			seedStep(f, out, declaration.Container{
				RestartOn: []string{"m/bind"},
				Command:   []string{"sh", "-c", "cp /bind/addr /out/root.pem; echo ran >> /out/runs"},
				Mounts:    []declaration.Mount{{Source: f.path("bind"), Target: "/bind"}},
			}),
			ctrRes("m/server", declaration.Container{
				Name: f.cname("server"), RestartOn: []string{"m/seed"},
				Command: []string{"sh", "-c", "cp /out/root.pem /out/server-holds; exec sleep 3600"},
				Mounts:  []declaration.Mount{{Source: out, Target: "/out"}},
			}),
		)
	}
	rep := f.mustApply(decl("ca-1"))
	expectOutcome(t, rep, "m/server", declaration.Created)
	first := f.containerID(f.cname("server"))

	rep = f.mustApply(decl("ca-2"))
	expectOutcome(t, rep, "m/seed", declaration.Ran)
	r := expectOutcome(t, rep, "m/server", declaration.Recreated)
	if !strings.Contains(r.Reason, `step "m/seed" ran`) {
		t.Fatalf("reason %q does not name the step", r.Reason)
	}
	if f.containerID(f.cname("server")) == first {
		t.Fatal("the server was not recreated")
	}
	waitFor(t, func() bool { b, _ := os.ReadFile(out + "/server-holds"); return string(b) == "ca-2" })

	rep = f.mustApply(decl("ca-2"))
	expectOutcome(t, rep, "m/seed", declaration.Unchanged)
	expectOutcome(t, rep, "m/server", declaration.Unchanged)
}

// ADR 0087: a create-once file grown by hand survives a re-apply, content,
// mode and all, as kept; an ordinary file is put back.
func TestCreateOnceFileIsKept(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	seed, plain := f.path("acl/dynsec.json"), f.path("acl/plain.conf")
	decl := func(content string) *declaration.Declaration {
		s := fileRes("m/seed", seed, content)
		s.File.CreateOnce = true
		return f.decl(s, fileRes("m/plain", plain, content))
	}
	rep := f.mustApply(decl("seed\n"))
	expectOutcome(t, rep, "m/seed", declaration.Created)
	for _, p := range []string{seed, plain} {
		fh, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fh.WriteString("grown\n")
		fh.Close()
		os.Chmod(p, 0o600)
	}
	rep = f.mustApply(decl("another seed\n"))
	expectOutcome(t, rep, "m/seed", declaration.Kept)
	if got := readFile(t, seed); got != "seed\ngrown\n" {
		t.Fatalf("the seed holds %q", got)
	}
	if fi, _ := os.Stat(seed); fi.Mode().Perm() != 0o600 {
		t.Fatalf("the seed's mode is %v, the hand-set 0600 was not kept", fi.Mode())
	}
	r := expectOutcome(t, rep, "m/plain", declaration.Corrected)
	if r.Reason != "its declaration changed: content differed, mode was 0600" || readFile(t, plain) != "another seed\n" {
		t.Fatalf("the plain file: reason %q, content %q", r.Reason, readFile(t, plain))
	}
}
