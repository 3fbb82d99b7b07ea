// Package demo holds the demo mesh examples/demo.sh runs: a catalog and
// assignments for two nodes, n1 and n2, whose every image is the
// deterministic busybox image internal/ocitest builds. This file's tests keep
// the mesh valid and its pinned image digest equal to what ocitest builds.
package demo

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/internal/ocitest"
	"github.com/meshgen/meshgen/reconciler"
)

// imageName is the name the demo's image is built and loaded under
// (test/tools/busybox-image).
const imageName = "meshgen-busybox"

var imageLine = regexp.MustCompile(`(?m)^\s*image:\s*(\S+)\s*$`)

// Every image the demo names is one busybox image, pinned by the digest
// ocitest builds: they cannot drift apart unnoticed. The digest follows
// /bin/busybox, so the check is exact on a machine with the busybox-static
// the pin was made from (busybox.sha256); with another one, examples/demo.sh
// pins the image it built in what it commits, and this test checks only that
// the demo names one image.
func TestPinnedImageIsTheOneOcitestBuilds(t *testing.T) {
	_, digest, err := ocitest.Archive(imageName)
	if err != nil {
		t.Fatal(err)
	}
	want := "localhost/" + imageName + "@" + digest
	pins := map[string][]string{}
	err = filepath.WalkDir("catalog", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range imageLine.FindAllSubmatch(b, -1) {
			pins[string(m[1])] = append(pins[string(m[1])], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, files := range pins {
		found += len(files)
	}
	if found < 3 {
		t.Fatalf("found %d images in the demo's catalog, want at least 3 (seed, server, reporter)", found)
	}
	if len(pins) != 1 {
		t.Fatalf("the demo's modules pin %d different images, want one: %v", len(pins), pins)
	}
	if sameBusybox(t) {
		for got, files := range pins {
			if got != want {
				t.Errorf("%v pin %s; ocitest builds %s from the same busybox: pin that (go run ./test/tools/busybox-image)", files, got, want)
			}
		}
	} else {
		t.Logf("this machine's /bin/busybox is not the one the demo was pinned with; the demo pins %s when it runs", want)
	}
}

// sameBusybox reports whether /bin/busybox is the one busybox.sha256 names.
func sameBusybox(t *testing.T) bool {
	t.Helper()
	rec, err := os.ReadFile("busybox.sha256")
	if err != nil {
		t.Fatal(err)
	}
	var recorded string
	for _, line := range strings.Split(string(rec), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			recorded = line
		}
	}
	b, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("read /bin/busybox (install busybox-static): %v", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]) == recorded
}

// meshFor returns a directory holding the demo mesh as examples/demo.sh
// commits it: genesis's mesh.yaml, nodes n1 and n2, and the demo's catalog
// and assignments.
func meshFor(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("mesh.yaml", "name: demo\n")
	// Recipients as `hostd init` prints them (made once; no key is kept).
	write("nodes/n1.yaml", "recipient: age1eaamyqm0vntgxlt00s3r43uqvxe44kpujfaqen53p4vkfp5jwpfsdeqts8\nfacts:\n  address: 127.0.0.1\n")
	write("nodes/n2.yaml", "recipient: age13jkzm7ahysfzygmvw67e0uu3kh4s7h64nteg5nnj6xrp5d0ntp4qfrpzrv\nfacts:\n  address: 127.0.0.1\n")
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		write(p, string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// The demo mesh is a valid mesh repository: the loader refuses nothing.
func TestDemoMeshLoads(t *testing.T) {
	repo, err := schema.LoadDir(meshFor(t))
	if err != nil {
		t.Fatalf("the demo mesh does not load:\n%v", err)
	}
	if len(repo.Assignments) != 2 || len(repo.Modules) != 2 {
		t.Errorf("demo mesh: %d assignments, %d modules; want 2 and 2", len(repo.Assignments), len(repo.Modules))
	}
}

// The demo mesh resolves and renders what the demo shows: on n1 the store's
// step before its server, naming the message it reads and the consumer
// files the mesh writes for it; on n2 the reporter's password as a sealed
// file, never a value, and the operator's greeting in its environment.
func TestDemoMeshRenders(t *testing.T) {
	repo, err := schema.LoadDir(meshFor(t))
	if err != nil {
		t.Fatal(err)
	}
	res, err := reconciler.Resolve(repo, reconciler.ResolveOptions{})
	if err != nil {
		t.Fatalf("the demo mesh does not resolve:\n%v", err)
	}
	decls, err := reconciler.Render(res, reconciler.Unsealed{})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	byID := func(node string) map[string]declaration.Resource {
		m := map[string]declaration.Resource{}
		for _, r := range decls[node].Resources {
			m[r.ID] = r
		}
		return m
	}
	order := func(node string, ids ...string) {
		t.Helper()
		var got []string
		for _, r := range decls[node].Resources {
			if slices.Contains(ids, r.ID) {
				got = append(got, r.ID)
			}
		}
		if !slices.Equal(got, ids) {
			t.Errorf("%s applies %v in the order %v, want %v", node, ids, got, ids)
		}
	}

	n1 := byID("n1")
	order("n1", "store/data", "store/motd", "store/accounts", "store/seed", "store/server")
	seed := n1["store/seed"].Container
	if seed == nil || !seed.RunOnce {
		t.Fatalf("store/seed is not a run-once step: %+v", n1["store/seed"])
	}
	if !slices.Contains(seed.RestartOn, "store/motd") {
		t.Errorf("store/seed restartOn %v does not name store/motd (ADR 0099)", seed.RestartOn)
	}
	consumerSecret := false
	for _, id := range seed.RestartOn {
		if f := n1[id].File; f != nil && f.Secret != nil {
			consumerSecret = true
		}
	}
	if !consumerSecret {
		t.Errorf("store/seed restartOn %v names no per-consumer secret file", seed.RestartOn)
	}
	if s := n1["store/server"].Container; s == nil || s.RunOnce || !slices.Contains(s.RestartOn, "store/seed") {
		t.Errorf("store/server is not a long-running container naming store/seed: %+v", n1["store/server"])
	}
	if f := n1["store/accounts"].File; f == nil || !f.CreateOnce {
		t.Errorf("store/accounts is not create-once: %+v", n1["store/accounts"])
	}

	n2 := byID("n2")
	order("n2", "reporter/out", "reporter/password", "reporter/reporter")
	pw := n2["reporter/password"].File
	if pw == nil || pw.Secret == nil || pw.Content != "" || pw.Mode != "0600" {
		t.Fatalf("reporter/password is not a sealed secret file of mode 0600: %+v", n2["reporter/password"])
	}
	rep := n2["reporter/reporter"].Container
	if rep == nil || rep.Env["GREETING"] != "hello from the demo" || rep.Env["STORE_HOST"] != "127.0.0.1" {
		t.Fatalf("reporter/reporter env %v, want the operator's greeting and the store's host", rep)
	}
	if n1Secret := n1[seedSecretID(t, seed.RestartOn, n1)].File.Secret; n1Secret.Name != pw.Secret.Name {
		t.Errorf("n1 applies secret %q, n2 reads %q: want the one per-consumer secret on both", n1Secret.Name, pw.Secret.Name)
	}
}

func seedSecretID(t *testing.T, ids []string, rs map[string]declaration.Resource) string {
	t.Helper()
	for _, id := range ids {
		if f := rs[id].File; f != nil && f.Secret != nil {
			return id
		}
	}
	t.Fatal("no secret file under the step's restartOn")
	return ""
}
