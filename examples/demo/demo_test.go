// Package demo holds the demo mesh examples/demo.sh runs: a catalog and
// assignments for two nodes, n1 and n2, whose every image is the
// deterministic busybox image internal/ocitest builds. This file's tests keep
// the mesh valid and its pinned image digest equal to what ocitest builds.
package demo

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/internal/ocitest"
)

// imageName is the name the demo's image is built and loaded under
// (test/tools/busybox-image).
const imageName = "meshgen-busybox"

var imageLine = regexp.MustCompile(`(?m)^\s*image:\s*(\S+)\s*$`)

// Every image the demo names is the busybox image, pinned by the digest
// ocitest builds today: they cannot drift apart unnoticed (a new
// busybox-static changes the digest, and this test says what to pin).
func TestPinnedImageIsTheOneOcitestBuilds(t *testing.T) {
	_, digest, err := ocitest.Archive(imageName)
	if err != nil {
		t.Fatal(err)
	}
	want := "localhost/" + imageName + "@" + digest
	found := 0
	err = filepath.WalkDir("catalog", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range imageLine.FindAllSubmatch(b, -1) {
			found++
			if got := string(m[1]); got != want {
				t.Errorf("%s pins %s; ocitest builds %s: pin that (go run ./test/tools/busybox-image)", p, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 3 {
		t.Fatalf("found %d images in the demo's catalog, want at least 3 (seed, server, reporter)", found)
	}
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
