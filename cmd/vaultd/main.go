// Command vaultd is the mesh's vault: the only maker of shared secrets after
// genesis. It holds them encrypted at rest in --dir, seals them with age to
// the nodes that need them, and rotates them (design 27), answering the API of
// package vaultd/client on a unix socket only its owner may use.
//
//	vaultd --dir /var/lib/meshgen/vault --listen unix:///run/meshgen/vault.sock --nodes nodes.txt
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/meshgen/meshgen/vaultd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "vaultd: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("vaultd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "the vault's `directory`: its identity, records and audit log (made 0700 on first start)")
	listen := fs.String("listen", "", "where to listen: unix:///path/vault.sock (mode 0600), or tcp://host:port with mutual TLS")
	nodes := fs.String("nodes", "", "a `file` of the mesh's node age recipients, one a line; seals to any other recipient are refused")
	policy := fs.Duration("policy-interval", time.Minute, "how often to start rotations whose maximum age passed")
	var tlsOpts vaultd.TLSOptions
	fs.StringVar(&tlsOpts.CertFile, "tls-cert", "", "vaultd's certificate `file` (PEM), for --listen tcp://host:port")
	fs.StringVar(&tlsOpts.KeyFile, "tls-key", "", "vaultd's key `file` (PEM)")
	fs.StringVar(&tlsOpts.ClientCAFile, "tls-client-ca", "", "the CA `file` (PEM) whose client certificates are accepted; mutual TLS is required on TCP")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *listen == "" {
		fs.Usage()
		return fmt.Errorf("--dir and --listen are required")
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	v, err := vaultd.Open(vaultd.Options{Dir: *dir, NodesFile: *nodes})
	if err != nil {
		return err
	}
	defer v.Close()
	var ln net.Listener
	if strings.HasPrefix(*listen, "tcp://") && tlsOpts != (vaultd.TLSOptions{}) {
		ln, err = vaultd.ListenTLS(*listen, tlsOpts)
	} else {
		ln, err = vaultd.Listen(*listen)
	}
	if err != nil {
		return err
	}
	log.Info("vaultd listening", "listen", *listen, "recipient", v.Recipient())
	return v.Serve(ctx, ln, vaultd.ServeOptions{Log: log, Owner: -1, PolicyInterval: *policy})
}
