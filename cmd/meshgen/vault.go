package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// vaultHint is an error with a hint meshgen prints after it.
type vaultHint struct {
	err  error
	hint string
}

func (h vaultHint) Error() string { return h.err.Error() }
func (h vaultHint) Unwrap() error { return h.err }
func (h vaultHint) Hint() string  { return h.hint }

func newVaultCmd() *cobra.Command {
	var socket, cert, key, ca string
	cmd := &cobra.Command{
		Use:   "vault",
		Short: "Deliver, rotate and inspect the mesh's secrets held by vaultd",
		Long: `Talk to vaultd, the only maker of the mesh's shared secrets, over its unix
socket (--vault, or $MESHGEN_VAULT), or over TCP with mutual TLS
(--vault tcp://host:port with --vault-cert, --vault-key and --vault-ca).
No value is ever printed.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&socket, "vault", os.Getenv("MESHGEN_VAULT"), "vaultd's unix `socket`, or tcp://host:port (default $MESHGEN_VAULT)")
	pf.StringVar(&cert, "vault-cert", os.Getenv("MESHGEN_VAULT_CERT"), "client certificate `file` for a TCP vault (default $MESHGEN_VAULT_CERT)")
	pf.StringVar(&key, "vault-key", os.Getenv("MESHGEN_VAULT_KEY"), "client key `file` for a TCP vault (default $MESHGEN_VAULT_KEY)")
	pf.StringVar(&ca, "vault-ca", os.Getenv("MESHGEN_VAULT_CA"), "`file` of the CA that signed vaultd's certificate (default $MESHGEN_VAULT_CA)")
	dial := func() (*client.Client, error) {
		switch {
		case socket == "":
			return nil, vaultHint{errors.New("no vault socket given"), "pass --vault /path/vault.sock or set MESHGEN_VAULT"}
		case strings.HasPrefix(socket, "tcp://"):
			if cert == "" || key == "" || ca == "" {
				return nil, vaultHint{fmt.Errorf("vault %s is on TCP, which needs mutual TLS", socket), "pass --vault-cert, --vault-key and --vault-ca"}
			}
			cfg, err := client.LoadTLS(cert, key, ca)
			if err != nil {
				return nil, err
			}
			return client.DialTLS(socket, cfg), nil
		}
		return client.Dial(socket), nil
	}
	cmd.AddCommand(newVaultPutCmd(dial), newVaultRotateCmd(dial), newVaultStatusCmd(dial))
	return cmd
}

func newVaultPutCmd(dial func() (*client.Client, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "put NAME",
		Short: "Deliver an operator's value (read from stdin, or asked for on a terminal)",
		Long: `Deliver an operator's secret value to vaultd, such as an external API key.
The value is read from standard input (one trailing newline is dropped), or
asked for twice without echo on a terminal. It is sealed to the vault's own
age recipient here, so it never crosses the socket in clear. vaultd never
replaces an operator's value: delivering a new one is how it changes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dial()
			if err != nil {
				return err
			}
			defer c.Close()
			value, err := readVaultValue(cmd.InOrStdin(), cmd.ErrOrStderr(), args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			rcpt, err := c.Recipient(ctx)
			if err != nil {
				return err
			}
			ct, err := client.SealToVault(rcpt, value)
			if err != nil {
				return err
			}
			resp, err := c.Put(ctx, client.PutRequest{Name: args[0], Ciphertext: ct})
			if err != nil {
				return fmt.Errorf("put %s: %w", args[0], err)
			}
			if resp.Unchanged {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: unchanged (version %d)\n", resp.Name, resp.Version)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: version %d delivered\n", resp.Name, resp.Version)
			return nil
		},
	}
	return cmd
}

// readVaultValue reads the value from a terminal (twice, without echo) or from
// a pipe. It never prints it.
func readVaultValue(in io.Reader, prompt io.Writer, name string) ([]byte, error) {
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(prompt, "value of %s: ", name)
		a, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(prompt)
		if err != nil {
			return nil, fmt.Errorf("read the value: %w", err)
		}
		fmt.Fprintf(prompt, "again: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(prompt)
		if err != nil {
			return nil, fmt.Errorf("read the value: %w", err)
		}
		if !bytes.Equal(a, b) {
			return nil, errors.New("the two values differ; nothing was delivered")
		}
		return checkVaultValue(a)
	}
	b, err := io.ReadAll(io.LimitReader(in, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read the value from stdin: %w", err)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	return checkVaultValue(b)
}

func checkVaultValue(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, vaultHint{errors.New("no value given"), "pipe it in: `meshgen vault put NAME < file`, or run on a terminal to be asked"}
	}
	return b, nil
}

func newVaultRotateCmd(dial func() (*client.Client, error)) *cobra.Command {
	var abandon bool
	cmd := &cobra.Command{
		Use:   "rotate NAME",
		Short: "Start (or abandon) a rotation of a secret the mesh owns",
		Long: `Ask vaultd to rotate a secret: it makes the new value, and the reconciler
carries the rotation through its steps as nodes report them (design 27):
a two-party secret moves its readers to the unused credential only after the
provider ensured it, and retires the old one only after every reader moved.
An operator's value is not rotated by the vault: deliver a new one with
meshgen vault put. --abandon gives up a rotation before the old credential is
retired.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dial()
			if err != nil {
				return err
			}
			defer c.Close()
			var rot *client.Rotation
			if abandon {
				rot, err = c.Abandon(cmd.Context(), args[0])
			} else {
				rot, err = c.Rotate(cmd.Context(), args[0])
			}
			if err != nil {
				return fmt.Errorf("rotate %s: %w", args[0], err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), describeRotation(rot))
			return nil
		},
	}
	cmd.Flags().BoolVar(&abandon, "abandon", false, "abandon the rotation in progress")
	return cmd
}

// describeRotation says where a rotation stands and whom it waits on.
func describeRotation(r *client.Rotation) string {
	if r == nil {
		return "no rotation in progress"
	}
	if r.Phase == client.PhaseDone {
		return fmt.Sprintf("%s: at version %d, the rotation waits on nobody", r.Name, r.To)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s rotation %d -> %d %s", r.Name, r.Kind, r.From, r.To, r.Phase)
	if r.Abandoned {
		b.WriteString(" (abandoned)")
	}
	if len(r.WaitsOn) > 0 {
		b.WriteString(", waits on ")
		for i, p := range r.WaitsOn {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s %s", p.Role, p.Recipient)
		}
	}
	return b.String()
}

func newVaultStatusCmd(dial func() (*client.Client, error)) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show every secret, its origin and version, and every rotation and whom it waits on",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "json" {
				return vaultHint{fmt.Errorf("unknown format %q", format), "use --format text or --format json"}
			}
			c, err := dial()
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := c.Status(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if format == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tORIGIN\tKIND\tVERSION\tROTATION")
			for _, s := range st.Secrets {
				rot := "-"
				switch {
				case s.Rotation != nil:
					rot = strings.TrimPrefix(describeRotation(s.Rotation), s.Name+": ")
				case s.NotRotatable != "":
					rot = "not rotatable: " + s.NotRotatable
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", s.Name, s.Origin, s.Kind, s.Version, rot)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output `format`: text or json")
	return cmd
}
