package main

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

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
		Dir:  "testdata/script",
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

// cmdPublish commits a declaration of the given generation to node/n1, as
// the reconciler does: a file holding "generation N" and, from generation 1,
// a container; signed unless "unsigned" follows.
func cmdPublish(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: publish GENERATION [unsigned]")
	}
	gen, err := strconv.ParseUint(args[0], 10, 64)
	ts.Check(err)
	work := ts.Getenv("WORK")
	d := &declaration.Declaration{Format: declaration.Version, Mesh: "demo", Node: "n1", Generation: gen, Source: "abc123",
		Resources: []declaration.Resource{
			{ID: "app/conf", Kind: declaration.KindFile, Module: "app", File: &declaration.File{
				Path: filepath.Join(work, "root", "app.conf"), Mode: "0644", Content: fmt.Sprintf("generation %d\n", gen)}},
			{ID: "app/server", Kind: declaration.KindContainer, Module: "app", Container: &declaration.Container{
				Name: "hostd-script-app", Image: ts.Getenv("IMAGE"), Command: []string{"sleep", "3600"}}},
		}}
	data, err := declaration.Marshal(d)
	ts.Check(err)
	tree := filepath.Join(work, "tree")
	ts.Check(os.MkdirAll(tree, 0o755))
	ts.Check(os.WriteFile(filepath.Join(tree, hostd.DeclarationFile), data, 0o644))
	os.Remove(filepath.Join(tree, hostd.SignatureFile))
	if len(args) == 1 {
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

func git(ts *testscript.TestScript, args ...string) {
	out, err := exec.Command("git", args...).CombinedOutput()
	if err != nil {
		ts.Fatalf("git %v: %v\n%s", args, err, out)
	}
}
