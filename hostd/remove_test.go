package hostd

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshgen/meshgen/hostd/declaration"
)

func secretRes(id, path string, s sealed) declaration.Resource {
	return declaration.Resource{ID: id, Kind: declaration.KindFile, Module: "m",
		File: &declaration.File{Path: path, Mode: "0600", Secret: s.ref}}
}

// leaks collects everything hostd said or recorded, to be searched for
// plaintexts.
type leaks struct {
	f    *fixture
	outs []string
}

func (l *leaks) keep(rep declaration.Report, err error) {
	b, _ := json.Marshal(rep)
	l.outs = append(l.outs, string(b), FormatText(rep), Textfile(rep))
	if err != nil {
		l.outs = append(l.outs, err.Error())
	}
}

// check fails when any plaintext is in a report, an error or a file of the
// state directory.
func (l *leaks) check(t *testing.T, plaintexts ...string) {
	t.Helper()
	outs := slices.Clone(l.outs)
	filepath.WalkDir(l.f.cfg.StateDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			outs = append(outs, string(b))
		}
		return nil
	})
	for _, out := range outs {
		for _, v := range plaintexts {
			if strings.Contains(out, v) {
				t.Fatalf("a secret's plaintext leaked into a report, an error or the state")
			}
		}
	}
}

// absent is the content a path must not have: it must not exist.
const absent = "\x00absent"

// expectFiles checks each path's content, or that it is absent.
func expectFiles(t *testing.T, want map[string]string) {
	t.Helper()
	for p, w := range want {
		b, err := os.ReadFile(p)
		switch {
		case w == absent && !os.IsNotExist(err):
			t.Errorf("%s exists (%v), want it removed", p, err)
		case w != absent && err != nil:
			t.Errorf("%s: %v, want it kept", p, err)
		case w != absent && string(b) != w:
			t.Errorf("%s holds %d bytes, not the %d wanted", p, len(b), len(w))
		}
	}
}

// Design 27, rotation: a file written from a secret that the next generation
// no longer declares at that path is removed after the apply and reported;
// every other file stays. Each case is a sequence of generations on one node.
func TestUndeclaredSecretFiles(t *testing.T) {
	t.Parallel()
	type gen struct {
		resources func(f *fixture, s map[string]sealed) []declaration.Resource
		// removed are the paths (under the root) the apply must report removed.
		removed []string
		// files are the contents (or absent) paths must have after the apply.
		files map[string]string
		// fails says the apply fails.
		fails bool
	}
	one, two, three := "pw-one-3c9e1f", "pw-two-a07d55", "pw-three-6be204"
	cases := []struct {
		name string
		gens []gen
	}{{
		name: "a secret file no longer declared is removed",
		gens: []gen{{
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource {
				return []declaration.Resource{secretRes("m/token", f.path("token"), s["one"]), fileRes("m/conf", f.path("app.conf"), "a")}
			},
			files: map[string]string{"token": one, "app.conf": "a"},
		}, {
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource {
				return []declaration.Resource{fileRes("m/conf", f.path("app.conf"), "a")}
			},
			removed: []string{"token"},
			files:   map[string]string{"token": absent, "app.conf": "a"},
		}, {
			// Removed once: the record went with the file.
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource { return nil },
			files:     map[string]string{"token": absent, "app.conf": "a"},
		}},
	}, {
		name: "a rotation's staged next value goes when the rotation ends",
		gens: []gen{{
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource {
				return []declaration.Resource{secretRes("m/db", f.path("db/password"), s["one"]),
					secretRes("m/db-next", f.path("db/password.next"), s["two"]),
					secretRes("m/db-second", f.path("db/second"), s["three"])}
			},
			files: map[string]string{"db/password": one, "db/password.next": two, "db/second": three},
		}, {
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource {
				return []declaration.Resource{secretRes("m/db", f.path("db/password"), s["two"])}
			},
			removed: []string{"db/password.next", "db/second"},
			files:   map[string]string{"db/password": two, "db/password.next": absent, "db/second": absent},
		}},
	}, {
		name: "a content file no longer declared stays",
		gens: []gen{{
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource {
				return []declaration.Resource{fileRes("m/conf", f.path("app.conf"), "a")}
			},
			files: map[string]string{"app.conf": "a"},
		}, {
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource { return nil },
			files:     map[string]string{"app.conf": "a"},
		}},
	}, {
		name: "a create-once secret file no longer declared stays",
		gens: []gen{{
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource {
				r := secretRes("m/seed", f.path("seed"), s["one"])
				r.File.CreateOnce = true
				return []declaration.Resource{r}
			},
			files: map[string]string{"seed": one},
		}, {
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource { return nil },
			files:     map[string]string{"seed": one},
		}},
	}, {
		name: "a secret path declared again with a new version stays with it",
		gens: []gen{{
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource {
				return []declaration.Resource{secretRes("m/token", f.path("token"), s["one"])}
			},
			files: map[string]string{"token": one},
		}, {
			// Another resource ID at the same path: still declared.
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource {
				return []declaration.Resource{secretRes("other/token", f.path("token"), s["two"])}
			},
			files: map[string]string{"token": two},
		}, {
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource { return nil },
			removed:   []string{"token"},
			files:     map[string]string{"token": absent},
		}},
	}, {
		name: "a secret path that becomes a content file stays, then and after",
		gens: []gen{{
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource {
				return []declaration.Resource{secretRes("m/token", f.path("token"), s["one"])}
			},
			files: map[string]string{"token": one},
		}, {
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource {
				return []declaration.Resource{fileRes("m/token", f.path("token"), "public")}
			},
			files: map[string]string{"token": "public"},
		}, {
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource { return nil },
			files:     map[string]string{"token": "public"},
		}},
	}, {
		name: "a secret path that becomes a create-once file stays, then and after",
		gens: []gen{{
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource {
				return []declaration.Resource{secretRes("m/token", f.path("token"), s["one"])}
			},
			files: map[string]string{"token": one},
		}, {
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource {
				r := fileRes("m/token", f.path("token"), "seed")
				r.File.CreateOnce = true
				return []declaration.Resource{r}
			},
			files: map[string]string{"token": one},
		}, {
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource { return nil },
			files:     map[string]string{"token": one},
		}},
	}, {
		name: "a secret path a declared container still mounts stays",
		gens: []gen{{
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource {
				return []declaration.Resource{secretRes("m/token", f.path("token"), s["one"]),
					ctrRes("m/app", declaration.Container{Name: f.cname("app"), Command: sleeper,
						Mounts: []declaration.Mount{{Source: f.path("token"), Target: "/run/secrets/token", ReadOnly: true}}})}
			},
			files: map[string]string{"token": one},
		}, {
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource {
				return []declaration.Resource{ctrRes("m/app", declaration.Container{Name: f.cname("app"), Command: sleeper,
					Mounts: []declaration.Mount{{Source: f.path("token"), Target: "/run/secrets/token", ReadOnly: true}}})}
			},
			files: map[string]string{"token": one},
		}},
	}, {
		name: "a secret path that becomes a directory stays",
		gens: []gen{{
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource {
				return []declaration.Resource{secretRes("m/token", f.path("token"), s["one"])}
			},
			files: map[string]string{"token": one},
		}, {
			// The directory cannot be made over the file: the apply fails,
			// and a path still named is not removed either way.
			resources: func(f *fixture, s map[string]sealed) []declaration.Resource {
				return []declaration.Resource{dirRes("m/token", f.path("token"))}
			},
			files: map[string]string{"token": one},
			fails: true,
		}},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{})
			s := map[string]sealed{"one": f.seal("one", 1, one), "two": f.seal("two", 1, two), "three": f.seal("three", 1, three)}
			all := []sealed{s["one"], s["two"], s["three"]}
			l := &leaks{f: f}
			for i, g := range c.gens {
				rep, err := f.apply(f.decl(g.resources(f, s)...), all...)
				l.keep(rep, err)
				if (err != nil) != g.fails {
					t.Fatalf("generation %d: error %v, want failure %v\n%s", i+1, err, g.fails, FormatText(rep))
				}
				var want []string
				for _, p := range g.removed {
					want = append(want, f.path(p))
				}
				if !slices.Equal(rep.RemovedFiles, want) {
					t.Fatalf("generation %d: removed %q, want %q\n%s", i+1, rep.RemovedFiles, want, FormatText(rep))
				}
				if len(rep.Removed) != 0 {
					t.Fatalf("generation %d: removed containers %q", i+1, rep.Removed)
				}
				if len(rep.LeftFiles) != 0 {
					t.Fatalf("generation %d: left %v", i+1, rep.LeftFiles)
				}
				files := map[string]string{}
				for p, w := range g.files {
					files[f.path(p)] = w
				}
				expectFiles(t, files)
				for _, p := range want {
					if !strings.Contains(FormatText(rep), "removed    file      "+p+": secret no longer declared\n") {
						t.Fatalf("the text report does not show %s removed:\n%s", p, FormatText(rep))
					}
				}
				if strings.Count(Textfile(rep), `kind="file"} `+strconv.Itoa(len(want))+"\n") != 1 {
					t.Fatalf("the textfile does not count %d files removed:\n%s", len(want), Textfile(rep))
				}
			}
			l.check(t, one, two, three)
		})
	}
}

// A recorded secret path that something else took since hostd wrote it is
// never followed: the link (or directory) and what it leads to stay, and the
// report says why. A link at the path itself holds nothing of hostd's, so the
// record goes; a parent directory that now leads outside the roots may still
// hide the file hostd wrote, so the record stays and each apply says so.
func TestRemovalFollowsNoSymlink(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// replace puts something in place of the secret file (root/d/token)
		// and returns the path whose content must survive.
		replace func(t *testing.T, f *fixture) (keep string)
		// reason is part of the reason reported.
		reason string
		// forgotten says the next apply no longer reports it.
		forgotten bool
	}{{
		name: "the file replaced by a link to a file outside the roots",
		replace: func(t *testing.T, f *fixture) string {
			outside := filepath.Join(t.TempDir(), "precious")
			writeTestFile(t, outside, "precious")
			mustReplaceWithLink(t, outside, f.path("d/token"))
			return outside
		},
		reason: "it is a symbolic link now", forgotten: true,
	}, {
		name: "the file replaced by a relative link to a file under the root",
		replace: func(t *testing.T, f *fixture) string {
			writeTestFile(t, f.path("d/other"), "precious")
			mustReplaceWithLink(t, "other", f.path("d/token"))
			return f.path("d/other")
		},
		reason: "it is a symbolic link now", forgotten: true,
	}, {
		name: "the file replaced by a directory",
		replace: func(t *testing.T, f *fixture) string {
			if err := os.Remove(f.path("d/token")); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(f.path("d/token"), 0o755); err != nil {
				t.Fatal(err)
			}
			writeTestFile(t, f.path("d/token/data"), "precious")
			return f.path("d/token/data")
		},
		reason: "it is a directory now", forgotten: true,
	}, {
		name: "its directory moved outside the roots and linked back",
		replace: func(t *testing.T, f *fixture) string {
			outside := filepath.Join(t.TempDir(), "d")
			if err := os.Rename(f.path("d"), outside); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, f.path("d")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(outside, "token")
		},
		reason: "outside the node's roots",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{})
			s := f.seal("token", 1, "pw-link-0d93b1")
			f.mustApply(f.decl(dirRes("m/d", f.path("d")), secretRes("m/token", f.path("d/token"), s)), s)
			keep := c.replace(t, f)
			before := readFile(t, keep)

			for i := range 2 {
				rep := f.mustApply(f.decl())
				if len(rep.RemovedFiles) != 0 {
					t.Fatalf("apply %d removed %q", i+1, rep.RemovedFiles)
				}
				if readFile(t, keep) != before {
					t.Fatalf("apply %d: what the path led to changed", i+1)
				}
				if _, err := os.Lstat(f.path("d/token")); err != nil {
					t.Fatalf("apply %d: what took the path went: %v", i+1, err)
				}
				reported := len(rep.LeftFiles) == 1 && rep.LeftFiles[0].Path == f.path("d/token") &&
					strings.Contains(rep.LeftFiles[0].Reason, c.reason)
				if want := i == 0 || !c.forgotten; reported != want {
					t.Fatalf("apply %d: left %+v, want it reported %v with %q", i+1, rep.LeftFiles, want, c.reason)
				}
				if reported && !strings.Contains(FormatText(rep), "  left       file      "+f.path("d/token")+": secret ") {
					t.Fatalf("the text report does not show the file left:\n%s", FormatText(rep))
				}
				if !rep.OK() || (reported && !strings.Contains(Textfile(rep), "hostd_secret_files_left{"+`mesh="`+f.mesh+`",node="n1"} 1`)) {
					t.Fatalf("apply %d: report\n%s\n%s", i+1, FormatText(rep), Textfile(rep))
				}
			}
		})
	}
}

// mustReplaceWithLink puts a symbolic link to target at p, in one rename, as
// an attacker with write access to the directory could.
func mustReplaceWithLink(t *testing.T, target, p string) {
	t.Helper()
	tmp := p + ".link"
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

// An apply that fails removes no secret file: a container the failure gated
// still runs as the last generation made it, mounting the file, and must
// survive a restart. The report lists the file as left. The next apply that
// succeeds moves the container to the new file and removes the old one.
func TestFailedApplyRemovesNoSecretFile(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	oldPW, newPW := "pw-old-b41c07", "pw-new-e2f9a6"
	sOld, sNew := f.seal("old", 1, oldPW), f.seal("new", 1, newPW)
	web := func(secret string) declaration.Resource {
		return ctrRes("m/web", declaration.Container{Name: f.cname("web"), Command: sleeper,
			Mounts: []declaration.Mount{{Source: f.path(secret), Target: "/run/secrets/pw", ReadOnly: true}}})
	}
	step := func(exit int) declaration.Resource {
		return ctrRes("m/check", declaration.Container{Name: f.cname("check"), RunOnce: true,
			Command: []string{"sh", "-c", "exit " + strconv.Itoa(exit)}})
	}
	l := &leaks{f: f}
	rep, err := f.apply(f.decl(secretRes("m/old", f.path("old"), sOld), web("old")), sOld)
	l.keep(rep, err)
	if err != nil {
		t.Fatal(err)
	}

	// The next generation moves web to another secret, but a step before it
	// fails: web is gated and still mounts the old file.
	for attempt := 1; attempt <= 2; attempt++ {
		rep, err = f.apply(f.decl(secretRes("m/new", f.path("new"), sNew), step(3), web("new")), sNew)
		l.keep(rep, err)
		if err == nil {
			t.Fatal("the apply with a failing step succeeded")
		}
		expectOutcome(t, rep, "m/web", declaration.Gated)
		if len(rep.RemovedFiles) != 0 {
			t.Fatalf("a failed apply removed %q", rep.RemovedFiles)
		}
		if len(rep.LeftFiles) != 1 || rep.LeftFiles[0].Path != f.path("old") || rep.LeftFiles[0].Reason != heldReason {
			t.Fatalf("left %+v", rep.LeftFiles)
		}
		if !strings.Contains(FormatText(rep), "  left       file      "+f.path("old")+": secret no longer declared, kept until an apply succeeds") {
			t.Fatalf("text report:\n%s", FormatText(rep))
		}
		expectFiles(t, map[string]string{f.path("old"): oldPW, f.path("new"): newPW})
	}
	f.mustPodman("restart", "-t", "0", f.cname("web"))
	if got := f.mustPodman("exec", f.cname("web"), "cat", "/run/secrets/pw"); got != oldPW {
		t.Fatal("the gated container does not read the old secret after a restart")
	}

	// Fixed: web moves to the new file, and only then does the old one go.
	rep, err = f.apply(f.decl(secretRes("m/new", f.path("new"), sNew), step(0), web("new")), sNew)
	l.keep(rep, err)
	if err != nil {
		t.Fatalf("%v\n%s", err, FormatText(rep))
	}
	expectOutcome(t, rep, "m/web", declaration.Recreated)
	if !slices.Equal(rep.RemovedFiles, []string{f.path("old")}) || len(rep.LeftFiles) != 0 {
		t.Fatalf("removed %q, left %+v", rep.RemovedFiles, rep.LeftFiles)
	}
	expectFiles(t, map[string]string{f.path("old"): absent, f.path("new"): newPW})
	if got := f.mustPodman("exec", f.cname("web"), "cat", "/run/secrets/pw"); got != newPW {
		t.Fatal("web does not read the new secret")
	}
	l.check(t, oldPW, newPW)
}

// A node leaving the mesh gets a declaration with no resources: every secret
// file and container hostd made goes; directories, the data in them, content
// files and create-once files stay.
func TestEmptyDeclarationRemovesSecretsKeepsData(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	values := []string{"pw-db-5e7a20", "pw-env-91cc3d", "pw-seed-0af4e8"}
	sDB, sEnv, sSeed := f.seal("db", 1, values[0]), f.seal("env", 1, values[1]), f.seal("seed", 1, values[2])
	sEnv.ref.EnvVar = "API_KEY"
	seed := secretRes("m/seed", f.path("app/seed"), sSeed)
	seed.File.CreateOnce = true
	data := f.path("app/data")
	l := &leaks{f: f}
	rep, err := f.apply(f.decl(
		dirRes("m/data", data),
		secretRes("m/db", f.path("app/secrets/db"), sDB),
		secretRes("m/env", f.path("app/secrets/api.env"), sEnv),
		seed,
		fileRes("m/conf", f.path("app/app.conf"), "listen 80\n"),
		ctrRes("m/app", declaration.Container{Name: f.cname("app"), Command: []string{"sh", "-c", "echo kept > /data/written; exec sleep 3600"},
			Mounts:   []declaration.Mount{{Source: data, Target: "/data"}, {Source: f.path("app/secrets/db"), Target: "/run/secrets/db", ReadOnly: true}},
			EnvFiles: []declaration.EnvFile{{File: "m/env", Reason: "the image reads API_KEY only from its environment"}}}),
	), sDB, sEnv, sSeed)
	l.keep(rep, err)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, err := os.Stat(data + "/written"); return err == nil })

	rep, err = f.apply(f.decl())
	l.keep(rep, err)
	if err != nil {
		t.Fatalf("%v\n%s", err, FormatText(rep))
	}
	if !slices.Equal(rep.Removed, []string{f.cname("app")}) {
		t.Fatalf("removed containers %q", rep.Removed)
	}
	if want := []string{f.path("app/secrets/api.env"), f.path("app/secrets/db")}; !slices.Equal(rep.RemovedFiles, want) {
		t.Fatalf("removed files %q, want %q", rep.RemovedFiles, want)
	}
	if _, ok := f.containers()[f.cname("app")]; ok {
		t.Fatal("the container is still there")
	}
	expectFiles(t, map[string]string{
		f.path("app/secrets/db"): absent, f.path("app/secrets/api.env"): absent,
		f.path("app/seed"): values[2], f.path("app/app.conf"): "listen 80\n", data + "/written": "kept\n",
	})
	if fi, err := os.Stat(f.path("app/secrets")); err != nil || !fi.IsDir() {
		t.Fatalf("the directory the secrets were in went: %v", err)
	}
	st, err := f.host.loadState()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.SecretFiles) != 0 || st.Generation != 2 {
		t.Fatalf("state after leaving: secret files %v, generation %d", st.SecretFiles, st.Generation)
	}
	l.check(t, values...)
}

// A hostd killed (SIGKILL) at any point of a secret file's life leaves a
// state from which a fresh hostd finishes: each case makes the disk and
// state.json exactly as a kill at that point leaves them, then a new Host
// (a new process) applies the next generation, which no longer declares the
// file.
func TestSecretFileCrashWindows(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// leave makes the disk and state as the kill left them, after
		// generation 1 declared root/token and was applied.
		leave func(t *testing.T, f *fixture, s sealed)
	}{{
		name: "killed between the removal and its record",
		leave: func(t *testing.T, f *fixture, s sealed) {
			if err := os.Remove(f.path("token")); err != nil {
				t.Fatal(err)
			}
		},
	}, {
		name: "killed between the record of the path and the write",
		leave: func(t *testing.T, f *fixture, s sealed) {
			if err := os.Remove(f.path("token")); err != nil {
				t.Fatal(err)
			}
			editState(t, f, func(st *state) { st.Applied = map[string]string{} })
		},
	}, {
		// A node upgraded from a hostd that did not record secret files:
		// the first apply that still declares the file records it.
		name: "written by a hostd that did not record secret files",
		leave: func(t *testing.T, f *fixture, s sealed) {
			editState(t, f, func(st *state) { st.SecretFiles = nil })
			rep := f.mustApply(f.decl(secretRes("m/token", f.path("token"), s)), s)
			expectOutcome(t, rep, "m/token", declaration.Unchanged)
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{})
			s := f.seal("token", 1, "pw-crash-7c1e55")
			f.mustApply(f.decl(secretRes("m/token", f.path("token"), s), fileRes("m/conf", f.path("app.conf"), "a")), s)
			c.leave(t, f, s)

			h, err := New(f.cfg)
			if err != nil {
				t.Fatal(err)
			}
			f.host = h
			rep := f.mustApply(f.decl(fileRes("m/conf", f.path("app.conf"), "a")))
			if !slices.Equal(rep.RemovedFiles, []string{f.path("token")}) {
				t.Fatalf("removed %q, want the token\n%s", rep.RemovedFiles, FormatText(rep))
			}
			expectFiles(t, map[string]string{f.path("token"): absent, f.path("app.conf"): "a"})
			st, err := h.loadState()
			if err != nil {
				t.Fatal(err)
			}
			if len(st.SecretFiles) != 0 {
				t.Fatalf("secret files still recorded: %v", st.SecretFiles)
			}
			if rep := f.mustApply(f.decl(fileRes("m/conf", f.path("app.conf"), "a"))); len(rep.RemovedFiles)+len(rep.LeftFiles) != 0 {
				t.Fatalf("the apply after reports %q, %+v", rep.RemovedFiles, rep.LeftFiles)
			}
		})
	}
}

// editState changes state.json as a hostd killed at some point left it.
func editState(t *testing.T, f *fixture, edit func(*state)) {
	t.Helper()
	st, err := f.host.loadState()
	if err != nil {
		t.Fatal(err)
	}
	edit(st)
	if err := f.host.saveState(st); err != nil {
		t.Fatal(err)
	}
}

// A hostd killed (SIGKILL) while it removes secret files leaves a state the
// next hostd finishes from. The node holds 300 recorded secret files that the
// new generation no longer declares; hostd, as its own process, is killed as
// soon as the first is gone. Wherever the kill lands, the state loads, and a
// fresh hostd removes what is left, forgets every record, and reports each
// path removed.
func TestKilledWhileRemovingSecretFiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.mustApply(f.decl(fileRes("m/conf", f.path("app.conf"), "a")))
	var paths []string
	editState(t, f, func(st *state) {
		for i := range 300 {
			p := f.path(fmt.Sprintf("secrets/%03d", i))
			paths = append(paths, p)
			st.SecretFiles[p] = fmt.Sprintf("m/s%03d", i)
		}
	})
	if err := os.MkdirAll(f.path("secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		writeTestFile(t, p, "pw-killed-8d02ce")
	}
	if err := f.host.Adopt(f.branch(f.decl(fileRes("m/conf", f.path("app.conf"), "a")))); err != nil {
		t.Fatal(err)
	}
	hostdProcess := f.hostdProcess(t)
	cmd := hostdProcess()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Lstat(paths[0]); os.IsNotExist(err) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	st, err := f.host.loadState()
	if err != nil {
		t.Fatalf("the state after the kill does not load: %v", err)
	}
	var recorded []string
	for p := range st.SecretFiles {
		if !slices.Contains(paths, p) {
			t.Fatalf("an unknown path %s is recorded", p)
		}
		recorded = append(recorded, p)
	}
	slices.Sort(recorded)
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil && !slices.Contains(recorded, p) {
			t.Fatalf("%s is still there and no longer recorded", p)
		}
	}

	again := hostdProcess()
	out, err := again.CombinedOutput()
	if err != nil {
		t.Fatalf("the apply after the kill failed: %v\n%s", err, out)
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Fatalf("%s is still there after the apply that followed the kill: %v", p, err)
		}
	}
	if st, err = f.host.loadState(); err != nil || len(st.SecretFiles) != 0 || st.Generation != 2 {
		t.Fatalf("state after: %v, %d secret files recorded, generation %d", err, len(st.SecretFiles), st.Generation)
	}
	rep, err := f.host.Status()
	if err != nil {
		t.Fatal(err)
	}
	// Every path still recorded after the kill is reported removed, those
	// the killed hostd removed too: its report was never written.
	if !slices.Equal(rep.RemovedFiles, recorded) {
		t.Fatalf("the report lists %d removed, %d were recorded after the kill", len(rep.RemovedFiles), len(recorded))
	}
	if readFile(t, f.path("app.conf")) != "a" {
		t.Fatal("the content file changed")
	}
}
