// Command meshgen is the operator's CLI and the reconciler: it checks a mesh
// repository, shows a pull request's plan, reconciles node branches, and talks
// to vaultd.
package main

import (
	"github.com/spf13/cobra"

	"github.com/meshgen/meshgen/internal/cli"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "meshgen",
		Short:         "Reconcile a fleet of machines from one git repository",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newCheckCmd(),
		newPlanCmd(),
		newReconcileCmd(),
		newStatusCmd(),
		newGraphCmd(),
		newVaultCmd(),
		newGenesisCmd(),
	)
	return root
}

func main() { cli.Main(newRootCmd()) }
