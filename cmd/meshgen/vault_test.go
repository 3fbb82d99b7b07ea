package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/meshgen/meshgen/vaultd"
	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
	"github.com/rogpeppe/go-internal/testscript"
)

// waitVault SOCKET waits until the vaultd started in the background answers.
func waitVault(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitvault SOCKET")
	}
	c := client.Dial(args[0])
	defer c.Close()
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Recipient(ctx)
		cancel()
		if err == nil {
			return
		}
		if i > 500 {
			ts.Fatalf("vaultd does not answer on %s: %v", args[0], err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// vaultSealCmd NAME KIND seals NAME as the reconciler would, to a provider node
// (applier) and a consumer node (reader), each with a new age identity.
func vaultSealCmd(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: seal NAME one-party|two-party")
	}
	var rs []string
	for range 2 {
		id, err := age.GenerateX25519Identity()
		ts.Check(err)
		rs = append(rs, id.Recipient().String())
	}
	c := client.Dial(ts.Getenv("MESHGEN_VAULT"))
	defer c.Close()
	_, err := c.Seal(context.Background(), client.SealRequest{Name: args[0], Spec: client.Spec{Rotation: args[1]}, Appliers: rs[:1], Recipients: rs[1:]})
	if neg {
		if err == nil {
			ts.Fatalf("seal %s succeeded", args[0])
		}
		return
	}
	ts.Check(err)
}

// TestVaultOverMutualTLS runs `meshgen vault` against a vaultd on TCP with
// mutual TLS, with the client's certificate, and without one.
func TestVaultOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA := vaulttest.NewCA(t, "vault-ca"), vaulttest.NewCA(t, "operators")
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	scert, skey := serverCA.IssueServer(t, "vaultd")
	ccert, ckey := clientCA.IssueClient(t, "operator")
	v, err := vaultd.Open(vaultd.Options{Dir: filepath.Join(dir, "vault")})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	ln, err := vaultd.ListenTLS("tcp://127.0.0.1:0", vaultd.TLSOptions{
		CertFile: write("s.pem", scert), KeyFile: write("s.key", skey), ClientCAFile: write("cca.pem", clientCA.PEM),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Serve(ctx, ln, vaultd.ServeOptions{Owner: -1}) }()
	defer func() { stop(); <-done }()
	addr := "tcp://" + ln.Addr().String()
	tlsFlags := []string{"--vault-cert", write("c.pem", ccert), "--vault-key", write("c.key", ckey), "--vault-ca", write("sca.pem", serverCA.PEM)}

	run := func(stdin string, args ...string) (string, error) {
		var out bytes.Buffer
		root := newRootCmd()
		root.SetArgs(args)
		root.SetIn(strings.NewReader(stdin))
		root.SetOut(&out)
		root.SetErr(&out)
		err := root.ExecuteContext(context.Background())
		return out.String(), err
	}
	out, err := run("tls-delivered-value\n", append([]string{"vault", "put", "ext-key", "--vault", addr}, tlsFlags...)...)
	if err != nil || out != "ext-key: version 1 delivered\n" {
		t.Fatalf("put over mutual TLS: %v %q", err, out)
	}
	out, err = run("", append([]string{"vault", "status", "--vault", addr}, tlsFlags...)...)
	if err != nil || !strings.Contains(out, "ext-key") || !strings.Contains(out, "operator") {
		t.Fatalf("status over mutual TLS: %v %q", err, out)
	}
	if _, err := run("", "vault", "status", "--vault", addr); err == nil || !strings.Contains(err.Error(), "needs mutual TLS") {
		t.Fatalf("TCP without TLS flags: %v", err)
	}
	// A certificate the vault's client CA did not sign gets no answer.
	stranger := vaulttest.NewCA(t, "strangers")
	xcert, xkey := stranger.IssueClient(t, "intruder")
	if _, err := run("", "vault", "status", "--vault", addr, "--vault-cert", write("x.pem", xcert), "--vault-key", write("x.key", xkey), "--vault-ca", filepath.Join(dir, "sca.pem")); err == nil {
		t.Fatal("a stranger's certificate was answered")
	}
}
