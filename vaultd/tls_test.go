package vaultd_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshgen/meshgen/vaultd"
	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// ca is a test certificate authority.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &ca{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue makes a certificate for name (a server on 127.0.0.1, or a client).
func (c *ca) issue(t *testing.T, name string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

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
	serverCA, clientCA, strangerCA := newCA(t, "vault-ca"), newCA(t, "operators"), newCA(t, "strangers")
	scert, skey := serverCA.issue(t, "vaultd", true)
	ccert, ckey := clientCA.issue(t, "reconciler", false)
	xcert, xkey := strangerCA.issue(t, "intruder", false)
	opts := vaultd.TLSOptions{
		CertFile: write(t, dir, "server.pem", scert), KeyFile: write(t, dir, "server.key", skey),
		ClientCAFile: write(t, dir, "clients-ca.pem", clientCA.pem),
	}
	write(t, dir, "server-ca.pem", serverCA.pem)

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
