package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/meshgen/meshgen/hostd"
	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/internal/meshtest"
	"github.com/meshgen/meshgen/internal/ocitest"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// demoNode is one node of the demo mesh, run by the real hostd with its own
// identity, state directory, root and podman store.
type demoNode struct {
	name, state, root string
	store             *ocitest.Store
	host              *hostd.Host
}

// demoMesh pushes examples/demo's catalog and assignments to a fresh bare
// repository, with nodes n1 and n2 enrolled by `hostd init`'s own code, each
// with its own root, and every image pinned to the busybox image loaded into
// each node's private store. The hosts are made by startHosts, once the
// reconciler's public key is known.
func demoMesh(t *testing.T) (*meshtest.Mesh, []*demoNode) {
	t.Helper()
	dir := t.TempDir()
	for _, sub := range []string{"catalog", "assignments"} {
		if err := os.CopyFS(filepath.Join(dir, sub), os.DirFS(filepath.Join("../examples/demo", sub))); err != nil {
			t.Fatal(err)
		}
	}
	var nodes []*demoNode
	var image string
	for _, name := range []string{"n1", "n2"} {
		n := &demoNode{name: name, state: t.TempDir(), root: filepath.Join(t.TempDir(), "root"), store: ocitest.NewStore(t)}
		image = n.store.Load(t, "meshgen-busybox")
		nodes = append(nodes, n)
	}
	pin := regexp.MustCompile(`localhost/meshgen-busybox@sha256:[0-9a-f]{64}`)
	err := filepath.WalkDir(filepath.Join(dir, "catalog"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(p, pin.ReplaceAll(b, []byte(image)), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("mesh.yaml", "name: demo\n")
	for _, n := range nodes {
		recipient, err := hostd.Init(n.state)
		if err != nil {
			t.Fatal(err)
		}
		write("nodes/"+n.name+".yaml", "recipient: "+recipient+"\nroot: "+n.root+"\nfacts:\n  address: 127.0.0.1\n")
	}
	m := meshtest.New(t, dir)
	// meshtest gave every node a fresh identity: enrol the ones hostd made.
	for _, n := range nodes {
		recipient, err := os.ReadFile(filepath.Join(dir, "nodes", n.name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(m.Work, "nodes", n.name+".yaml"), recipient, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m.Push(t, "enrol n1 and n2 with the identities hostd made")
	return m, nodes
}

// startHosts makes each node's hostd, enrolled with the reconciler's
// public key.
func startHosts(t *testing.T, m *meshtest.Mesh, nodes []*demoNode, pub []byte) {
	t.Helper()
	pubFile := enrolmentKey(t, pub)
	stop := 1 // busybox's sleep ignores SIGTERM: do not wait the default 10 s
	for _, n := range nodes {
		h, err := hostd.New(hostd.Config{
			Node: n.name, Mesh: "demo", Remote: "file://" + m.Bare, PushURL: "file://" + m.Bare,
			PublicKey: pubFile, Identity: filepath.Join(n.state, hostd.IdentityFile),
			StateDir: n.state, Root: n.root,
			Podman: hostd.PodmanConfig{Root: n.store.Root, RunRoot: n.store.RunRoot, TmpDir: n.store.TmpDir, StopTimeout: &stop},
		})
		if err != nil {
			t.Fatal(err)
		}
		n.host = h
	}
}

// TestRotationWithTheRealHostd: a two-party rotation of the demo's store
// account, driven to the end by the reconciler from the reports the real
// hostd pushes after really applying each node's branch with podman (design
// 27, "Rotation"; ADR 0114). After every apply of either node, the login
// and password the reporter on n2 holds are a credential the store on n1
// ensures: the consumer is never left without a working login. The reporter
// moves to the second login only once the store ensured it, is recreated
// for it, and the old credential's file leaves the store's node once
// retired.
func TestRotationWithTheRealHostd(t *testing.T) {
	ctx := context.Background()
	const secret = "store-account.reporter@n2.store"
	m, nodes := demoMesh(t)
	v := vaulttest.Start(t)
	r, pub := newReconciler(t, m, v, io.Discard)
	startHosts(t, m, nodes, pub)
	n1, n2 := nodes[0], nodes[1]
	consumers := filepath.Join(n1.root, "store", ".mesh", "consumers")

	// ensured returns the credentials the store's step was last given on
	// n1's disk, login → password file content.
	ensured := func() map[string]string {
		t.Helper()
		var info struct {
			Credentials []struct{ Login, SecretFile string }
		}
		if err := json.Unmarshal([]byte(readFile(t, filepath.Join(consumers, "reporter__n2.store.json"))), &info); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, c := range info.Credentials {
			out[c.Login] = readFile(t, filepath.Join(consumers, c.SecretFile))
		}
		return out
	}
	// holds returns the login the reporter's container runs with (podman's
	// own record of it) and the password on n2's disk, which it mounts.
	holds := func() (login, password string) {
		t.Helper()
		env, err := n2.store.Podman(ctx, "inspect", "--format", "{{range .Config.Env}}{{println .}}{{end}}", "mesh-reporter.reporter")
		if err != nil {
			t.Fatalf("inspect the reporter: %v", err)
		}
		for _, l := range strings.Split(string(env), "\n") {
			if v, ok := strings.CutPrefix(l, "STORE_LOGIN="); ok {
				login = v
			}
		}
		return login, readFile(t, filepath.Join(n2.root, "reporter", "out", "store-password"))
	}
	var recreated []string
	apply := func(n *demoNode) declaration.Report {
		t.Helper()
		rep, err := n.host.Once(ctx)
		if err != nil {
			t.Fatalf("hostd on %s: %v\n%s", n.name, err, hostd.FormatText(rep))
		}
		for _, res := range rep.Resources {
			if res.ID == "reporter/reporter" && res.Outcome == declaration.Recreated {
				recreated = append(recreated, res.Reason)
			}
		}
		return rep
	}
	// working checks the reporter's login and password are a credential
	// the store ensures.
	working := func(when string) string {
		t.Helper()
		login, password := holds()
		if got, ok := ensured()[login]; !ok || got != password {
			t.Fatalf("%s: the reporter holds login %s and a password the store does not ensure for it (it ensures %v)", when, login, slices.Sorted(maps.Keys(ensured())))
		}
		return login
	}
	round := func(i int) {
		t.Helper()
		if _, err := r.Once(ctx); err != nil {
			t.Fatal(err)
		}
		// The consumer applies first: the worst order for it. Were it
		// given the new credential before the store ensured it, the
		// check after its apply would fail.
		apply(n2)
		if i > 0 { // the store's files are there from the first round on
			working(fmt.Sprintf("round %d, after n2 applied", i))
		}
		apply(n1)
		working(fmt.Sprintf("round %d, after n1 applied", i))
	}
	round(0)
	if login := working("before the rotation"); login != "reporter__n2" {
		t.Fatalf("the reporter starts with login %s", login)
	}
	if _, err := v.Client.Rotate(ctx, secret); err != nil {
		t.Fatal(err)
	}
	before := ensured()["reporter__n2"]
	sawBoth := false
	for i := 1; rotationOf(t, v, secret) != nil; i++ {
		if i > 8 {
			t.Fatalf("the rotation did not finish in 8 rounds: %+v", rotationOf(t, v, secret))
		}
		round(i)
		if len(ensured()) == 2 {
			sawBoth = true
		}
	}
	if !sawBoth {
		t.Error("the store never ensured both credentials at once")
	}
	round(9) // the declarations after the rotation finished
	if login := working("after the rotation"); login != "reporter__n2__b" {
		t.Fatalf("the reporter ends with login %s, want its second login", login)
	}
	if _, pw := holds(); pw == before {
		t.Fatal("the reporter's password did not change")
	}
	if len(recreated) == 0 || !strings.Contains(strings.Join(recreated, "\n"), "password") {
		t.Fatalf("the reporter was not recreated for its new password: %q", recreated)
	}
	if _, err := os.Stat(filepath.Join(consumers, "reporter__n2.store.password")); !os.IsNotExist(err) {
		t.Fatalf("the retired credential's file is still on n1: %v", err)
	}
	if got := ensured(); len(got) != 1 {
		t.Fatalf("after the rotation the store ensures %d credentials, want 1", len(got))
	}
}
