package hostd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/meshgen/meshgen/hostd/declaration"
)

// gitRemote is a real bare repository with one work tree per branch.
type gitRemote struct {
	t    testing.TB
	base string // holds mesh.git
	bare string
	work map[string]string
	// sshAcceptEnv has the ssh server pass GIT_PROTOCOL from the client to
	// git, as OpenSSH does with "AcceptEnv GIT_PROTOCOL"; without it the
	// server refuses the variable and git answers in protocol v0.
	sshAcceptEnv bool
}

func newGitRemote(t testing.TB) *gitRemote {
	t.Helper()
	base := t.TempDir()
	g := &gitRemote{t: t, base: base, bare: filepath.Join(base, "mesh.git"), work: map[string]string{}}
	g.git("", "init", "-q", "--bare", g.bare)
	return g
}

func (g *gitRemote) git(dir string, args ...string) string {
	g.t.Helper()
	if dir != "" {
		args = append([]string{"-C", dir}, args...)
	}
	cmd := exec.Command("git", args...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		g.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit commits files (replacing the tree) on branch and pushes it; it
// returns the commit hash.
func (g *gitRemote) commit(branch string, files map[string][]byte) string {
	g.t.Helper()
	w, ok := g.work[branch]
	if !ok {
		w = filepath.Join(g.t.TempDir(), "w")
		g.git("", "init", "-q", "-b", "x", w)
		g.work[branch] = w
	}
	entries, _ := os.ReadDir(w)
	for _, e := range entries {
		if e.Name() != ".git" {
			os.RemoveAll(filepath.Join(w, e.Name()))
		}
	}
	for name, data := range files {
		p := filepath.Join(w, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			g.t.Fatal(err)
		}
	}
	g.git(w, "add", "-A")
	g.git(w, "commit", "-q", "--allow-empty", "-m", "update "+branch)
	g.git(w, "push", "-q", "--force", g.bare, "HEAD:refs/heads/"+branch)
	return g.git(w, "rev-parse", "HEAD")
}

// publish commits a branch as the reconciler writes node/<name>.
func (g *gitRemote) publish(node string, br Branch) string {
	files := map[string][]byte{DeclarationFile: br.Declaration}
	if br.Signature != nil {
		files[SignatureFile] = br.Signature
	}
	for p, ct := range br.Sealed {
		files[p] = ct
	}
	return g.commit("node/"+node, files)
}

func (g *gitRemote) fileURL() string { return "file://" + g.bare }

// url serves the repository over transport (file, git or http) and returns
// its URL.
func (g *gitRemote) url(transport string) string {
	switch transport {
	case "git":
		return g.daemon()
	case "http":
		return g.smartHTTP()
	}
	return g.fileURL()
}

// smartHTTP serves the repository with `git http-backend` (git's own smart
// HTTP server, as CGI) on 127.0.0.1 and returns its http:// URL.
func (g *gitRemote) smartHTTP() string {
	g.t.Helper()
	g.git("", "--git-dir", g.bare, "config", "http.receivepack", "true")
	backend := &cgi.Handler{
		Path: "/usr/lib/git-core/git-http-backend",
		Env:  []string{"GIT_PROJECT_ROOT=" + g.base, "GIT_HTTP_EXPORT_ALL=1"},
	}
	srv := httptest.NewServer(backend)
	g.t.Cleanup(srv.Close)
	return srv.URL + "/mesh.git"
}

// daemon serves the repository with `git daemon` on 127.0.0.1 and returns
// its git:// URL.
func (g *gitRemote) daemon() string {
	g.t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack",
		"--base-path="+g.base, "--listen=127.0.0.1", fmt.Sprintf("--port=%d", port), g.base)
	if err := cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitFor(g.t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "git://" + addr + "/mesh.git"
}

// Fetch takes only node/<name>, shallow, without tags, over file:// and
// git://; a poll with nothing new says so and changes nothing.
func TestFetchOnlyTheNodeBranch(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"file", "git", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			g := newGitRemote(t)
			url := g.url(transport)
			f := newFixture(t, fixtureOptions{Remote: url})
			main := g.commit("main", map[string][]byte{"mesh.yaml": []byte("name: x\n")})
			g.git("", "--git-dir", g.bare, "tag", "v1", main)
			g.publish("n2", f.branch(f.decl(fileRes("m/a", f.path("a"), "n2"))))
			g.publish("n1", f.branch(f.decl(fileRes("m/a", f.path("a"), "old"))))
			s := f.seal("token", 1, "fetch-secret")
			br := f.branch(f.decl(declaration.Resource{ID: "m/t", Kind: declaration.KindFile, Module: "m",
				File: &declaration.File{Path: f.path("t"), Mode: "0600", Secret: s.ref}}), s)
			head := g.publish("n1", br)

			got, err := f.host.Fetch(context.Background(), "")
			if err != nil {
				t.Fatal(err)
			}
			if got.Commit != head || string(got.Declaration) != string(br.Declaration) ||
				string(got.Signature) != string(br.Signature) || string(got.Sealed[s.ref.Sealed]) != string(s.ct) || len(got.Sealed) != 1 {
				t.Fatalf("fetched %s with %d sealed files, want %s", got.Commit, len(got.Sealed), head)
			}
			repo, err := git.PlainOpen(filepath.Join(f.cfg.StateDir, "git"))
			if err != nil {
				t.Fatal(err)
			}
			refs, _ := repo.References()
			var names []string
			refs.ForEach(func(r *plumbing.Reference) error {
				if r.Type() == plumbing.HashReference {
					names = append(names, r.Name().String())
				}
				return nil
			})
			if len(names) != 1 || names[0] != "refs/remotes/origin/node/n1" {
				t.Fatalf("the cache holds refs %v, want only node/n1", names)
			}
			shallow, err := repo.Storer.Shallow()
			if err != nil || len(shallow) != 1 || shallow[0].String() != head {
				t.Fatalf("shallow commits %v (%v), want just the head", shallow, err)
			}
			commit, err := repo.CommitObject(plumbing.NewHash(head))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := repo.CommitObject(commit.ParentHashes[0]); !errors.Is(err, plumbing.ErrObjectNotFound) {
				t.Fatalf("the parent commit was fetched (depth must be 1): %v", err)
			}
			if _, err := repo.CommitObject(plumbing.NewHash(main)); !errors.Is(err, plumbing.ErrObjectNotFound) {
				t.Fatalf("main was fetched: %v", err)
			}
			before := objectCount(t, repo)
			if _, err := f.host.Fetch(context.Background(), head); !errors.Is(err, ErrNothingNew) {
				t.Fatalf("second poll: %v, want nothing new", err)
			}
			if after := objectCount(t, repo); after != before {
				t.Fatalf("a poll with nothing new changed the cache: %d objects, then %d", before, after)
			}

			// Something new: the cache starts afresh, and never grows past one commit.
			next := g.publish("n1", f.branch(f.decl(fileRes("m/a", f.path("a"), "newer"))))
			if got, err := f.host.Fetch(context.Background(), head); err != nil || got.Commit != next {
				t.Fatalf("fetch of the next commit: %v, %s", err, got.Commit)
			}
			repo, err = git.PlainOpen(filepath.Join(f.cfg.StateDir, "git"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := repo.CommitObject(plumbing.NewHash(head)); !errors.Is(err, plumbing.ErrObjectNotFound) {
				t.Fatalf("the cache kept the previous commit: %v", err)
			}
		})
	}
}

func objectCount(t testing.TB, repo *git.Repository) int {
	t.Helper()
	iter, err := repo.Storer.IterEncodedObjects(plumbing.AnyObject)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	iter.ForEach(func(plumbing.EncodedObject) error { n++; return nil })
	return n
}

// Once over git:// and smart HTTP: apply, push the report to
// status/<name>, push nothing when nothing changed, refuse an unsigned commit
// (applying nothing of it and saying so in the pushed report), then move on
// when a good one arrives. The textfile follows.
func TestOnceThroughARemote(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"git", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			testOnceThrough(t, transport)
		})
	}
}

func testOnceThrough(t *testing.T, transport string) {
	g := newGitRemote(t)
	url := g.url(transport)
	f := newFixture(t, fixtureOptions{Remote: url, PushURL: url})
	f.host.cfg.Textfile = f.path("../metrics/hostd.prom")
	ctx := context.Background()
	status := func() (string, declaration.Report) {
		hash := g.git("", "--git-dir", g.bare, "rev-parse", "refs/heads/status/n1")
		var rep declaration.Report
		if err := jsonUnmarshal(g.git("", "--git-dir", g.bare, "show", "status/n1:report.json"), &rep); err != nil {
			t.Fatal(err)
		}
		return hash, rep
	}

	g.publish("n1", f.branch(f.decl(fileRes("m/a", f.path("a.conf"), "a=1"),
		ctrRes("m/web", declaration.Container{Name: f.cname("web"), Command: sleeper}))))
	rep, err := f.host.Once(ctx)
	if err != nil || !rep.OK() {
		t.Fatalf("first poll: %v\n%s", err, FormatText(rep))
	}
	expectOutcome(t, rep, "m/web", declaration.Created)
	h1, pushed := status()
	if pushed.Generation != 1 || len(pushed.Resources) != 2 || !pushed.OK() {
		t.Fatalf("pushed report: %+v", pushed)
	}
	prom := readFile(t, f.host.cfg.Textfile)
	for _, want := range []string{`hostd_apply_ok{mesh="` + f.mesh + `",node="n1"} 1`, `outcome="created"} 2`, `hostd_generation{mesh="` + f.mesh + `",node="n1"} 1`} {
		if !strings.Contains(prom, want) {
			t.Fatalf("textfile lacks %q:\n%s", want, prom)
		}
	}

	// The second poll reports "unchanged" (a new report, pushed); the third
	// says the same again and pushes nothing.
	rep, err = f.host.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	expectOutcome(t, rep, "m/web", declaration.Unchanged)
	h2, _ := status()
	if h2 == h1 {
		t.Fatal("the changed report was not pushed")
	}
	if _, err := f.host.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if h3, _ := status(); h3 != h2 {
		t.Fatal("a poll with nothing new pushed a new status")
	}

	unsigned := f.branch(f.decl(fileRes("m/a", f.path("a.conf"), "a=1"), fileRes("m/b", f.path("b.conf"), "evil")))
	unsigned.Signature = nil
	g.publish("n1", unsigned)
	rep, err = f.host.Once(ctx)
	if !errors.Is(err, ErrUnsigned) || !strings.Contains(rep.Refused, "unsigned") {
		t.Fatalf("unsigned commit: %v, refused %q", err, rep.Refused)
	}
	if _, err := os.Stat(f.path("b.conf")); !os.IsNotExist(err) {
		t.Fatal("the unsigned declaration was applied")
	}
	if st, err := f.host.Status(); err != nil || !strings.Contains(st.Refused, "unsigned") || st.Generation != 1 {
		t.Fatalf("status after a refusal: %+v, %v", st, err)
	}
	if _, pushed := status(); !strings.Contains(pushed.Refused, "unsigned") || pushed.Generation != 1 {
		t.Fatalf("the pushed report does not say it refused: %+v", pushed)
	}
	if prom := readFile(t, f.host.cfg.Textfile); !strings.Contains(prom, `hostd_refused{mesh="`+f.mesh+`",node="n1"} 1`) {
		t.Fatalf("the textfile does not say it refused:\n%s", prom)
	}
	// Polling again: still refused, still nothing applied, no fetch needed.
	if _, err := f.host.Once(ctx); !errors.Is(err, ErrUnsigned) {
		t.Fatalf("second poll of the refused commit: %v", err)
	}

	g.publish("n1", f.branch(f.decl(fileRes("m/a", f.path("a.conf"), "a=2"))))
	rep, err = f.host.Once(ctx)
	if err != nil || rep.Refused != "" || rep.Generation != 3 {
		t.Fatalf("good commit after a refused one: %v, %+v", err, rep)
	}
	if readFile(t, f.path("a.conf")) != "a=2" {
		t.Fatal("not applied")
	}
	if _, pushed := status(); pushed.Generation != 3 || pushed.Refused != "" {
		t.Fatalf("pushed %+v", pushed)
	}
}

// When the remote is down, hostd run backs off and keeps the machine at the
// last good declaration, correcting drift meanwhile.
func TestRunKeepsLastGoodWhenRemoteIsDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{Remote: "file://" + t.TempDir() + "/gone.git"})
	f.host.cfg.Interval = Duration(time.Millisecond)
	f.mustApply(f.decl(fileRes("m/a", f.path("a.conf"), "a=1")))
	os.Remove(f.path("a.conf"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errs []error
	err := f.host.Run(ctx, RunOptions{MaxBackoff: 4 * time.Millisecond, OnReport: func(_ declaration.Report, err error) {
		errs = append(errs, err)
		if len(errs) == 3 {
			cancel()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		var fe *fetchError
		if !errors.As(e, &fe) {
			t.Fatalf("error %v is not a failure to reach the remote", e)
		}
	}
	if readFile(t, f.path("a.conf")) != "a=1" {
		t.Fatal("the last good declaration was not kept applied")
	}
}

func TestNextWait(t *testing.T) {
	const i, max = time.Minute, 8 * time.Minute
	down := &fetchError{errors.New("connection refused")}
	cases := []struct {
		name string
		last time.Duration
		err  error
		want time.Duration
	}{
		{"ok", i, nil, i},
		{"ok after backoff", 4 * i, nil, i},
		{"refused: the remote answered", 4 * i, &Refusal{Reasons: []error{ErrReplay}}, i},
		{"remote down", i, down, 2 * i},
		{"still down", 2 * i, down, 4 * i},
		{"capped", 8 * i, down, max},
		{"a step failed", i, errors.New(`apply "m/seed": step exited`), 2 * i},
	}
	for _, tc := range cases {
		if got := nextWait(tc.last, i, max, tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A state directory that lost target.json fetches the branch again, though
// it did not move, and applies it.
func TestLostTargetIsFetchedAgain(t *testing.T) {
	t.Parallel()
	g := newGitRemote(t)
	f := newFixture(t, fixtureOptions{Remote: g.fileURL()})
	g.publish("n1", f.branch(f.decl(fileRes("m/a", f.path("a.conf"), "a=1"))))
	if _, err := f.host.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(f.cfg.StateDir, targetFile)); err != nil {
		t.Fatal(err)
	}
	rep, err := f.host.Once(context.Background())
	if err != nil || rep.Attempted != 1 {
		t.Fatalf("after losing the target: %v, %+v", err, rep)
	}
	expectOutcome(t, rep, "m/a", declaration.Unchanged)
}
