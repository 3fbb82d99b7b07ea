package hostd

// The no-op poll's ref lookup, in git protocol v2.
//
// go-git v5 speaks only protocol v0/v1, where the server advertises every
// ref it has before the client can say what it wants: each node/* and
// status/* branch of the fleet, about 60 bytes apiece, on every poll of every
// node. Protocol v2's ls-refs command with a ref-prefix argument makes the
// server send only refs/heads/node/<name> (and any branch whose name it
// prefixes), so a poll costs the server the same whatever the fleet's size
// (DESIGN.md, "Scale").
//
// hostd speaks the exchange itself, over each transport, rather than running
// `git ls-remote`: a node then needs no git client beyond what go-git already
// needs (git-upload-pack for file:// remotes, as go-git runs it too), the
// ssh settings (key, known_hosts) are the ones go-git uses for the fetch, and
// the exchange is a handful of pkt-lines:
//
//   - http(s)://: POST the ls-refs command to git-upload-pack with
//     "Git-Protocol: version=2", one request; where that is refused, GET
//     info/refs first, then POST (gitprotocol-http, gitprotocol-v2);
//   - git://: "version=2" as an extra parameter of the initial request;
//   - file://: git-upload-pack run with GIT_PROTOCOL=version=2;
//   - ssh://: GIT_PROTOCOL=version=2 sent as an environment variable of the
//     session (servers accept it when they speak v2: OpenSSH with
//     "AcceptEnv GIT_PROTOCOL", the git hosting services).
//
// A server that answers in v0 (it ignored the request for v2) has already
// advertised all its refs, as the go-git listing would have: hostd reads the
// branch from that advertisement, ends the exchange, and the poll costs what
// it cost before. Where hostd cannot ask for v2 (another scheme, an HTTP
// server that is not a smart git server, a v2 server without ls-refs, no
// git-upload-pack for file://) it falls back to the go-git listing. The
// fetch of a branch that moved stays with go-git.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
)

// errNoLsRefs says hostd cannot look the branch up in protocol v2 here (a
// scheme or server it does not speak it with): the caller lists refs with
// go-git instead.
var errNoLsRefs = errors.New("no protocol v2 ref lookup")

// lsRef returns the hash of ref on the remote at url, the zero hash when it
// has no such ref. It fails with errNoLsRefs when the go-git listing must be
// used instead.
func lsRef(ctx context.Context, url string, auth transport.AuthMethod, ref plumbing.ReferenceName) (plumbing.Hash, error) {
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("remote url: %w", err)
	}
	if ep.Protocol == "http" || ep.Protocol == "https" {
		return lsRefHTTP(ctx, &http.Client{}, ep, ref)
	}
	s, err := openUploadPack(ctx, ep, auth)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer s.Close()
	return lsRefStream(s, ref)
}

// openUploadPack starts git-upload-pack for ep over git://, file:// or
// ssh://, asking for protocol v2.
func openUploadPack(ctx context.Context, ep *transport.Endpoint, auth transport.AuthMethod) (io.ReadWriteCloser, error) {
	switch ep.Protocol {
	case "git":
		return openGit(ctx, ep)
	case "file":
		return openFile(ctx, ep)
	case "ssh":
		a, ok := auth.(gitssh.AuthMethod)
		if !ok {
			return nil, fmt.Errorf("%w: no ssh auth", errNoLsRefs)
		}
		return openSSH(ctx, ep, a)
	}
	return nil, fmt.Errorf("%w over %s://", errNoLsRefs, ep.Protocol)
}

// lsRefStream runs the lookup on a connection to git-upload-pack: read the
// advertisement; in v2 send ls-refs and read its answer; in v0 the
// advertisement was the answer. Either way it ends the exchange with a
// flush, which git-upload-pack takes as "done".
func lsRefStream(s io.ReadWriter, ref plumbing.ReferenceName) (plumbing.Hash, error) {
	r := bufio.NewReader(s)
	v2, head, err := readAdvertisement(r, ref)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if v2 {
		if _, err := s.Write(lsRefsRequest(ref)); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("send ls-refs: %w", err)
		}
		if head, err = readLsRefs(r, ref); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	if _, err := s.Write([]byte(pktFlush)); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("end the exchange: %w", err)
	}
	return head, nil
}

// lsRefHTTP runs the lookup over smart HTTP: one POST of ls-refs, which a
// v2 server answers at once. Failing that, the GET of info/refs asks for v2
// and the server answers its capabilities, then the POST again; a v0 server
// answers the GET with all its refs, which is the answer.
func lsRefHTTP(ctx context.Context, client *http.Client, ep *transport.Endpoint, ref plumbing.ReferenceName) (plumbing.Hash, error) {
	base := httpBase(ep)
	origin, err := neturl.Parse(base)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("remote url: %w", err)
	}
	do := func(req *http.Request, wantType string) (*http.Response, error) {
		req.Header.Set("Git-Protocol", "version=2")
		req.Header.Set("User-Agent", "meshgen-hostd")
		// The password goes to the remote's host only, not where it
		// redirects to.
		if ep.User != "" && req.URL.Host == origin.Host {
			req.SetBasicAuth(ep.User, ep.Password)
		}
		res, err := client.Do(req)
		if err != nil {
			// The client's error names the URL, with any password in it.
			if ue, ok := errors.AsType[*neturl.Error](err); ok {
				err = ue.Err
			}
			return nil, err
		}
		if res.StatusCode != http.StatusOK {
			res.Body.Close()
			hint := ""
			switch res.StatusCode {
			case http.StatusUnauthorized, http.StatusForbidden:
				hint = " (check the user and password in the remote URL)"
			case http.StatusNotFound:
				hint = " (check the remote URL)"
			}
			return nil, fmt.Errorf("%s %s: %s%s", req.Method, req.URL.Path, res.Status, hint)
		}
		if ct, _, _ := strings.Cut(res.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) != wantType {
			res.Body.Close()
			return nil, fmt.Errorf("%w: %s %s answered %q, not %q (not a smart HTTP git server)", errNoLsRefs, req.Method, req.URL.Path, res.Header.Get("Content-Type"), wantType)
		}
		return res, nil
	}

	post := func(base string) (plumbing.Hash, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/git-upload-pack", bytes.NewReader(lsRefsRequest(ref)))
		if err != nil {
			return plumbing.ZeroHash, err
		}
		req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
		req.Header.Set("Accept", "application/x-git-upload-pack-result")
		res, err := do(req, "application/x-git-upload-pack-result")
		if err != nil {
			return plumbing.ZeroHash, err
		}
		defer res.Body.Close()
		return readLsRefs(bufio.NewReader(res.Body), ref)
	}
	// One round trip where the server allows it: v2 is stateless over
	// HTTP, so a v2 server (git http-backend among them) answers ls-refs
	// POSTed without the capability GET first. Anything else (a v0 server,
	// a redirect, a refusal) takes the GET path below, which also says why.
	if head, err := post(base); err == nil {
		return head, nil
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/info/refs?service=git-upload-pack", nil)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	res, err := do(req, "application/x-git-upload-pack-advertisement")
	if err != nil {
		return plumbing.ZeroHash, err
	}
	r := bufio.NewReader(res.Body)
	v2, head, err := readAdvertisement(r, ref)
	res.Body.Close()
	if err != nil || !v2 {
		return head, err
	}
	// A redirected GET moves the repository for the POST too, as git and
	// go-git have it.
	if u := res.Request.URL; strings.HasSuffix(u.Path, "/info/refs") {
		base = u.Scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/info/refs")
	}

	return post(base)
}

// httpBase is the repository's URL without user information, as go-git's
// smart HTTP client builds it.
func httpBase(ep *transport.Endpoint) string {
	host := ep.Host
	if ep.Port != 0 && !(ep.Protocol == "http" && ep.Port == 80) && !(ep.Protocol == "https" && ep.Port == 443) {
		host = net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port))
	}
	return ep.Protocol + "://" + host + strings.TrimSuffix(ep.Path, "/")
}

// openGit connects to a git daemon; "version=2" follows the host as an
// extra parameter of the request (gitprotocol-pack, "Git Transport").
func openGit(ctx context.Context, ep *transport.Endpoint) (io.ReadWriteCloser, error) {
	port := ep.Port
	if port == 0 {
		port = 9418
	}
	addr := net.JoinHostPort(ep.Host, strconv.Itoa(port))
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	request := fmt.Sprintf("git-upload-pack %s\x00host=%s\x00\x00version=2\x00", ep.Path, addr)
	if _, err := c.Write(pkt(request)); err != nil {
		stop()
		c.Close()
		return nil, err
	}
	return &closer{ReadWriter: c, close: func() error { stop(); return c.Close() }}, nil
}

// openFile runs git-upload-pack on a local repository, as go-git's file://
// transport does, with GIT_PROTOCOL=version=2.
func openFile(ctx context.Context, ep *transport.Endpoint) (io.ReadWriteCloser, error) {
	bin, err := exec.LookPath("git-upload-pack")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoLsRefs, err)
	}
	cmd := exec.CommandContext(ctx, bin, ep.Path)
	cmd.Env = append(os.Environ(), "GIT_PROTOCOL=version=2")
	p := &process{}
	cmd.Stderr = &p.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p.out, p.in, p.wait = out, in, sync.OnceValue(cmd.Wait)
	p.close = func() error {
		in.Close()
		out.Close() // a git-upload-pack still writing stops on EPIPE
		return p.wait()
	}
	return p, nil
}

// process is a git-upload-pack run as a command, here or over ssh; an early
// end of its output carries what it said on stderr ("does not appear to be
// a git repository" and the like).
type process struct {
	out    io.Reader
	in     io.Writer
	stderr bytes.Buffer // written until wait returns
	wait   func() error // once: the command's end
	close  func() error
}

func (p *process) Read(b []byte) (int, error) {
	n, err := p.out.Read(b)
	if err == io.EOF {
		p.wait()
		if p.stderr.Len() > 0 {
			err = &serverSaid{strings.TrimSpace(p.stderr.String())}
		}
	}
	return n, err
}

func (p *process) Write(b []byte) (int, error) { return p.in.Write(b) }
func (p *process) Close() error                { return p.close() }

// openSSH runs git-upload-pack on an ssh server with the auth go-git fetches
// with, asking for v2 in the session's environment; a server that refuses
// the variable answers in v0.
func openSSH(ctx context.Context, ep *transport.Endpoint, auth gitssh.AuthMethod) (io.ReadWriteCloser, error) {
	cfg, err := auth.ClientConfig()
	if err != nil {
		return nil, err
	}
	host, port := ep.Host, ep.Port
	if port == 0 {
		port = gitssh.DefaultPort
	}
	// ~/.ssh/config may name the host and port, as go-git reads it.
	if cfg := gitssh.DefaultSSHConfig; cfg != nil {
		if h := cfg.Get(ep.Host, "Hostname"); h != "" {
			host = h
			if p, err := strconv.Atoi(cfg.Get(ep.Host, "Port")); err == nil {
				port = p
			}
		}
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	fail := func(err error) (io.ReadWriteCloser, error) {
		stop()
		c.Close()
		return nil, err
	}
	conn, chans, reqs, err := ssh.NewClientConn(c, addr, cfg)
	if err != nil {
		return fail(err)
	}
	client := ssh.NewClient(conn, chans, reqs)
	sess, err := client.NewSession()
	if err != nil {
		return fail(err)
	}
	_ = sess.Setenv("GIT_PROTOCOL", "version=2") // refused: the server answers v0
	p := &process{}
	sess.Stderr = &p.stderr
	in, err := sess.StdinPipe()
	if err != nil {
		return fail(err)
	}
	out, err := sess.StdoutPipe()
	if err != nil {
		return fail(err)
	}
	if err := sess.Start("git-upload-pack " + shellQuote(ep.Path)); err != nil {
		return fail(err)
	}
	p.out, p.in, p.wait = out, in, sync.OnceValue(sess.Wait)
	p.close = func() error {
		stop()
		in.Close()
		sess.Close()
		return client.Close()
	}
	return p, nil
}

// shellQuote quotes s for the remote shell, as git and go-git do.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

type closer struct {
	io.ReadWriter
	close func() error
}

func (c *closer) Close() error { return c.close() }

// Pkt-lines (gitprotocol-common): a 4-digit hex length that counts itself,
// then the data; "0000" flush, "0001" delimiter.
const (
	pktFlush = "0000"
	pktDelim = "0001"
)

func pkt(s string) []byte { return fmt.Appendf(nil, "%04x%s", len(s)+4, s) }

// lsRefsRequest is the ls-refs command for refs named ref or starting with
// it: no symrefs, no peeled tags, nothing but names and hashes.
func lsRefsRequest(ref plumbing.ReferenceName) []byte {
	var b bytes.Buffer
	b.Write(pkt("command=ls-refs\n"))
	b.Write(pkt("agent=meshgen-hostd\n"))
	b.WriteString(pktDelim)
	b.Write(pkt("ref-prefix " + ref.String() + "\n"))
	b.WriteString(pktFlush)
	return b.Bytes()
}

// errFlush and errDelim are what readPkt returns for the special packets.
var (
	errFlush = errors.New("flush packet")
	errDelim = errors.New("delimiter packet")
)

// serverSaid is a server's own word on why it ended the exchange: an "ERR"
// packet, or what git-upload-pack wrote on stderr before it stopped ("does
// not appear to be a git repository"). It is the whole story, so callers
// report it alone rather than the read it interrupted.
type serverSaid struct{ msg string }

func (e *serverSaid) Error() string { return "the server says: " + e.msg }

// readPkt reads one pkt-line's data, without its trailing newline. A server
// error ("ERR ...") is an error.
func readPkt(r *bufio.Reader) (string, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return "", fmt.Errorf("read pkt-line: %w", err)
	}
	n, err := strconv.ParseUint(string(size[:]), 16, 16)
	if err != nil {
		return "", fmt.Errorf("read pkt-line: bad length %q (not a git server?)", size[:])
	}
	switch {
	case n == 0:
		return "", errFlush
	case n == 1:
		return "", errDelim
	case n < 4:
		return "", fmt.Errorf("read pkt-line: bad length %d", n)
	}
	data := make([]byte, n-4)
	if _, err := io.ReadFull(r, data); err != nil {
		return "", fmt.Errorf("read pkt-line: %w", io.ErrUnexpectedEOF)
	}
	line := strings.TrimSuffix(string(data), "\n")
	if msg, ok := strings.CutPrefix(line, "ERR "); ok {
		return "", &serverSaid{msg}
	}
	return line, nil
}

// readAdvertisement reads what git-upload-pack says first. In v2 that is
// "version 2" and capabilities, which must include ls-refs; in v0 (or v1) it
// is every ref, and head is ref's hash among them. A smart HTTP v0 server
// puts a "# service=" line and a flush first.
func readAdvertisement(r *bufio.Reader, ref plumbing.ReferenceName) (v2 bool, head plumbing.Hash, err error) {
	first := true
	for {
		line, err := readPkt(r)
		switch {
		case errors.Is(err, errFlush) && first:
			return false, head, nil // v0, an empty repository without capabilities
		case errors.Is(err, errFlush) && v2:
			return true, head, errNoV2LsRefs
		case errors.Is(err, errFlush):
			return false, head, nil
		case err != nil:
			return false, head, fmt.Errorf("read the ref advertisement: %w", err)
		}
		switch {
		case first && strings.HasPrefix(line, "# service="):
			if _, err := readPkt(r); !errors.Is(err, errFlush) {
				return false, head, fmt.Errorf("read the ref advertisement: no flush after %q", line)
			}
			continue
		case first && line == "version 2":
			v2 = true
		case first && line == "version 1":
		case v2:
			if line == "ls-refs" || strings.HasPrefix(line, "ls-refs=") {
				if err := skipToFlush(r); err != nil {
					return false, head, err
				}
				return true, head, nil
			}
		default:
			h, err := refLine(line, ref)
			if err != nil {
				return false, head, err
			}
			if !h.IsZero() {
				head = h
			}
		}
		first = false
	}
}

// errNoV2LsRefs: a v2 server without the ls-refs command.
var errNoV2LsRefs = fmt.Errorf("%w: the server speaks protocol v2 without ls-refs", errNoLsRefs)

func skipToFlush(r *bufio.Reader) error {
	for {
		_, err := readPkt(r)
		if errors.Is(err, errFlush) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the capabilities: %w", err)
		}
	}
}

// readLsRefs reads ls-refs' answer, "<hash> <name>[ <attribute>...]" lines
// and a flush, and returns ref's hash among them.
func readLsRefs(r *bufio.Reader, ref plumbing.ReferenceName) (plumbing.Hash, error) {
	var head plumbing.Hash
	for {
		line, err := readPkt(r)
		if errors.Is(err, errFlush) {
			return head, nil
		}
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read the ls-refs answer: %w", err)
		}
		h, err := refLine(line, ref)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if !h.IsZero() {
			head = h
		}
	}
}

// refLine reads "<hash> <name>", with capabilities after a NUL (v0) or
// attributes after a space (v2); it returns the hash when name is ref.
func refLine(line string, ref plumbing.ReferenceName) (plumbing.Hash, error) {
	line, _, _ = strings.Cut(line, "\x00")
	hash, rest, ok := strings.Cut(line, " ")
	name, _, _ := strings.Cut(rest, " ")
	if !ok || !plumbing.IsHash(hash) {
		return plumbing.ZeroHash, fmt.Errorf("read refs: bad line %q", line)
	}
	if name != ref.String() {
		return plumbing.ZeroHash, nil
	}
	return plumbing.NewHash(hash), nil
}
