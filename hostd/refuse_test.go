package hostd

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/meshgen/meshgen/hostd/declaration"
)

// Every refusal of issue 4 point 3: nothing of the refused declaration is
// applied, the last applied one stays the target, and the reason is said.
func TestRefusalsApplyNothing(t *testing.T) {
	t.Parallel()
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherSigner, err := signature.LoadECDSASignerVerifier(other, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		want error
		// bad turns the (signed) branch of a good next declaration into a bad one.
		bad func(f *fixture, d *declaration.Declaration, s sealed) Branch
	}{
		{"unsigned", ErrUnsigned, func(f *fixture, d *declaration.Declaration, s sealed) Branch {
			br := f.branch(d, s)
			br.Signature = nil
			return br
		}},
		{"empty signature", ErrUnsigned, func(f *fixture, d *declaration.Declaration, s sealed) Branch {
			br := f.branch(d, s)
			br.Signature = []byte("\n")
			return br
		}},
		{"signed by another key", ErrBadSignature, func(f *fixture, d *declaration.Declaration, s sealed) Branch {
			br := f.branch(d, s)
			br.Signature = signBlob(t, otherSigner, br.Declaration)
			return br
		}},
		{"altered after signing", ErrBadSignature, func(f *fixture, d *declaration.Declaration, s sealed) Branch {
			br := f.branch(d, s)
			br.Declaration = []byte(strings.Replace(string(br.Declaration), "b=2", "b=3", 1))
			return br
		}},
		{"sealed file altered", ErrSealedMismatch, func(f *fixture, d *declaration.Declaration, s sealed) Branch {
			br := f.branch(d, s)
			ct := append([]byte{}, s.ct...)
			ct[len(ct)-1] ^= 1
			br.Sealed[s.ref.Sealed] = ct
			return br
		}},
		{"sealed file missing", ErrSealedMismatch, func(f *fixture, d *declaration.Declaration, s sealed) Branch {
			br := f.branch(d, s)
			delete(br.Sealed, s.ref.Sealed)
			return br
		}},
		{"another node", ErrWrongNode, func(f *fixture, d *declaration.Declaration, s sealed) Branch {
			d.Node = "n2"
			return f.branch(d, s)
		}},
		{"another mesh", ErrWrongMesh, func(f *fixture, d *declaration.Declaration, s sealed) Branch {
			d.Mesh = "elsewhere"
			return f.branch(d, s)
		}},
		{"replay of a lower generation", ErrReplay, func(f *fixture, d *declaration.Declaration, s sealed) Branch {
			d.Generation = 1
			return f.branch(d, s)
		}},
		{"same generation, other content", ErrReplay, func(f *fixture, d *declaration.Declaration, s sealed) Branch {
			d.Generation--
			return f.branch(d, s)
		}},
		{"a path outside the roots", ErrPathPolicy, func(f *fixture, d *declaration.Declaration, s sealed) Branch {
			d.Resources = append(d.Resources, fileRes("m/escape", "/etc/hostd-test-must-not-exist", "x"))
			return f.branch(d, s)
		}},
		{"a mount outside the roots", ErrPathPolicy, func(f *fixture, d *declaration.Declaration, s sealed) Branch {
			d.Resources[2].Container.Mounts = []declaration.Mount{{Source: "/etc", Target: "/host-etc"}}
			return f.branch(d, s)
		}},
		{"an action", ErrInvalid, func(f *fixture, d *declaration.Declaration, s sealed) Branch {
			br := f.branch(d, s)
			br.Declaration = []byte(strings.Replace(string(br.Declaration), `"kind": "directory"`, `"kind": "action"`, 1))
			br.Signature = signBlob(t, f.signer, br.Declaration)
			return br
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{})
			f.gen = 1
			good := f.decl(fileRes("m/a", f.path("a.conf"), "a=1"))
			f.mustApply(good)

			s := f.seal("token", 1, "refused-secret-value")
			next := f.decl(
				dirRes("m/dir", f.path("newdir")),
				fileRes("m/b", f.path("b.conf"), "b=2"),
				ctrRes("m/web", declaration.Container{Name: f.cname("web"), Command: sleeper}),
				declaration.Resource{ID: "m/token", Kind: declaration.KindFile, Module: "m",
					File: &declaration.File{Path: f.path("token"), Mode: "0600", Secret: s.ref}},
			)
			adoptErr := f.host.Adopt(tc.bad(f, next, s))
			var refusal *Refusal
			if !errors.As(adoptErr, &refusal) || !errors.Is(adoptErr, tc.want) {
				t.Fatalf("adopt: %v, want a refusal for %v", adoptErr, tc.want)
			}
			rep, err := f.host.ApplyTarget(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if rep.Attempted != good.Generation || len(rep.Resources) != 1 {
				t.Fatalf("the target moved: attempted %d with %d resources", rep.Attempted, len(rep.Resources))
			}
			for _, p := range []string{"b.conf", "newdir", "token"} {
				if _, err := os.Lstat(f.path(p)); !os.IsNotExist(err) {
					t.Fatalf("%s was made from a refused declaration", p)
				}
			}
			if _, err := os.Lstat("/etc/hostd-test-must-not-exist"); !os.IsNotExist(err) {
				t.Fatal("a path outside the roots was written")
			}
			if len(f.containers()) != 0 {
				t.Fatalf("containers from a refused declaration: %v", f.containers())
			}
			if strings.Contains(adoptErr.Error(), "refused-secret-value") {
				t.Fatal("the refusal carries a secret")
			}
		})
	}
}

// Equal generation with identical content is a no-op, not a replay.
func TestSameDeclarationAgainIsNoOp(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	d := f.decl(fileRes("m/a", f.path("a.conf"), "a=1"))
	br := f.branch(d)
	for i := 0; i < 2; i++ {
		if err := f.host.Adopt(br); err != nil {
			t.Fatalf("adopt %d: %v", i, err)
		}
	}
}

// A symbolic link planted under the root cannot carry a write elsewhere.
func TestSymlinkUnderRootCannotEscape(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	outside := t.TempDir()
	if err := os.Symlink(outside, f.path("link")); err != nil {
		t.Fatal(err)
	}
	rep, err := f.apply(f.decl(fileRes("m/x", f.path("link/x"), "x")))
	if !errors.Is(err, ErrPathPolicy) {
		t.Fatalf("error %v, want the path policy", err)
	}
	expectOutcome(t, rep, "m/x", declaration.Failed)
	if _, err := os.Lstat(outside + "/x"); !os.IsNotExist(err) {
		t.Fatal("the write went through the link")
	}
}

// An extra root allowed by the local configuration may be written.
func TestExtraRootsAreAllowed(t *testing.T) {
	t.Parallel()
	extra := t.TempDir()
	f := newFixture(t, fixtureOptions{ExtraRoots: []string{extra}})
	rep := f.mustApply(f.decl(fileRes("m/x", extra+"/x.conf", "x"), dirRes("m/d", extra+"/d")))
	expectOutcome(t, rep, "m/x", declaration.Created)
	if readFile(t, extra+"/x.conf") != "x" {
		t.Fatal("not written")
	}
}

// A node root that does not exist yet is made, with what is under it.
func TestRootIsMadeWhenMissing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	if err := os.Remove(f.root); err != nil {
		t.Fatal(err)
	}
	rep := f.mustApply(f.decl(fileRes("m/x", f.path("deep/er/x.conf"), "x"), dirRes("m/d", f.path("d"))))
	expectOutcome(t, rep, "m/x", declaration.Created)
	expectOutcome(t, rep, "m/d", declaration.Created)
}

// A temporary file left by a hostd killed mid-write is cleared by the next
// write of that file, and never taken for the file.
func TestStaleTempFileIsCleared(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	stale := f.path(".a[1].conf.hostd-12345")
	if err := os.WriteFile(stale, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.mustApply(f.decl(fileRes("m/a", f.path("a[1].conf"), "whole")))
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the stale temporary file is still there: %v", err)
	}
	if readFile(t, f.path("a[1].conf")) != "whole" {
		t.Fatal("not written")
	}
}

// While one hostd applies, another cannot take the state lock; once it is
// released, it can.
func TestStateLock(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	unlock, err := f.host.Lock()
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.Open(filepath.Join(f.cfg.StateDir, "lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("a second lock while the first is held: %v", err)
	}
	unlock()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("the lock after release: %v", err)
	}
}

// A write that fails says which file, and why, but not the temporary file's
// name.
func TestWriteErrorNamesTheTarget(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	target := f.path("ro/x.conf")
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	// A directory in the way of the rename.
	if err := os.MkdirAll(target+"/inside", 0o755); err != nil {
		t.Fatal(err)
	}
	err := writeAtomic(target, []byte("x"), 0o644, -1, -1)
	if err == nil || !strings.Contains(err.Error(), "write "+target+": rename into place: ") || strings.Contains(err.Error(), tempSuffix) {
		t.Fatalf("error %v", err)
	}
	if left, _ := filepath.Glob(filepath.Dir(target) + "/.*" + tempSuffix + "*"); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}
