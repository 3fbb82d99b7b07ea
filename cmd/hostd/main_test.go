package main

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"filippo.io/age"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/meshgen/meshgen/hostd"
	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/internal/ocitest"
)

// TestMain lets testscript run this binary as the `hostd` command.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"hostd": main})
}

// TestScripts runs every testdata/script/*.txtar: the commands an operator
// types on a node and what they must print.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("SECRET", scriptSecret)
			return nil
		},
		Cmds: map[string]func(*testscript.TestScript, bool, []string){"node": cmdNode, "publish": cmdPublish},
	})
}

// cmdNode makes a node in $WORK: its age identity (hostd init), a signing
// key pair (the public half as reconciler.pub), a bare mesh repository, a
// private podman store holding the test image, and hostd.yaml naming them.
func cmdNode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: node")
	}
	work := ts.Getenv("WORK")
	if _, err := hostd.Init(filepath.Join(work, "keys")); err != nil {
		ts.Fatalf("%v", err)
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ts.Check(err)
	der, err := x509.MarshalECPrivateKey(priv)
	ts.Check(err)
	ts.Check(os.WriteFile(filepath.Join(work, "signing.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600))
	pub, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	ts.Check(err)
	ts.Check(os.WriteFile(filepath.Join(work, "keys", "reconciler.pub"), pub, 0o644))
	git(ts, "init", "-q", "--bare", filepath.Join(work, "mesh.git"))

	store, err := ocitest.OpenStore()
	ts.Check(err)
	ts.Defer(func() { store.Close() })
	image, err := store.LoadImage("busybox")
	ts.Check(err)
	ts.Setenv("IMAGE", image)
	ts.Setenv("STORE_ROOT", store.Root)
	cfg := fmt.Sprintf(`node: n1
mesh: demo
remote: file://%[1]s/mesh.git
pushURL: file://%[1]s/mesh.git
publicKey: keys/reconciler.pub
identity: keys/age-identity.txt
stateDir: state
root: root
podman: {root: %[2]s, runRoot: %[3]s, tmpDir: %[4]s, stopTimeout: 0}
textfile: metrics/hostd.prom
`, work, store.Root, store.RunRoot, store.TmpDir)
	ts.Check(os.WriteFile(filepath.Join(work, "hostd.yaml"), []byte(cfg), 0o600))
}

// scriptSecret is the plaintext of the secret `publish N secret` seals; the
// scripts check that no output shows it.
const scriptSecret = "script-pw-4b1d90e7"

// cmdPublish commits a declaration of the given generation to node/n1, as
// the reconciler does: a file holding "generation N" and a container; with
// "secret", a secret file root/token sealed to the node's age recipient
// (plaintext $SECRET); signed unless "unsigned" is given.
func cmdPublish(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: publish GENERATION [unsigned] [secret]")
	}
	gen, err := strconv.ParseUint(args[0], 10, 64)
	ts.Check(err)
	signed, secret := true, false
	for _, a := range args[1:] {
		switch a {
		case "unsigned":
			signed = false
		case "secret":
			secret = true
		default:
			ts.Fatalf("usage: publish GENERATION [unsigned] [secret]")
		}
	}
	work := ts.Getenv("WORK")
	d := &declaration.Declaration{Format: declaration.Version, Mesh: "demo", Node: "n1", Generation: gen, Source: "abc123",
		Resources: []declaration.Resource{
			{ID: "app/conf", Kind: declaration.KindFile, Module: "app", File: &declaration.File{
				Path: filepath.Join(work, "root", "app.conf"), Mode: "0644", Content: fmt.Sprintf("generation %d\n", gen)}},
			{ID: "app/server", Kind: declaration.KindContainer, Module: "app", Container: &declaration.Container{
				Name: "hostd-script-app", Image: ts.Getenv("IMAGE"), Command: []string{"sleep", "3600"}}},
		}}
	tree := filepath.Join(work, "tree")
	ts.Check(os.RemoveAll(filepath.Join(tree, "secrets")))
	if secret {
		ct := sealToNode(ts, filepath.Join(work, "keys"), scriptSecret)
		ts.Check(os.MkdirAll(filepath.Join(tree, "secrets"), 0o755))
		ts.Check(os.WriteFile(filepath.Join(tree, "secrets", "token.age"), ct, 0o644))
		sum := sha256.Sum256(ct)
		d.Resources = append(d.Resources, declaration.Resource{ID: "app/token", Kind: declaration.KindFile, Module: "app",
			File: &declaration.File{Path: filepath.Join(work, "root", "token"), Mode: "0600", Secret: &declaration.SecretRef{
				Name: "token", Version: 1, Sealed: "secrets/token.age", SHA256: hex.EncodeToString(sum[:])}}})
	}
	data, err := declaration.Marshal(d)
	ts.Check(err)
	ts.Check(os.MkdirAll(tree, 0o755))
	ts.Check(os.WriteFile(filepath.Join(tree, hostd.DeclarationFile), data, 0o644))
	os.Remove(filepath.Join(tree, hostd.SignatureFile))
	if signed {
		block, _ := pem.Decode([]byte(ts.ReadFile("signing.pem")))
		priv, err := x509.ParseECPrivateKey(block.Bytes)
		ts.Check(err)
		sv, err := signature.LoadECDSASignerVerifier(priv, crypto.SHA256)
		ts.Check(err)
		sig, err := sv.SignMessage(bytes.NewReader(data))
		ts.Check(err)
		ts.Check(os.WriteFile(filepath.Join(tree, hostd.SignatureFile), []byte(base64.StdEncoding.EncodeToString(sig)), 0o644))
	}
	if _, err := os.Stat(filepath.Join(tree, ".git")); err != nil {
		git(ts, "-C", tree, "init", "-q", "-b", "node/n1")
	}
	git(ts, "-C", tree, "add", "-A")
	git(ts, "-C", tree, "-c", "user.name=r", "-c", "user.email=r@r", "commit", "-q", "-m", "generation "+args[0])
	git(ts, "-C", tree, "push", "-q", "--force", filepath.Join(work, "mesh.git"), "HEAD:refs/heads/node/n1")
}

// sealToNode encrypts plaintext to the recipient of the node's age identity
// in dir, as vaultd seals a secret.
func sealToNode(ts *testscript.TestScript, dir, plaintext string) []byte {
	recipient, err := hostd.Init(dir)
	ts.Check(err)
	r, err := age.ParseX25519Recipient(recipient)
	ts.Check(err)
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, r)
	ts.Check(err)
	_, err = io.WriteString(w, plaintext)
	ts.Check(err)
	ts.Check(w.Close())
	return buf.Bytes()
}

func git(ts *testscript.TestScript, args ...string) {
	out, err := exec.Command("git", args...).CombinedOutput()
	if err != nil {
		ts.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// `hostd run` logs an apply that did or has something to say, and stays
// quiet otherwise.
func TestQuiet(t *testing.T) {
	unchanged := []declaration.Result{{ID: "app/conf", Kind: declaration.KindFile, Outcome: declaration.Unchanged}}
	cases := []struct {
		name  string
		rep   declaration.Report
		quiet bool
	}{
		{"nothing changed", declaration.Report{Resources: unchanged}, true},
		{"a resource created", declaration.Report{Resources: []declaration.Result{{ID: "a", Outcome: declaration.Created}}}, false},
		{"a container removed", declaration.Report{Resources: unchanged, Removed: []string{"c"}}, false},
		{"a secret file removed", declaration.Report{Resources: unchanged, RemovedFiles: []string{"/srv/token"}}, false},
		{"a secret file left", declaration.Report{Resources: unchanged, LeftFiles: []declaration.LeftFile{{Path: "/srv/token", Reason: "r"}}}, false},
		{"refused", declaration.Report{Resources: unchanged, Refused: "unsigned"}, false},
	}
	for _, c := range cases {
		if got := quiet(c.rep); got != c.quiet {
			t.Errorf("%s: quiet %v, want %v", c.name, got, c.quiet)
		}
	}
}
