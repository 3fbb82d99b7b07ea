package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"filippo.io/age"
	"github.com/meshgen/meshgen/vaultd"
	"github.com/meshgen/meshgen/vaultd/client"
)

// Example_twoPartyRotation is the reconciler's side of a two-party rotation:
// seal on every reconcile, render what each node must hold, and confirm each
// step from what hostd reports.
func Example_twoPartyRotation() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	// A vaultd on a unix socket (tests use vaulttest.Start instead).
	dir, _ := os.MkdirTemp("", "vault-example")
	defer os.RemoveAll(dir)
	vault, err := vaultd.Open(vaultd.Options{Dir: filepath.Join(dir, "vault")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer vault.Close()
	ln, err := vaultd.Listen("unix://" + filepath.Join(dir, "vault.sock"))
	if err != nil {
		fmt.Println(err)
		return
	}
	go vault.Serve(ctx, ln, vaultd.ServeOptions{Owner: -1})
	c := client.Dial(filepath.Join(dir, "vault.sock"))

	// Each node made its own age identity; the mesh knows their recipients.
	p, _ := age.GenerateX25519Identity()
	g, _ := age.GenerateX25519Identity()
	provider, consumer := p.Recipient().String(), g.Recipient().String()
	req := client.SealRequest{
		Name:       "postgres.gitea.db",
		Spec:       client.Spec{Rotation: client.TwoParty},
		Appliers:   []string{provider}, // the provider's run-once step creates the login
		Recipients: []string{consumer}, // gitea presents it
	}
	show := func(resp *client.SealResponse) {
		for _, s := range resp.Sealed {
			who := "consumer"
			if s.Recipient == provider {
				who = "provider"
			}
			fmt.Printf("  %s holds slot %s version %d (current %v)\n", who, s.Slot, s.Version, s.Current)
		}
	}
	resp, _ := c.Seal(ctx, req)
	fmt.Println("made:")
	show(resp)

	rot, _ := c.Rotate(ctx, req.Name)
	fmt.Println("rotation", rot.Phase, "waits on", rot.WaitsOn[0].Role)
	resp, _ = c.Seal(ctx, req)
	show(resp)

	// hostd reports the provider's step ran with version 2.
	rot, _ = c.ConfirmApplied(ctx, client.ConfirmRequest{Name: req.Name, Recipient: provider, Version: 2})
	fmt.Println("rotation", rot.Phase, "waits on", rot.WaitsOn[0].Role)
	resp, _ = c.Seal(ctx, req)
	show(resp)

	// hostd reports gitea recreated and connected with version 2.
	rot, _ = c.ConfirmRead(ctx, client.ConfirmRequest{Name: req.Name, Recipient: consumer, Version: 2})
	resp, _ = c.Seal(ctx, req)
	fmt.Println("rotation", rot.Phase, "waits on", rot.WaitsOn[0].Role, "slots", resp.Slots)
	rot, _ = c.ConfirmRetired(ctx, client.ConfirmRequest{Name: req.Name, Recipient: provider, Version: 1})
	fmt.Println("rotation", rot.Phase)
	// Output:
	// made:
	//   provider holds slot a version 1 (current true)
	//   consumer holds slot a version 1 (current true)
	// rotation applying waits on applier
	//   provider holds slot a version 1 (current true)
	//   provider holds slot b version 2 (current false)
	//   consumer holds slot a version 1 (current true)
	// rotation reading waits on reader
	//   provider holds slot a version 1 (current true)
	//   provider holds slot b version 2 (current false)
	//   consumer holds slot b version 2 (current true)
	// rotation retiring waits on applier slots [{b 2 current} {a 1 retiring}]
	// rotation done
}
