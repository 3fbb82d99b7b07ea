package ocitest

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

func TestBuildIsDeterministic(t *testing.T) {
	dir1, dir2 := t.TempDir(), t.TempDir()
	p1, d1, err := Build(dir1, "busybox")
	if err != nil {
		t.Fatal(err)
	}
	p2, d2, err := Build(dir2, "busybox")
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(p1)
	b2, _ := os.ReadFile(p2)
	if len(b1) == 0 || !bytes.Equal(b1, b2) {
		t.Fatalf("two builds differ (%d and %d bytes)", len(b1), len(b2))
	}
	if d1 != d2 || !strings.HasPrefix(d1, "sha256:") || len(d1) != len("sha256:")+64 {
		t.Fatalf("digests %q and %q", d1, d2)
	}
	_, d3, err := Build(dir1, "other")
	if err != nil {
		t.Fatal(err)
	}
	if d3 != d1 {
		// The name is only an annotation of the index, not part of the manifest.
		t.Fatalf("manifest digest depends on the name: %s vs %s", d3, d1)
	}
}

func TestLoadedImageRunsByDigest(t *testing.T) {
	s := NewStore(t)
	ref := s.Load(t, "busybox")
	if !strings.HasPrefix(ref, "localhost/busybox@sha256:") {
		t.Fatalf("ref %q", ref)
	}
	ctx := context.Background()
	out, err := s.Podman(ctx, "run", "--rm", "--pull=never", ref, "sh", "-c", "echo hello; cat /etc/passwd | head -1; test -x /bin/ls && echo ls")
	if err != nil {
		t.Fatal(err)
	}
	want := "hello\nroot:x:0:0:root:/root:/bin/sh\nls\n"
	if string(out) != want {
		t.Fatalf("output %q, want %q", out, want)
	}
	// The exit code comes through.
	if _, err := s.Podman(ctx, "run", "--rm", "--pull=never", ref, "sh", "-c", "exit 3"); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("exit 3 gave %v", err)
	}
	// A variant is another image, another digest, and runs too.
	v := s.LoadVariant(t, "busybox2", "two")
	if v == ref || !strings.HasPrefix(v, "localhost/busybox2@sha256:") {
		t.Fatalf("variant ref %q, plain %q", v, ref)
	}
	out, err = s.Podman(ctx, "run", "--rm", "--pull=never", v, "cat", "/etc/variant")
	if err != nil || string(out) != "two\n" {
		t.Fatalf("variant: %q, %v", out, err)
	}
	// A second load of the same image is the same reference.
	if again := s.Load(t, "busybox"); again != ref {
		t.Fatalf("second load %q, first %q", again, ref)
	}
}
