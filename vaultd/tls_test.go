package vaultd_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/meshgen/meshgen/vaultd"
	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

func write(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMutualTLS serves the vault on TCP with mutual TLS: a client with a
// certificate from the client CA is answered; one from another CA, or with
// none, never gets a connection.
func TestMutualTLS(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	serverCA, clientCA, strangerCA := vaulttest.NewCA(t, "vault-ca"), vaulttest.NewCA(t, "operators"), vaulttest.NewCA(t, "strangers")
	scert, skey := serverCA.IssueServer(t, "vaultd")
	ccert, ckey := clientCA.IssueClient(t, "reconciler")
	xcert, xkey := strangerCA.IssueClient(t, "intruder")
	opts := vaultd.TLSOptions{
		CertFile: write(t, dir, "server.pem", scert), KeyFile: write(t, dir, "server.key", skey),
		ClientCAFile: write(t, dir, "clients-ca.pem", clientCA.PEM),
	}
	write(t, dir, "server-ca.pem", serverCA.PEM)

	v, err := vaultd.Open(vaultd.Options{Dir: filepath.Join(dir, "vault")})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	ln, err := vaultd.ListenTLS("tcp://127.0.0.1:0", opts)
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- v.Serve(sctx, ln, vaultd.ServeOptions{Owner: -1}) }()
	var once sync.Once
	shutdown := func() { once.Do(func() { stop(); <-done }) }
	defer shutdown()
	addr := "tcp://" + ln.Addr().String()

	cfg, err := client.LoadTLS(write(t, dir, "c.pem", ccert), write(t, dir, "c.key", ckey), filepath.Join(dir, "server-ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	c := client.DialTLS(addr, cfg)
	defer c.Close()
	node := vaulttest.NewNode(t)
	resp, err := c.Seal(ctx, client.SealRequest{Name: "over-tls", Recipients: recipients(node)})
	if err != nil {
		t.Fatalf("a client of the client CA: %v", err)
	}
	if len(vaulttest.Open(t, node, resp.Sealed[0].Ciphertext)) != 32 {
		t.Fatal("no value sealed over TLS")
	}

	stranger, err := client.LoadTLS(write(t, dir, "x.pem", xcert), write(t, dir, "x.key", xkey), filepath.Join(dir, "server-ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	noCert := &tls.Config{RootCAs: stranger.RootCAs, MinVersion: tls.VersionTLS13}
	for name, cfg := range map[string]*tls.Config{"another CA": stranger, "no certificate": noCert} {
		c := client.DialTLS(addr, cfg)
		_, err := c.Status(ctx)
		c.Close()
		var ce *client.Error
		if err == nil || errors.As(err, &ce) {
			t.Fatalf("%s: %v, want no answer at all", name, err)
		}
	}
	shutdown()
	audit, err := os.ReadFile(filepath.Join(dir, "vault", "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(audit, []byte(`"peer":"CN=reconciler"`)) || bytes.Contains(audit, []byte("intruder")) {
		t.Fatalf("the audit log does not name the TLS client, or names a refused one:\n%s", audit)
	}
}

// TestDaemonRefusals runs the real binary with flags it must refuse, and
// checks each exits 1 saying why.
func TestDaemonRefusals(t *testing.T) {
	dir := t.TempDir()
	v := filepath.Join(dir, "v")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no flags", nil, "--dir and --listen are required"},
		{"plain TCP", []string{"--dir", v, "--listen", "tcp://127.0.0.1:0"}, "a TCP listener needs mutual TLS"},
		{"TLS without a client CA", []string{"--dir", v, "--listen", "tcp://127.0.0.1:0", "--tls-cert", "c", "--tls-key", "k"}, "mutual TLS needs a certificate, its key and a client CA"},
		{"a relative socket", []string{"--dir", v, "--listen", "unix://vault.sock"}, "the socket path must be absolute"},
		{"another scheme", []string{"--dir", v, "--listen", "http://x"}, "want unix:///path/vault.sock"},
		{"a missing node list", []string{"--dir", v, "--listen", "unix://" + filepath.Join(dir, "s"), "--nodes", filepath.Join(dir, "none")}, "node list:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := exec.Command(vaultdBin, tt.args...).CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), tt.want) {
				t.Fatalf("vaultd %v: %v\n%s\nwant %q", tt.args, err, out, tt.want)
			}
		})
	}
}

// TestOneVaultdPerDirectoryAndSocket starts a second vaultd on the same
// directory, then on the same socket: both are refused, and the first still
// answers.
func TestOneVaultdPerDirectoryAndSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vault")
	sockDir := shortDir(t)
	d := startDaemon(t, dir, sockDir, &syncBuffer{})
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--dir", dir, "--listen", "unix://" + filepath.Join(sockDir, "other.sock")}, "is in use by another vaultd (stop it first)"},
		{[]string{"--dir", filepath.Join(t.TempDir(), "v2"), "--listen", "unix://" + d.sock}, "another vaultd answers on this socket; stop it first"},
	} {
		out, err := exec.Command(vaultdBin, tt.args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tt.want) {
			t.Fatalf("a second vaultd %v: %v\n%s", tt.args, err, out)
		}
	}
	if _, err := d.client.Status(context.Background()); err != nil {
		t.Fatalf("the first vaultd stopped answering: %v", err)
	}
}
