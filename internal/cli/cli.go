// Package cli is what the three binaries (meshgen, hostd, vaultd) share: how
// a command runs until it is interrupted, and how its error becomes the
// process's output and exit code.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// ExitError ends a command with Code without printing anything more: the
// command has already said what it had to (for example `meshgen plan
// --detailed-exitcode` returning 2 when there are changes).
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Main runs root until it returns or the process gets SIGINT or SIGTERM
// (which cancel its context), prints its error, and exits with its code. It
// is the only place a binary exits.
func Main(root *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := root.ExecuteContext(ctx)
	stop()
	if err != nil {
		os.Exit(Report(os.Stderr, root.Name(), err))
	}
}

// Report writes err to w as "<name>: <err>", followed by "<name>: hint: ..."
// when an error in its chain has a Hint() string method, and returns the exit
// code: an [ExitError]'s code, printed as nothing, else 1.
func Report(w io.Writer, name string, err error) int {
	var ee ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	fmt.Fprintf(w, "%s: %v\n", name, err)
	var h interface{ Hint() string }
	if errors.As(err, &h) && h.Hint() != "" {
		fmt.Fprintf(w, "%s: hint: %s\n", name, h.Hint())
	}
	return 1
}
