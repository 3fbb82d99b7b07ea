package hostd

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// sshRemote serves the repository over a real SSH connection on 127.0.0.1:
// an in-process server (golang.org/x/crypto/ssh) that accepts one client key
// and runs git's own git-upload-pack and git-receive-pack, as an ssh git
// host does. It returns the ssh:// URL, the client's private key file and a
// known_hosts file holding the server's key.
func (g *gitRemote) sshRemote() (url, keyFile, knownHostsFile string) {
	t := g.t
	t.Helper()
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	clientPub, clientPriv, _ := ed25519.GenerateKey(rand.Reader)
	allowed, err := ssh.NewPublicKey(clientPub)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) != string(allowed.Marshal()) {
			return nil, fmt.Errorf("unknown key")
		}
		return nil, nil
	}}
	cfg.AddHostKey(hostSigner)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go g.serveSSH(c, cfg)
		}
	}()

	dir := t.TempDir()
	block, err := ssh.MarshalPrivateKey(clientPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile = filepath.Join(dir, "id_ed25519")
	knownHostsFile = filepath.Join(dir, "known_hosts")
	port := l.Addr().(*net.TCPAddr).Port
	line := knownhosts.Line([]string{knownhosts.Normalize(fmt.Sprintf("127.0.0.1:%d", port))}, hostSigner.PublicKey())
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(knownHostsFile, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("ssh://git@127.0.0.1:%d/mesh.git", port), keyFile, knownHostsFile
}

func (g *gitRemote) serveSSH(c net.Conn, cfg *ssh.ServerConfig) {
	conn, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	defer conn.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		ch, requests, err := nc.Accept()
		if err != nil {
			return
		}
		go func() {
			defer ch.Close()
			var env []string
			for req := range requests {
				var kv struct{ Name, Value string }
				if req.Type == "env" && g.sshAcceptEnv && ssh.Unmarshal(req.Payload, &kv) == nil && kv.Name == "GIT_PROTOCOL" {
					env = append(env, kv.Name+"="+kv.Value)
					req.Reply(true, nil)
					continue
				}
				if req.Type != "exec" || len(req.Payload) < 4 {
					req.Reply(false, nil)
					continue
				}
				// "git-upload-pack '/mesh.git'": only git's two services.
				command := string(req.Payload[4:])
				name, arg, _ := strings.Cut(command, " ")
				if name != "git-upload-pack" && name != "git-receive-pack" {
					req.Reply(false, nil)
					return
				}
				req.Reply(true, nil)
				repo := filepath.Join(g.base, filepath.Clean("/"+strings.Trim(arg, "'")))
				cmd := exec.Command(name, repo)
				cmd.Env = append(os.Environ(), env...)
				cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
				// As sshd does, end the session when git exits, though the
				// client has more to send (cmd.Stdin = ch would wait for it).
				stdin, err := cmd.StdinPipe()
				if err != nil {
					return
				}
				go func() { io.Copy(stdin, ch); stdin.Close() }()
				status := uint32(0)
				if err := cmd.Run(); err != nil {
					status = 1
				}
				ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, status))
				return
			}
		}()
	}
}

// Fetch and push over ssh://, the server's key checked against known_hosts;
// a server with a key not in it is refused.
func TestFetchAndPushOverSSH(t *testing.T) {
	t.Parallel()
	g := newGitRemote(t)
	url, key, known := g.sshRemote()
	f := newFixture(t, fixtureOptions{Remote: url, PushURL: url})
	f.host.cfg.SSHKey, f.host.cfg.KnownHosts = key, known
	g.publish("n1", f.branch(f.decl(fileRes("m/a", f.path("a.conf"), "over ssh"))))
	rep, err := f.host.Once(t.Context())
	if err != nil || !rep.OK() {
		t.Fatalf("%v\n%s", err, FormatText(rep))
	}
	if readFile(t, f.path("a.conf")) != "over ssh" {
		t.Fatal("not applied")
	}
	if out := g.git("", "--git-dir", g.bare, "show", "status/n1:report.json"); !strings.Contains(out, `"generation": 1`) {
		t.Fatalf("pushed report: %s", out)
	}

	// A server whose key is not in known_hosts is not trusted.
	other := newGitRemote(t)
	otherURL, _, _ := other.sshRemote()
	f.host.cfg.Remote = otherURL
	if _, err := f.host.Fetch(t.Context(), ""); err == nil || !strings.Contains(err.Error(), "knownhosts: key is unknown") {
		t.Fatalf("a server whose key is not in known_hosts: %v", err)
	}
}
