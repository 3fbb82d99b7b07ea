package ocitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Store is a private podman store: every command runs with its own
// --root, --runroot and --tmpdir, so tests never see each other's (or the
// machine's) containers and images.
type Store struct {
	// Root holds images and containers (--root).
	Root string
	// RunRoot holds runtime state (--runroot); kept short, socket paths
	// under it are length-limited.
	RunRoot string
	// TmpDir is podman's --tmpdir.
	TmpDir string

	base string
}

// NewStore makes a store under a fresh short directory in /tmp and removes
// it, with every container in it, when the test ends. It fails the test when
// podman is not installed: the tests need the real thing (`make deps`).
func NewStore(t testing.TB) *Store {
	t.Helper()
	s, err := OpenStore()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("remove podman store: %v", err)
		}
	})
	return s
}

// OpenStore makes a store under a fresh short directory in /tmp, for use
// outside a test (a TestMain); the caller must [Store.Close] it.
func OpenStore() (*Store, error) {
	if _, err := exec.LookPath("podman"); err != nil {
		return nil, fmt.Errorf("podman is not installed: %w (run `make deps`)", err)
	}
	base, err := os.MkdirTemp("/tmp", "pm")
	if err != nil {
		return nil, fmt.Errorf("make podman store directory: %w", err)
	}
	s := &Store{
		Root:    filepath.Join(base, "r"),
		RunRoot: filepath.Join(base, "rr"),
		TmpDir:  filepath.Join(base, "t"),
		base:    base,
	}
	for _, d := range []string{s.Root, s.RunRoot, s.TmpDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Errorf("make podman store directory: %w", err)
		}
	}
	return s, nil
}

// Flags returns the global podman flags that select this store.
func (s *Store) Flags() []string {
	return []string{"--root", s.Root, "--runroot", s.RunRoot, "--tmpdir", s.TmpDir}
}

// Podman runs podman on this store and returns its standard output; an
// error carries the standard error.
func (s *Store) Podman(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "podman", append(s.Flags(), args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("podman %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Close removes every container and image of the store, then the store.
func (s *Store) Close() error {
	ctx := context.Background()
	var errs []error
	if _, err := s.Podman(ctx, "rm", "--all", "--force", "--time", "0"); err != nil {
		errs = append(errs, err)
	}
	if _, err := s.Podman(ctx, "system", "reset", "--force"); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(s.base); err != nil {
		errs = append(errs, fmt.Errorf("remove podman store %s: %w", s.base, err))
	}
	return errors.Join(errs...)
}

// Load builds the image archive for name, loads it into the store and
// returns its digest-pinned reference "localhost/NAME@sha256:<hex>". It fails
// the test on any error.
func (s *Store) Load(t testing.TB, name string) string {
	t.Helper()
	ref, err := s.LoadImage(name)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// LoadVariant is [Store.Load] for the image [VariantArchive] makes.
func (s *Store) LoadVariant(t testing.TB, name, variant string) string {
	t.Helper()
	ref, err := s.LoadImageVariant(name, variant)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// LoadImage is [Store.Load] returning an error instead of failing a test.
func (s *Store) LoadImage(name string) (string, error) { return s.LoadImageVariant(name, "") }

// LoadImageVariant is [Store.LoadVariant] returning an error.
func (s *Store) LoadImageVariant(name, variant string) (string, error) {
	archive, digest, err := BuildVariant(s.TmpDir, name, variant)
	if err != nil {
		return "", err
	}
	defer os.Remove(archive)
	ctx := context.Background()
	if _, err := s.Podman(ctx, "load", "--quiet", "--input", archive); err != nil {
		return "", fmt.Errorf("load test image %q: %w", name, err)
	}
	ref := "localhost/" + name + "@" + digest
	out, err := s.Podman(ctx, "image", "inspect", "--format", "{{json .RepoDigests}}", ref)
	if err != nil {
		return "", fmt.Errorf("inspect loaded test image %q: %w", name, err)
	}
	var digests []string
	if err := json.Unmarshal(out, &digests); err != nil {
		return "", fmt.Errorf("read repo digests of test image %q: %w", name, err)
	}
	for _, d := range digests {
		if d == ref {
			return ref, nil
		}
	}
	return "", fmt.Errorf("loaded test image %q has repo digests %v, not %s", name, digests, ref)
}
