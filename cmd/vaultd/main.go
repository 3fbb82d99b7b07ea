// Command vaultd is the mesh's vault: the only maker of shared secrets after
// genesis. It holds them encrypted at rest in --dir, seals them with age to
// the nodes that need them, and rotates them (design 27), answering the API of
// package vaultd/client on a unix socket only its owner may use.
//
//	vaultd --dir /var/lib/meshgen/vault --listen unix:///run/meshgen/vault.sock --nodes nodes.txt
package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshgen/meshgen/internal/cli"
	"github.com/meshgen/meshgen/vaultd"
)

func main() { cli.Main(newRootCmd()) }

// options are vaultd's flags.
type options struct {
	dir, listen, nodes string
	policy             time.Duration
	tls                vaultd.TLSOptions
}

func newRootCmd() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "vaultd --dir DIR --listen unix:///path/vault.sock",
		Short: "The mesh's vault: the only maker of shared secrets, sealing them to nodes",
		Long: `vaultd makes, holds, seals and rotates the mesh's shared secrets. Its records
are encrypted at rest to its own age identity, made in --dir on first start;
that identity never leaves. It answers only its socket's owner (the socket is
made 0600), or, on --listen tcp://host:port, clients with a certificate from
--tls-client-ca (mutual TLS; plain TCP is refused). No value is ever logged.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.dir == "" || o.listen == "" {
				return errors.New("--dir and --listen are required (see vaultd --help)")
			}
			return run(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", "", "the vault's directory: its identity, records and audit log (made 0700 on first start)")
	f.StringVar(&o.listen, "listen", "", "where to listen: unix:///path/vault.sock (mode 0600), or tcp://host:port with mutual TLS")
	f.StringVar(&o.nodes, "nodes", "", "a file of the mesh's node age recipients, one a line; seals to any other recipient are refused")
	f.DurationVar(&o.policy, "policy-interval", time.Minute, "how often to start rotations whose maximum age passed")
	f.StringVar(&o.tls.CertFile, "tls-cert", "", "vaultd's certificate file (PEM), for --listen tcp://host:port")
	f.StringVar(&o.tls.KeyFile, "tls-key", "", "vaultd's key file (PEM)")
	f.StringVar(&o.tls.ClientCAFile, "tls-client-ca", "", "the CA file (PEM) whose client certificates are accepted; mutual TLS is required on TCP")
	return cmd
}

func run(ctx context.Context, o options) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	v, err := vaultd.Open(vaultd.Options{Dir: o.dir, NodesFile: o.nodes})
	if err != nil {
		return err
	}
	defer v.Close()
	var ln net.Listener
	if strings.HasPrefix(o.listen, "tcp://") && o.tls != (vaultd.TLSOptions{}) {
		ln, err = vaultd.ListenTLS(o.listen, o.tls)
	} else {
		ln, err = vaultd.Listen(o.listen)
	}
	if err != nil {
		return err
	}
	log.Info("vaultd listening", "listen", o.listen, "recipient", v.Recipient())
	return v.Serve(ctx, ln, vaultd.ServeOptions{Log: log, Owner: -1, PolicyInterval: o.policy})
}
