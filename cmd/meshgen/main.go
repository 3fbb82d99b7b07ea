// Command meshgen is the operator's CLI and the reconciler: it checks a mesh
// repository, shows a pull request's plan, reconciles node branches, and talks
// to vaultd.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// exitError carries an exit code other than 1 (for example `plan
// --detailed-exitcode`) without printing anything more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		os.Exit(report(err))
	}
}

// report prints err (unless it only carries an exit code) and returns the
// process exit code.
func report(err error) int {
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintf(os.Stderr, "meshgen: %v\n", err)
	var h interface{ Hint() string }
	if errors.As(err, &h) && h.Hint() != "" {
		fmt.Fprintf(os.Stderr, "meshgen: hint: %s\n", h.Hint())
	}
	return 1
}
