// Command hostd runs on each node: it fetches the node's signed declaration
// from branch node/<name>, verifies it against the key installed at
// enrolment, decrypts its secrets with the node's own age identity, applies it
// in order, and pushes a report to status/<name>.
//
//	hostd init --dir /etc/hostd          make the node's age identity, print its recipient
//	hostd apply --once                   poll and apply once (a systemd timer's job)
//	hostd run                            poll and apply every interval (a service's job)
//	hostd status [--json]                the last report
//
// Exit status: 0 when the apply succeeded; 1 when it failed, a declaration was
// refused, or hostd could not run.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/meshgen/meshgen/hostd"
	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/internal/cli"
)

const defaultConfig = "/etc/hostd/hostd.yaml"

// hintError is an error with a hint for the operator.
type hintError struct {
	err  error
	hint string
}

func (e hintError) Error() string { return e.err.Error() }
func (e hintError) Unwrap() error { return e.err }
func (e hintError) Hint() string  { return e.hint }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "hostd",
		Short: "Apply this node's signed declaration from the mesh repository",
		Long: `hostd applies this node's declaration: it fetches branch node/<name> of the
mesh repository, verifies its signature against the public key installed at
enrolment, decrypts its secrets with this node's age identity, applies it in
declared order, and pushes a report to branch status/<name>.

Its configuration (default ` + defaultConfig + `) is documented in
hostd.Config; see examples/systemd for the units.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newInitCmd(), newApplyCmd(), newRunCmd(), newStatusCmd())
	return root
}

func newInitCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Make this node's age identity and print its recipient",
		Long: `init makes this node's age identity in <dir>/age-identity.txt (mode 0600) and
prints its recipient, the line to put in nodes/<node>.yaml. The identity never
leaves the node. Running it again prints the same recipient.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := hostd.Init(dir)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), r)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "/etc/hostd", "directory for the identity")
	return cmd
}

func addConfigFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVarP(path, "config", "c", defaultConfig, "hostd configuration file")
}

func open(path string) (*hostd.Host, error) {
	cfg, err := hostd.LoadConfig(path)
	if err != nil {
		return nil, hintError{err, "write the file as documented in hostd.Config, or pass --config"}
	}
	return hostd.New(cfg)
}

func newApplyCmd() *cobra.Command {
	var (
		config string
		once   bool
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "apply --once",
		Short: "Poll the node's branch once and apply",
		Long: `apply --once fetches branch node/<name> (one round trip when nothing is new),
verifies anything new, applies the newest declaration that verified (correcting
drift), records it, and pushes the report. It prints the report and exits 0 only
when everything applied.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !once {
				return hintError{errors.New("apply needs --once"), "use `hostd run` to poll and apply every interval"}
			}
			h, err := open(config)
			if err != nil {
				return err
			}
			rep, err := h.OnceLocked(cmd.Context())
			if perr := printReport(cmd.OutOrStdout(), rep, asJSON); perr != nil {
				return perr
			}
			return err
		},
	}
	addConfigFlag(cmd, &config)
	cmd.Flags().BoolVar(&once, "once", false, "poll and apply once, then exit")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func newRunCmd() *cobra.Command {
	var config string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Poll and apply every interval until stopped",
		Long: `run polls and applies every interval (jittered), backing off while the remote
cannot be reached and keeping the last good declaration applied meanwhile.
Each apply's outcome is logged to standard error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := open(config)
			if err != nil {
				return err
			}
			log := cmd.ErrOrStderr()
			return h.Run(cmd.Context(), hostd.RunOptions{OnReport: func(rep declaration.Report, err error) {
				if err != nil {
					fmt.Fprintf(log, "hostd: %v\n", err)
				}
				// Log an apply that did something; a quiet poll stays quiet.
				if rep.Node != "" && !quiet(rep) {
					fmt.Fprint(log, hostd.FormatText(rep))
				}
			}})
		},
	}
	addConfigFlag(cmd, &config)
	return cmd
}

func newStatusCmd() *cobra.Command {
	var (
		config string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print the last report",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := open(config)
			if err != nil {
				return err
			}
			rep, err := h.Status()
			if err != nil {
				return err
			}
			if err := printReport(cmd.OutOrStdout(), rep, asJSON); err != nil {
				return err
			}
			if !rep.OK() {
				return cli.ExitError{Code: 1}
			}
			return nil
		},
	}
	addConfigFlag(cmd, &config)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// quiet reports whether an apply changed nothing and had nothing to say.
func quiet(rep declaration.Report) bool {
	if rep.Refused != "" || len(rep.Removed)+len(rep.RemovedFiles)+len(rep.LeftFiles) > 0 {
		return false
	}
	for _, r := range rep.Resources {
		if r.Outcome != declaration.Unchanged && r.Outcome != declaration.Kept {
			return false
		}
	}
	return true
}

func printReport(w io.Writer, rep declaration.Report, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if rep.Node == "" {
		return nil
	}
	_, err := io.WriteString(w, hostd.FormatText(rep))
	return err
}

func main() { cli.Main(newRootCmd()) }
