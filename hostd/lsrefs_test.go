package hostd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// fleetSize is how many node/* and status/* branches the big repository
// has, besides the node's own.
const fleetSize = 2000

// addFleet adds fleetSize node/* and fleetSize status/* branches, all at
// commit, none of whose names starts with node/n1.
func (g *gitRemote) addFleet(commit string) {
	g.t.Helper()
	var b strings.Builder
	for i := range fleetSize {
		fmt.Fprintf(&b, "create refs/heads/node/m%04d %s\ncreate refs/heads/status/m%04d %s\n", i, commit, i, commit)
	}
	cmd := exec.Command("git", "--git-dir", g.bare, "update-ref", "--stdin")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		g.t.Fatalf("update-ref: %v\n%s", err, out)
	}
	g.git("", "--git-dir", g.bare, "pack-refs", "--all")
}

// countingServer serves the repository with `git http-backend` and counts
// the body bytes it answers. With v0Only it drops the client's Git-Protocol
// header, as a server that does not know protocol v2 does.
type countingServer struct {
	sent     atomic.Int64
	requests atomic.Int64
	v0Only   bool
}

func (g *gitRemote) countingHTTP(v0Only bool) (*countingServer, string) {
	g.t.Helper()
	cs := &countingServer{v0Only: v0Only}
	backend := &cgi.Handler{
		Path: "/usr/lib/git-core/git-http-backend",
		Env:  []string{"GIT_PROJECT_ROOT=" + g.base, "GIT_HTTP_EXPORT_ALL=1"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.requests.Add(1)
		if cs.v0Only {
			r.Header.Del("Git-Protocol")
		}
		backend.ServeHTTP(&countingWriter{ResponseWriter: w, n: &cs.sent}, r)
	}))
	g.t.Cleanup(srv.Close)
	return cs, srv.URL + "/mesh.git"
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(n))
	return n, err
}

// countingProxy forwards TCP connections to addr and counts what addr sends
// back.
func countingProxy(t testing.TB, addr string) (*atomic.Int64, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var sent atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer s.Close()
				go func() { io.Copy(s, c); s.(*net.TCPConn).CloseWrite() }()
				io.Copy(countFirst{c, &sent}, s)
			}()
		}
	}()
	return &sent, l.Addr().String()
}

// countFirst counts bytes before writing them, so that a reader that got
// them finds them counted.
type countFirst struct {
	w io.Writer
	n *atomic.Int64
}

func (c countFirst) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return c.w.Write(p)
}

type countingReader struct {
	io.ReadWriteCloser
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.ReadWriteCloser.Read(p)
	c.n += int64(n)
	return n, err
}

// countLookup publishes node/n1 and node/n10, with or without the fleet,
// and returns how many bytes git-upload-pack sends to hostd's lookup of
// node/n1 over url (file:// or ssh://: the payload, not ssh's framing).
func countLookup(t *testing.T, g *gitRemote, url string, auth transport.AuthMethod, fleet bool) int64 {
	t.Helper()
	head := g.commit("node/n1", map[string][]byte{"x": []byte("1")})
	g.commit("node/n10", map[string][]byte{"x": []byte("10")})
	if fleet {
		g.addFleet(head)
	}
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		t.Fatal(err)
	}
	s, err := openUploadPack(t.Context(), ep, auth)
	if err != nil {
		t.Fatal(err)
	}
	c := &countingReader{ReadWriteCloser: s}
	got, err := lsRefStream(c, NodeBranch("n1"))
	s.Close()
	if err != nil || got.String() != head {
		t.Fatalf("lookup: %v, %s, want %s", err, got, head)
	}
	return c.n
}

// sshAuth is what hostd fetches with from an ssh remote with this key and
// known_hosts file.
func sshAuth(t testing.TB, key, known string) transport.AuthMethod {
	t.Helper()
	h := &Host{cfg: Config{SSHKey: key, KnownHosts: known}}
	a, err := h.auth("ssh://git@127.0.0.1/mesh.git")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A no-op poll costs the server the same number of bytes with one node
// branch as with 2,000 node and 2,000 status branches, over smart HTTP,
// git:// and file:// (protocol v2's ls-refs with a ref-prefix); a v0 smart
// HTTP server still works, at the old, growing cost.
func TestNoOpPollDoesNotGrowWithTheFleet(t *testing.T) {
	t.Parallel()
	// poll publishes node/n1 (and node/n10, which its name prefixes) in a
	// repository with or without the fleet, fetches it, then counts the
	// bytes the server sends for one poll with nothing new.
	type poll func(t *testing.T, g *gitRemote, fleet bool) int64
	viaHost := func(t *testing.T, g *gitRemote, url string, sent *atomic.Int64, fleet bool) int64 {
		f := newFixture(t, fixtureOptions{Remote: url})
		g.publish("n10", f.branch(f.decl(fileRes("m/a", f.path("a"), "n10"))))
		head := g.publish("n1", f.branch(f.decl(fileRes("m/a", f.path("a"), "n1"))))
		if fleet {
			g.addFleet(head)
		}
		ctx := context.Background()
		if got, err := f.host.Fetch(ctx, ""); err != nil || got.Commit != head {
			t.Fatalf("first fetch: %v, %s, want %s", err, got.Commit, head)
		}
		sent.Store(0)
		if _, err := f.host.Fetch(ctx, head); !errors.Is(err, ErrNothingNew) {
			t.Fatalf("no-op poll: %v", err)
		}
		return sent.Load()
	}
	overHTTP := func(v0Only bool) poll {
		return func(t *testing.T, g *gitRemote, fleet bool) int64 {
			cs, url := g.countingHTTP(v0Only)
			return viaHost(t, g, url, &cs.sent, fleet)
		}
	}
	overGit := func(t *testing.T, g *gitRemote, fleet bool) int64 {
		daemon, err := transport.NewEndpoint(g.daemon())
		if err != nil {
			t.Fatal(err)
		}
		sent, addr := countingProxy(t, fmt.Sprintf("%s:%d", daemon.Host, daemon.Port))
		return viaHost(t, g, "git://"+addr+"/mesh.git", sent, fleet)
	}
	// file:// has no server to wrap: count what git-upload-pack writes to
	// the lookup hostd runs.
	overFile := func(t *testing.T, g *gitRemote, fleet bool) int64 {
		return countLookup(t, g, g.fileURL(), nil, fleet)
	}
	overSSH := func(acceptEnv bool) poll {
		return func(t *testing.T, g *gitRemote, fleet bool) int64 {
			g.sshAcceptEnv = acceptEnv
			url, key, known := g.sshRemote()
			return countLookup(t, g, url, sshAuth(t, key, known), fleet)
		}
	}
	cases := []struct {
		name  string
		poll  poll
		grows bool
	}{
		{"http", overHTTP(false), false},
		{"git", overGit, false},
		{"file", overFile, false},
		{"ssh", overSSH(true), false},
		{"http v0 server", overHTTP(true), true},
		{"ssh v0 server", overSSH(false), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			one := tc.poll(t, newGitRemote(t), false)
			fleet := tc.poll(t, newGitRemote(t), true)
			t.Logf("no-op poll: %d bytes with 1 node branch, %d with %d node and %d status branches more", one, fleet, fleetSize, fleetSize)
			if one == 0 {
				t.Fatal("counted nothing")
			}
			if tc.grows {
				// Each of the 4,000 branches is advertised: ~60 bytes apiece.
				if fleet-one < 2*fleetSize*50 {
					t.Fatalf("a v0 server sent %d bytes more for the fleet, want every ref advertised", fleet-one)
				}
				return
			}
			if d := fleet - one; d < -8 || d > 8 {
				t.Fatalf("the no-op poll's answer grew by %d bytes with the fleet (%d, then %d)", d, one, fleet)
			}
		})
	}
}

// A missing branch, and a branch whose name only starts with the node's, are
// told apart from the node's over every transport, by the v2 lookup and by
// the go-git listing it falls back to, and over ssh:// both
// with a server that refuses GIT_PROTOCOL in the environment (v0) and one
// that accepts it (v2).
func TestLsRefFindsOnlyTheExactBranch(t *testing.T) {
	t.Parallel()
	for _, tr := range []string{"file", "git", "http", "ssh", "ssh v2"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			g := newGitRemote(t)
			var url string
			var auth transport.AuthMethod
			if strings.HasPrefix(tr, "ssh") {
				g.sshAcceptEnv = tr == "ssh v2"
				u, key, known := g.sshRemote()
				url, auth = u, sshAuth(t, key, known)
			} else {
				url = g.url(tr)
			}
			ctx := context.Background()
			if h, err := lsRef(ctx, url, auth, NodeBranch("n1")); err != nil || !h.IsZero() {
				t.Fatalf("empty repository: %v, %s", err, h)
			}
			// The go-git listing (the fallback) agrees.
			lookups := map[string]func(context.Context, string, transport.AuthMethod, plumbing.ReferenceName) (plumbing.Hash, error){
				"ls-refs": lsRef, "go-git listing": listRefs,
			}
			n10 := g.commit("node/n10", map[string][]byte{"x": []byte("10")})
			g.commit("status/n1", map[string][]byte{"x": []byte("s")})
			for name, lookup := range lookups {
				if h, err := lookup(ctx, url, auth, NodeBranch("n1")); err != nil || !h.IsZero() {
					t.Fatalf("%s, only node/n10 and status/n1: %v, %s", name, err, h)
				}
			}
			n1 := g.commit("node/n1", map[string][]byte{"x": []byte("1")})
			for name, lookup := range lookups {
				for node, want := range map[string]string{"n1": n1, "n10": n10} {
					if h, err := lookup(ctx, url, auth, NodeBranch(node)); err != nil || h.String() != want {
						t.Fatalf("%s of %s: %v, %s, want %s", name, node, err, h, want)
					}
				}
			}
		})
	}
}

// A remote without the repository: the lookup fails saying why, in the
// server's words, over every transport.
func TestLsRefMissingRepository(t *testing.T) {
	t.Parallel()
	cases := []struct{ transport, want string }{
		{"file", "does not appear to be a git repository"},
		{"git", "the server says: access denied or repository not exported"},
		{"http", "404 Not Found (check the remote URL)"},
		{"ssh", "does not appear to be a git repository"},
	}
	for _, tc := range cases {
		t.Run(tc.transport, func(t *testing.T) {
			t.Parallel()
			g := newGitRemote(t)
			var url string
			var auth transport.AuthMethod
			if tc.transport == "ssh" {
				g.sshAcceptEnv = true
				u, key, known := g.sshRemote()
				url, auth = u, sshAuth(t, key, known)
			} else {
				url = g.url(tc.transport)
			}
			url = strings.Replace(url, "/mesh.git", "/missing.git", 1)
			_, err := lsRef(t.Context(), url, auth, NodeBranch("n1"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("lookup in %s: %v, want an error saying %q", url, err, tc.want)
			}
		})
	}
}

// Over smart HTTP the lookup sends the user and password in the URL, as
// go-git's fetch does, and an error never shows the password.
func TestLsRefHTTPBasicAuth(t *testing.T) {
	t.Parallel()
	const user, password = "hostd", "pw-9f2c41d7"
	g := newGitRemote(t)
	backend := &cgi.Handler{
		Path: "/usr/lib/git-core/git-http-backend",
		Env:  []string{"GIT_PROJECT_ROOT=" + g.base, "GIT_HTTP_EXPORT_ALL=1"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="mesh"`)
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f := newFixture(t, fixtureOptions{})
	head := g.publish("n1", f.branch(f.decl(fileRes("m/a", f.path("a"), "x"))))
	withUser := func(pw string) string {
		return strings.Replace(srv.URL, "http://", "http://"+user+":"+pw+"@", 1) + "/mesh.git"
	}

	f.host.cfg.Remote = withUser(password)
	if got, err := f.host.Fetch(t.Context(), ""); err != nil || got.Commit != head {
		t.Fatalf("fetch with the password: %v, %s", err, got.Commit)
	}
	if _, err := f.host.Fetch(t.Context(), head); !errors.Is(err, ErrNothingNew) {
		t.Fatalf("no-op poll with the password: %v", err)
	}
	const wrong = "pw-wrong-77ab"
	f.host.cfg.Remote = withUser(wrong)
	_, err := f.host.Fetch(t.Context(), head)
	var fe *fetchError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "401 Unauthorized (check the user and password") {
		t.Fatalf("wrong password: %v, want a 401 failure to reach the remote", err)
	}
	if strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), password) {
		t.Fatalf("the error shows the password: %v", err)
	}
}

// A smart HTTP server that redirects info/refs elsewhere on the same host
// has the ls-refs POST follow.
func TestLsRefHTTPRedirect(t *testing.T) {
	t.Parallel()
	g := newGitRemote(t)
	backend := &cgi.Handler{
		Path: "/usr/lib/git-core/git-http-backend",
		Env:  []string{"GIT_PROJECT_ROOT=" + g.base, "GIT_HTTP_EXPORT_ALL=1"},
	}
	var posts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(r.URL.Path, "/old.git/"); ok {
			http.Redirect(w, r, "/mesh.git/"+rest+"?"+r.URL.RawQuery, http.StatusMovedPermanently)
			return
		}
		if r.Method == http.MethodPost {
			posts = append(posts, r.URL.Path)
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	head := g.commit("node/n1", map[string][]byte{"x": []byte("1")})
	h, err := lsRef(t.Context(), srv.URL+"/old.git", nil, NodeBranch("n1"))
	if err != nil || h.String() != head {
		t.Fatalf("lookup through a redirect: %v, %s, want %s", err, h, head)
	}
	if len(posts) != 1 || posts[0] != "/mesh.git/git-upload-pack" {
		t.Fatalf("POSTs to %v, want one to the redirected repository", posts)
	}
}

// The pkt-line reader, on answers real servers do not give here.
func TestReadAdvertisement(t *testing.T) {
	const h1, h2 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	p := func(s string) string { return string(pkt(s)) }
	ref := NodeBranch("n1")
	cases := []struct {
		name   string
		in     string
		v2     bool
		head   string
		errMsg string
	}{
		{"v0 with service line", p("# service=git-upload-pack\n") + "0000" +
			p(h2+" HEAD\x00multi_ack agent=git/2\n") + p(h1+" refs/heads/node/n1\n") + p(h2+" refs/heads/node/n10\n") + "0000", false, h1, ""},
		{"v1", p("version 1\n") + p(h1+" refs/heads/node/n1\x00caps\n") + "0000", false, h1, ""},
		{"v0 empty repository", "0000", false, "", ""},
		{"v2", p("version 2\n") + p("agent=git/2\n") + p("ls-refs=unborn\n") + p("fetch=shallow\n") + "0000", true, "", ""},
		{"v2 without ls-refs", p("version 2\n") + p("fetch\n") + "0000", true, "", "without ls-refs"},
		{"server error", p("ERR access denied\n"), false, "", "the server says: access denied"},
		{"not pkt-lines", "<html>", false, "", "bad length"},
		{"cut short", p("version 2\n") + "00", false, "", "unexpected EOF"},
		{"bad ref line", p("nothex refs/heads/node/n1\n") + "0000", false, "", "bad line"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v2, head, err := readAdvertisement(bufio.NewReader(strings.NewReader(tc.in)), ref)
			if tc.errMsg != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errMsg) {
					t.Fatalf("error %v, want one saying %q", err, tc.errMsg)
				}
				return
			}
			want := plumbing.ZeroHash
			if tc.head != "" {
				want = plumbing.NewHash(tc.head)
			}
			if err != nil || v2 != tc.v2 || head != want {
				t.Fatalf("got v2=%v head=%s err=%v, want v2=%v head=%s", v2, head, err, tc.v2, want)
			}
		})
	}
}

// The ls-refs request is what gitprotocol-v2 says, byte for byte.
func TestLsRefsRequest(t *testing.T) {
	want := "0014command=ls-refs\n" + "0018agent=meshgen-hostd\n" + "0001" + "0022ref-prefix refs/heads/node/n1\n" + "0000"
	if got := string(lsRefsRequest(NodeBranch("n1"))); got != want {
		t.Fatalf("request %q, want %q", got, want)
	}
}

// The ref lookup of a no-op poll in a repository with 2,000 node/* and
// 2,000 status/* branches besides the node's: protocol v2's ls-refs (what
// Fetch does) against go-git's v0 listing (what it did).
func BenchmarkNoOpPollFleet(b *testing.B) {
	for _, tr := range []string{"file", "git", "http", "ssh"} {
		g := newGitRemote(b)
		var url string
		var auth transport.AuthMethod
		if tr == "ssh" {
			g.sshAcceptEnv = true
			u, key, known := g.sshRemote()
			url, auth = u, sshAuth(b, key, known)
		} else {
			url = g.url(tr)
		}
		head := g.commit("node/n1", map[string][]byte{"x": []byte("1")})
		g.addFleet(head)
		lookups := []struct {
			name   string
			lookup func(context.Context, string, transport.AuthMethod, plumbing.ReferenceName) (plumbing.Hash, error)
		}{{"ls-refs", lsRef}, {"go-git listing", listRefs}}
		for _, l := range lookups {
			b.Run(tr+"/"+l.name, func(b *testing.B) {
				for b.Loop() {
					if h, err := l.lookup(b.Context(), url, auth, NodeBranch("n1")); err != nil || h.String() != head {
						b.Fatalf("lookup: %v, %s", err, h)
					}
				}
			})
		}
	}
}

// A no-op poll over smart HTTP is one request to a v2 server: ls-refs is
// POSTed without the capability GET. A v0 server refuses that POST, and the
// poll takes the GET, which answers it.
func TestNoOpPollOverHTTPRequests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		v0Only bool
		want   int64
	}{
		{"v2 server", false, 1},
		{"v0 server", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGitRemote(t)
			cs, url := g.countingHTTP(tc.v0Only)
			f := newFixture(t, fixtureOptions{Remote: url})
			head := g.publish("n1", f.branch(f.decl(fileRes("m/a", f.path("a"), "n1"))))
			ctx := context.Background()
			if got, err := f.host.Fetch(ctx, ""); err != nil || got.Commit != head {
				t.Fatalf("first fetch: %v, %s, want %s", err, got.Commit, head)
			}
			cs.requests.Store(0)
			if _, err := f.host.Fetch(ctx, head); !errors.Is(err, ErrNothingNew) {
				t.Fatalf("no-op poll: %v", err)
			}
			if got := cs.requests.Load(); got != tc.want {
				t.Fatalf("a no-op poll made %d HTTP requests, want %d", got, tc.want)
			}
		})
	}
}
