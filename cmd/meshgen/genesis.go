package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/meshgen/meshgen/genesis"
	"github.com/meshgen/meshgen/reconciler/sign"
	"github.com/meshgen/meshgen/vaultd/client"
)

func newGenesisCmd() *cobra.Command {
	var (
		dir, name, vault, passwordFile string
	)
	cmd := &cobra.Command{
		Use:   "genesis --dir DIR --name NAME [--vault SOCKET]",
		Short: "Make a new mesh: its repository, its signing key and its first secrets",
		Long: `Make a new mesh in DIR, which must not exist or must be empty:

  DIR/mesh.git        a bare git repository whose first commit on main holds
                      mesh.yaml, empty nodes/, catalog/ and assignments/, and
                      keys/reconciler.pub
  DIR/reconciler.key  the reconciler's signing key, in cosign's format,
                      encrypted with the password from $COSIGN_PASSWORD or
                      --password-file

With --vault, genesis also generates the foundation's first secrets (the first
enrolment token, mesh-enrolment-token) and delivers them to vaultd, encrypted
to the vault's own key; vaultd records them as the mesh's own, so it can rotate
them. Their values are never printed or written anywhere else.

Genesis makes no node's key (hostd init makes it on the node) and not the
vault's (vaultd makes its own). It never overwrites an existing mesh.`,
		Example: `  export COSIGN_PASSWORD=...
  meshgen genesis --dir /srv/mesh --name home --vault /run/vaultd/vault.sock`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			password, err := sign.ReadPassword(sign.PasswordSource{File: passwordFile})
			if err != nil {
				return err
			}
			defer clear(password)
			opts := genesis.Options{Home: dir, Name: name, Password: password}
			if vault != "" {
				c := client.Dial(vault)
				defer c.Close()
				opts.Vault = c
			}
			res, err := genesis.Make(cmd.Context(), opts)
			if err != nil {
				return err
			}
			printGenesis(cmd.OutOrStdout(), name, vault, res)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "directory to make the mesh in (must not exist, or be empty)")
	f.StringVar(&name, "name", "", "the mesh's name (lower-case letters, digits, dashes)")
	f.StringVar(&vault, "vault", os.Getenv("MESHGEN_VAULT"), "vaultd's unix `socket`, to deliver the foundation's first secrets to (default $MESHGEN_VAULT)")
	f.StringVar(&passwordFile, "password-file", "", "file holding the signing key's password (default: $COSIGN_PASSWORD)")
	_ = cmd.MarkFlagRequired("dir")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// printGenesis tells the operator what genesis made and what to do next. It
// names secrets, never their values.
func printGenesis(w io.Writer, name, vault string, res *genesis.Result) {
	fmt.Fprintf(w, "made mesh %q in %s\n", name, res.Home)
	fmt.Fprintf(w, "  repository   %s (main at %.12s)\n", res.Repo, res.Commit)
	fmt.Fprintf(w, "  signing key  %s (encrypted; its public half is %s on main)\n", res.Key, genesis.PubFile)
	for _, s := range res.Delivered {
		fmt.Fprintf(w, "  delivered    %s to the vault, as the mesh's own (rotatable)\n", s)
	}
	if len(res.Delivered) == 0 {
		fmt.Fprintln(w, "  no vault given: no secret was made; vaultd makes each one when first asked")
	}
	if vault == "" {
		vault = "SOCKET"
	}
	fmt.Fprintf(w, `
next steps:
  1. enrol each node: on it, `+"`hostd init --dir /etc/hostd`"+` makes its age key and
     prints its recipient; copy %[3]s to it (hostd trusts that copy, never
     the one on main) and write /etc/hostd/hostd.yaml (see examples/systemd).
  2. in a clone (git clone %[1]s), commit nodes/NODE.yaml with each
     node's recipient, your catalog (catalog/contracts, catalog/modules) and
     your assignments; check them with `+"`meshgen check --repo .`"+` and push to main.
  3. reconcile: meshgen reconcile --repo %[1]s --vault %[4]s --key %[2]s
     then on each node: hostd apply --once (or hostd.timer).
`, res.Repo, res.Key, genesis.PubFile, vault)
}
