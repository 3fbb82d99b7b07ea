package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshgen/meshgen/genesis"
	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// `meshgen genesis --vault` against a real vaultd: the vault adopts the
// first enrolment token, and its value is in none of what the command
// printed and in no file of the new mesh.
func TestGenesisCommandDeliversToTheVault(t *testing.T) {
	v := vaulttest.Start(t)
	home := filepath.Join(t.TempDir(), "mesh")
	t.Setenv("COSIGN_PASSWORD", "a-test-password")

	var out bytes.Buffer
	root := newRootCmd()
	root.SetArgs([]string{"genesis", "--dir", home, "--name", "demo", "--vault", v.Socket})
	root.SetOut(&out)
	root.SetErr(&out)
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("meshgen genesis: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "delivered    mesh-enrolment-token to the vault") {
		t.Errorf("output does not say what was delivered:\n%s", out.String())
	}

	node := vaulttest.NewNode(t)
	sealed, err := v.Client.Seal(context.Background(), client.SealRequest{
		Name: genesis.EnrolmentToken, Spec: genesis.FoundationSecrets()[0].Spec(),
		Recipients: []string{node.Recipient().String()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if sealed.Origin != client.OriginGenesis {
		t.Fatalf("the vault holds %s with origin %q, want genesis", genesis.EnrolmentToken, sealed.Origin)
	}
	token := vaulttest.Open(t, node, sealed.Sealed[0].Ciphertext)
	if len(token) < 32 {
		t.Fatalf("token of %d bytes is too short to search for", len(token))
	}
	if bytes.Contains(out.Bytes(), token) {
		t.Error("meshgen genesis printed the enrolment token")
	}
	files := 0
	err = filepath.Walk(home, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		files++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, token) {
			t.Errorf("the enrolment token is in %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 5 {
		t.Fatalf("searched %d files of the new mesh; it should hold its key and repository", files)
	}
}
