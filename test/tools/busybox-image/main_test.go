package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The tool prints the reference of the archive it writes, and writing twice
// gives the same bytes: the digest the demo pins is a fact, not a guess.
func TestToolWritesTheArchiveItNames(t *testing.T) {
	ref, err := Reference()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ref, "localhost/meshgen-busybox@sha256:") || len(ref) != len("localhost/meshgen-busybox@sha256:")+64 {
		t.Fatalf("reference %q is not localhost/meshgen-busybox@sha256:<64 hex>", ref)
	}
	var archives [][]byte
	for i := 0; i < 2; i++ {
		dir := t.TempDir()
		cmd := exec.Command("go", "run", ".", "-o", dir)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("busybox-image -o: %v", err)
		}
		if got := strings.TrimSpace(string(out)); got != ref {
			t.Errorf("busybox-image printed %q, want %q", got, ref)
		}
		b, err := os.ReadFile(filepath.Join(dir, Name+".oci.tar"))
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, b)
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Error("two builds of the archive differ")
	}
}
