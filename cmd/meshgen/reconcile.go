package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/meshgen/meshgen/reconciler/loop"
	"github.com/meshgen/meshgen/reconciler/sign"
	"github.com/meshgen/meshgen/vaultd/client"
)

// reconcileFlags are `meshgen reconcile`'s options.
type reconcileFlags struct {
	repo, key, passwordFile, cacheDir string
	vault                             vaultFlags
	watch                             bool
	interval                          time.Duration
}

func newReconcileCmd() *cobra.Command {
	var f reconcileFlags
	cmd := &cobra.Command{
		Use:   "reconcile --repo DIR_OR_URL --vault SOCKET --key reconciler.key [--watch]",
		Short: "Write every node's signed declaration to its branch",
		Long: `reconcile reads main of the mesh repository, resolves and renders every
node's declaration, asks vaultd to seal every secret to the nodes that need
it, signs each declaration with the reconciler's key (a cosign blob
signature, declaration.json.sig), and commits to node/<name> only the
branches whose content changed, with the generation raised by one and the
source commit in the message.

A refused mesh commits nothing and every reason is reported. Providers'
answers reported on status/<node> are delivered to their consumers, and the
same reports drive vaultd's rotations to the end (each applier, then each
reader, confirms by applying the new version). What a resolution decided
that the next must keep (ports, seat holders) is recorded on meshgen/state.

A node removed from the mesh (its nodes/<name>.yaml gone) whose branch
remains gets, once, a final signed declaration with no resources: its hostd
removes the containers it ran (their data stays) and the branch holds none
of its secrets. The branch is kept so the node's generation never goes back
if it is enrolled again.

The signing key is encrypted (cosign's format); its password is read from
COSIGN_PASSWORD or from --password-file.

With --watch, reconcile runs on every push to main or to status/<node>
(fsnotify on a local repository's refs; polling a remote every --interval)
and on every change in vaultd (its change token, polled every --interval,
moved: a value put, a rotation started), a burst of pushes coalesced into
one reconcile, and logs one JSON line per reconcile.`,
		Example: `  COSIGN_PASSWORD=... meshgen reconcile --repo /srv/mesh.git --vault /run/vaultd.sock --key reconciler.key --watch
  meshgen reconcile --repo https://git.example/mesh.git --vault /run/vaultd.sock --key reconciler.key --password-file /etc/meshgen/key.pw`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReconcile(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.repo, "repo", "", "the mesh repository: a local bare repository or a git URL")
	f.vault.register(fl)
	fl.StringVar(&f.key, "key", "", "the encrypted signing key (cosign format)")
	fl.StringVar(&f.passwordFile, "password-file", "", "a file holding the signing key's password (default: $COSIGN_PASSWORD)")
	fl.StringVar(&f.cacheDir, "cache-dir", "", "where a remote repository is cached (default: the user cache directory)")
	fl.BoolVar(&f.watch, "watch", false, "keep running, reconciling on every push")
	fl.DurationVar(&f.interval, "interval", 10*time.Second, "with --watch, how often a remote, and vaultd, are looked at")
	for _, req := range []string{"repo", "key"} {
		cmd.MarkFlagRequired(req)
	}
	return cmd
}

func runReconcile(cmd *cobra.Command, f reconcileFlags) error {
	pw, err := sign.ReadPassword(sign.PasswordSource{File: f.passwordFile})
	if err != nil {
		return err
	}
	signer, err := loadKeySigner(f.key, pw)
	if err != nil {
		return err
	}
	if loop.IsRemote(f.repo) && f.cacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("no cache directory for %s: give --cache-dir", f.repo)
		}
		f.cacheDir = filepath.Join(base, "meshgen", "remote-"+safeName(f.repo))
	}
	vault, err := f.vault.dial()
	if err != nil {
		return err
	}
	defer vault.Close()
	logger := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
	r, err := loop.New(loop.Options{Repo: f.repo, CacheDir: f.cacheDir, Vault: vault, Signer: signer, Logger: logger})
	if err != nil {
		return err
	}
	defer r.Close()
	if f.watch {
		if _, err := signer.wait(); err != nil {
			return err
		}
		return r.Watch(cmd.Context(), loop.WatchOptions{Interval: f.interval})
	}
	out, err := r.Once(cmd.Context())
	// The key is checked on every run, a reconcile that signed nothing
	// included: a wrong password is said now, not at the next change.
	if _, kerr := signer.wait(); kerr != nil {
		return kerr
	}
	if err != nil {
		return err
	}
	if out.InputsUnchanged {
		fmt.Fprintf(cmd.OutOrStdout(), "unchanged: main %s, no input changed since the last reconcile\n", short(out.Source))
		return nil
	}
	fmt.Fprintf(cmd.OutOrStdout(), "reconciled %s: %d written, %d removed, %d unchanged, %d waiting\n",
		short(out.Source), len(out.Written), len(out.Removed), len(out.Unchanged), len(out.Waiting))
	for _, n := range out.Written {
		fmt.Fprintf(cmd.OutOrStdout(), "  wrote node/%s\n", n)
	}
	for _, n := range out.Removed {
		fmt.Fprintf(cmd.OutOrStdout(), "  emptied node/%s: removed from the mesh\n", n)
	}
	return nil
}

// keySigner decrypts the signing key in the background while the reconcile
// reads its inputs: the key's scrypt then costs no time of its own, and a
// reconcile whose inputs did not change never waits for it to read them.
// It names the key by the sha256 of its file (loop's record of inputs), so
// knowing which key signs needs no decryption.
type keySigner struct {
	path string
	id   string
	done chan struct{}
	s    *sign.Signer
	err  error
}

// loadKeySigner reads the encrypted key at path and starts decrypting it.
func loadKeySigner(path string, password []byte) (*keySigner, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	sum := sha256.Sum256(b)
	k := &keySigner{path: path, id: "cosign key file " + hex.EncodeToString(sum[:]), done: make(chan struct{})}
	go func() {
		defer close(k.done)
		if k.s, k.err = sign.LoadSigner(b, password); k.err != nil {
			k.err = fmt.Errorf("%s: %w", path, k.err)
		}
	}()
	return k, nil
}

// wait returns the decrypted key, or why it could not be.
func (k *keySigner) wait() (*sign.Signer, error) {
	<-k.done
	return k.s, k.err
}

// Sign signs blob once the key is decrypted.
func (k *keySigner) Sign(blob []byte) ([]byte, error) {
	s, err := k.wait()
	if err != nil {
		return nil, err
	}
	return s.Sign(blob)
}

// SignerID names the key for the record of inputs.
func (k *keySigner) SignerID() string { return k.id }

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// safeName turns a URL into a directory name.
func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// vaultFlags say how to reach vaultd: its unix socket, or TCP with mutual
// TLS, as `meshgen vault` does.
type vaultFlags struct {
	socket, cert, key, ca string
}

func (v *vaultFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&v.socket, "vault", os.Getenv("MESHGEN_VAULT"), "vaultd's unix `socket`, or tcp://host:port (default $MESHGEN_VAULT)")
	fl.StringVar(&v.cert, "vault-cert", os.Getenv("MESHGEN_VAULT_CERT"), "client certificate `file` for a TCP vault (default $MESHGEN_VAULT_CERT)")
	fl.StringVar(&v.key, "vault-key", os.Getenv("MESHGEN_VAULT_KEY"), "client key `file` for a TCP vault (default $MESHGEN_VAULT_KEY)")
	fl.StringVar(&v.ca, "vault-ca", os.Getenv("MESHGEN_VAULT_CA"), "`file` of the CA that signed vaultd's certificate (default $MESHGEN_VAULT_CA)")
}

func (v *vaultFlags) dial() (*client.Client, error) {
	switch {
	case v.socket == "":
		return nil, vaultHint{errors.New("no vault socket given"), "pass --vault /path/vault.sock or set MESHGEN_VAULT"}
	case strings.HasPrefix(v.socket, "tcp://"):
		if v.cert == "" || v.key == "" || v.ca == "" {
			return nil, vaultHint{fmt.Errorf("vault %s is on TCP, which needs mutual TLS", v.socket), "pass --vault-cert, --vault-key and --vault-ca"}
		}
		cfg, err := client.LoadTLS(v.cert, v.key, v.ca)
		if err != nil {
			return nil, err
		}
		return client.DialTLS(v.socket, cfg), nil
	}
	return client.Dial(v.socket), nil
}
