package genesis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// The installer test of design 27: genesis generates exactly the foundation's
// first secrets and delivers them to the vault (a real vaultd over its
// socket), recorded as the mesh's own and so rotatable; each value is in the
// vault and nowhere else: not in the mesh's home, not in any git object, not
// in the vault's directory in clear, not in anything genesis reports.
func TestGenesisDeliversToARealVault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := vaulttest.Start(t)
	res := makeMesh(t, v.Client)

	st, err := v.Client.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, s := range st.Secrets {
		held = append(held, s.Name)
		if s.Origin != client.OriginGenesis {
			t.Errorf("%s has origin %q, want %q (made by genesis, the mesh's own)", s.Name, s.Origin, client.OriginGenesis)
		}
	}
	var want []string
	for _, s := range FoundationSecrets() {
		want = append(want, s.Name)
	}
	if fmt.Sprint(held) != fmt.Sprint(want) {
		t.Fatalf("the vault holds %v after genesis, want exactly %v", held, want)
	}

	// Read the value the way a node would: sealed to a node's key.
	node := vaulttest.NewNode(t)
	sealed, err := v.Client.Seal(ctx, client.SealRequest{
		Name:       EnrolmentToken,
		Spec:       FoundationSecrets()[0].Spec(),
		Recipients: []string{node.Recipient().String()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if sealed.Origin != client.OriginGenesis || sealed.Version != 1 {
		t.Fatalf("sealing %s gave origin %q version %d: the vault made a new value instead of the adopted one", EnrolmentToken, sealed.Origin, sealed.Version)
	}
	value := vaulttest.Open(t, node, sealed.Sealed[0].Ciphertext)
	if !regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`).Match(value) {
		t.Fatalf("the adopted enrolment token is not 43 base64url characters (len %d)", len(value))
	}

	var out bytes.Buffer
	fmt.Fprintf(&out, "%+v\n", *res)
	assertNowhere(t, res, value, out.Bytes())
	err = filepath.Walk(v.Dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, value) {
			t.Errorf("the enrolment token is in clear in the vault's %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The mesh's own: the vault may rotate it (an operator's value it may not).
	if _, err := v.Client.Rotate(ctx, EnrolmentToken); err != nil {
		t.Errorf("rotate %s: %v; a secret genesis made must be rotatable", EnrolmentToken, err)
	}
}

// A vault that refuses the delivery (here: it already holds another value
// under the name) fails genesis, and genesis leaves no mesh behind.
func TestGenesisRefusedByTheVaultLeavesNothing(t *testing.T) {
	t.Parallel()
	v := vaulttest.Start(t)
	makeMesh(t, v.Client) // the vault now holds this mesh's token

	parent := t.TempDir()
	_, err := Make(context.Background(), Options{Home: filepath.Join(parent, "mesh"), Name: "demo", Password: testPassword, Vault: v.Client})
	if !errors.Is(err, client.ErrConflict) {
		t.Fatalf("second genesis against the same vault: err = %v, want a conflict", err)
	}
	if s := snapshot(t, parent); s != "" {
		t.Errorf("a refused genesis left files:\n%s", s)
	}
}
