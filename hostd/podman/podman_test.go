package podman

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/internal/ocitest"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The runtime on real podman: run, list (one ps, labels and state), inspect
// (env, mounts, ports), start, run once (exit codes), remove.
func TestPodman(t *testing.T) {
	s := ocitest.NewStore(t)
	image := s.Load(t, "busybox")
	p := New(Options{Root: s.Root, RunRoot: s.RunRoot, TmpDir: s.TmpDir})
	ctx := context.Background()
	dir := t.TempDir()
	envFile := dir + "/app.env"
	if err := os.WriteFile(envFile, []byte("FROM_FILE=yes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	spec := Spec{
		Name: "web", Image: image, Command: []string{"sleep", "3600"},
		Env: map[string]string{"GREETING": "hello"}, EnvFiles: []string{envFile},
		Mounts: []declaration.Mount{{Source: dir, Target: "/data", ReadOnly: true}},
		Ports:  []declaration.Port{{Host: port, Container: 80}},
		Labels: map[string]string{LabelMesh: "m", LabelID: "mod/web", LabelDigest: "d1"},
	}
	id, err := p.Run(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	// Not in the mesh: List does not see it.
	if _, err := p.Run(ctx, Spec{Name: "stranger", Image: image, Command: []string{"sleep", "3600"}, Labels: map[string]string{LabelMesh: "other"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Remove(ctx, "web"); p.Remove(ctx, "stranger") })

	list, err := p.List(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	o, ok := list["web"]
	if len(list) != 1 || !ok || o.ID != id || !o.Running || o.Image != image || o.Labels[LabelDigest] != "d1" || o.Inspected {
		t.Fatalf("list: %+v", list)
	}
	full, err := p.Inspect(ctx, []string{"web"})
	if err != nil {
		t.Fatal(err)
	}
	o = full["web"]
	want := []declaration.Mount{{Source: dir, Target: "/data", ReadOnly: true}}
	if !o.Inspected || o.Env["GREETING"] != "hello" || o.Env["FROM_FILE"] != "yes" ||
		len(o.Mounts) != 1 || o.Mounts[0] != want[0] ||
		len(o.Ports) != 1 || o.Ports[0] != (declaration.Port{Host: port, Container: 80, Protocol: "tcp"}) {
		t.Fatalf("inspect: %+v", o)
	}

	if _, err := s.Podman(ctx, "stop", "-t", "0", "web"); err != nil {
		t.Fatal(err)
	}
	if list, _ = p.List(ctx, "m"); list["web"].Running || list["web"].State != "exited" {
		t.Fatalf("after stop: %+v", list["web"])
	}
	if err := p.Start(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if list, _ = p.List(ctx, "m"); !list["web"].Running {
		t.Fatalf("after start: %+v", list["web"])
	}

	step := Spec{Name: "step", Image: image, Labels: map[string]string{LabelMesh: "m"},
		Mounts: []declaration.Mount{{Source: dir, Target: "/out"}}}
	step.Command = []string{"sh", "-c", "sleep 1; echo done > /out/step"}
	if err := p.RunOnce(ctx, step); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dir + "/step"); string(b) != "done\n" {
		t.Fatalf("the step had not finished when RunOnce returned: %q", b)
	}
	step.Command = []string{"sh", "-c", "exit 7"}
	var exit *ExitError
	if err := p.RunOnce(ctx, step); !errors.As(err, &exit) || exit.Code != 7 {
		t.Fatalf("exit 7 gave %v", err)
	}
	step.Image = "localhost/missing@sha256:" + strings.Repeat("0", 64)
	if err := p.RunOnce(ctx, step); err == nil || errors.As(err, &exit) || !strings.Contains(err.Error(), "podman failed") {
		t.Fatalf("a missing image gave %v (it must not be pulled)", err)
	}
	if list, _ = p.List(ctx, "m"); len(list) != 1 {
		t.Fatalf("steps left containers: %v", list)
	}

	if err := p.Remove(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if err := p.Remove(ctx, "web"); err != nil {
		t.Fatalf("removing a missing container: %v", err)
	}
	if list, _ = p.List(ctx, "m"); len(list) != 0 {
		t.Fatalf("after remove: %v", list)
	}
}

// The arguments a container is run with: the pull policy, sorted labels and
// env (so the same spec is the same command), read-only mounts, tcp by
// default.
func TestRunArgs(t *testing.T) {
	spec := Spec{
		Name: "web", Image: "r@sha256:00", Command: []string{"sleep", "1"},
		Env:      map[string]string{"B": "2", "A": "1"},
		EnvFiles: []string{"/srv/e.env"},
		Mounts:   []declaration.Mount{{Source: "/srv/d", Target: "/d", ReadOnly: true}, {Source: "/srv/w", Target: "/w"}},
		Ports:    []declaration.Port{{Host: 8080, Container: 80}, {Host: 53, Container: 53, Protocol: "udp"}},
		Labels:   map[string]string{LabelMesh: "m", LabelDigest: "d"},
	}
	cases := []struct {
		opts Options
		want string
	}{
		{Options{}, "--name web --pull=never --label meshgen.digest=d --label meshgen.mesh=m --env-file /srv/e.env --env A=1 --env B=2 " +
			"--volume /srv/d:/d:ro --volume /srv/w:/w --publish 8080:80/tcp --publish 53:53/udp r@sha256:00 sleep 1"},
		{Options{AllowPulls: true}, "--name web --pull=missing --label meshgen.digest=d --label meshgen.mesh=m --env-file /srv/e.env --env A=1 --env B=2 " +
			"--volume /srv/d:/d:ro --volume /srv/w:/w --publish 8080:80/tcp --publish 53:53/udp r@sha256:00 sleep 1"},
	}
	for _, tc := range cases {
		if got := strings.Join(New(tc.opts).runArgs(spec), " "); got != tc.want {
			t.Errorf("allow pulls %v:\n got %s\nwant %s", tc.opts.AllowPulls, got, tc.want)
		}
	}
}
