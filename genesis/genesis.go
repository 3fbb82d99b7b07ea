// Package genesis makes a new mesh: the one act before which there is no
// repository, no signing key and no vault-held secret.
//
// [Make] creates, in a new directory (the mesh's home):
//
//   - mesh.git, a local bare git repository (the embedded default) whose
//     first commit on main holds mesh.yaml (the name and the defaults), empty
//     nodes/, catalog/ and assignments/ folders (kept by a .gitkeep), a
//     README saying what goes where, and keys/reconciler.pub;
//   - reconciler.key, the reconciler's signing key, made here because this is
//     where it is used, in cosign's format and encrypted at rest with the
//     password given (DESIGN.md "Secrets": a private key is made where it is
//     used and never leaves).
//
// Keys are made where they are used, so genesis never makes a node's age
// identity (`hostd init` makes it on the node) nor the vault's (vaultd makes
// its own on first start).
//
// # The foundation's first secrets
//
// Design 27 ("Genesis") has genesis generate what must exist before the vault
// can make it, deliver it to the vault, and have the vault record it as the
// mesh's own, so the vault can rotate it later. That is the one time anything
// but the vault makes a shared secret.
//
// In meshgen the list is exactly [FoundationSecrets]: the first enrolment
// token, "mesh-enrolment-token". Design 27 also lists the store's superuser,
// the broker's admin, bus accounts and the controller's store logins, because
// there the vault is installed on a base the store, the broker and the
// controller build first. Here vaultd is a daemon that runs before the first
// reconcile and needs no store, broker or bus; every seat credential a
// catalog's module needs (a broker's admin, a store's superuser) is a secret
// requirement the vault makes on the first reconcile, like any other. The
// enrolment token is different: the operator receives it before any node
// or module exists, so it is made now.
//
// Each value is random, generated in memory, encrypted with age to the
// vault's own recipient and handed to the vault's adopt call. It is never
// printed, logged, put in an error or written to disk in clear; it lands in
// the vault's store and nowhere else.
//
// Genesis never overwrites a mesh: [Make] refuses a home that exists and is
// not empty with an error wrapping [ErrExists]. It builds everything in a
// temporary directory beside the home and moves it into place only after the
// vault adopted the secrets, so a failure leaves nothing behind.
package genesis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	schema "github.com/meshgen/meshgen/catalog-schema"
)

// The defaults genesis writes into mesh.yaml.
const (
	// DefaultRoot is where a node keeps its assignments' data unless the
	// node states its own root (design 27: the default under /var/lib).
	DefaultRoot = schema.DefaultRoot
	// DefaultPollInterval is how often hostd polls its branch.
	DefaultPollInterval = "1m"
)

// The names of what genesis makes inside the mesh's home.
const (
	RepoDir = "mesh.git"       // the bare repository
	KeyFile = "reconciler.key" // the encrypted signing key
	// PubFile is where the signing key's public half stands on main.
	PubFile = "keys/reconciler.pub"
)

// ErrExists is wrapped by the error [Make] returns when the mesh's home
// exists and is not empty.
var ErrExists = errors.New("a mesh or other files are already there")

// Options says what mesh to make and where.
type Options struct {
	// Home is the directory the mesh is made in. It must not exist, or be
	// empty.
	Home string
	// Name is the mesh's name: lower-case letters, digits and dashes,
	// starting with a letter, at most 63 characters.
	Name string
	// Password encrypts the signing key at rest. It must not be empty.
	Password []byte
	// Vault receives the foundation's first secrets. When nil, none are
	// made: the vault makes every secret when it is first asked, and the
	// result says so.
	Vault Vault
	// Now is the first commit's time; nil means time.Now.
	Now func() time.Time
}

// Result is what [Make] made.
type Result struct {
	Home string // the mesh's home, absolute
	Repo string // the bare repository, absolute
	Key  string // the encrypted signing key, absolute
	// PublicKey is the PEM of the signing key's public half, as committed to
	// keys/reconciler.pub.
	PublicKey []byte
	// Commit is the hash of the first commit on main.
	Commit string
	// Delivered names the foundation secrets the vault adopted, in order;
	// empty when no vault was given.
	Delivered []string
}

var meshName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// Make makes a new mesh as the package doc describes. It refuses a home that
// exists and is not empty (wrapping [ErrExists]) and leaves nothing behind
// when it fails.
func Make(ctx context.Context, opts Options) (*Result, error) {
	if !meshName.MatchString(opts.Name) {
		return nil, fmt.Errorf("mesh name %q is not valid: use lower-case letters, digits and dashes, starting with a letter (at most 63)", opts.Name)
	}
	if opts.Home == "" {
		return nil, errors.New("no directory given for the new mesh: name one with --dir")
	}
	home, err := filepath.Abs(opts.Home)
	if err != nil {
		return nil, fmt.Errorf("mesh directory %q: %w", opts.Home, err)
	}
	if err := refuseExisting(home); err != nil {
		return nil, err
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	private, public, err := signingKey(opts.Password)
	if err != nil {
		return nil, err
	}
	defer clear(private) // encrypted, but no copy need outlive the file

	parent := filepath.Dir(home)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("make the folder for mesh directory %q: %w", home, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(home)+".genesis-")
	if err != nil {
		return nil, fmt.Errorf("make a temporary directory beside %q: %w", home, err)
	}
	moved := false
	defer func() {
		if !moved {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("restrict %q: %w", tmp, err)
	}
	if err := writeFileSync(filepath.Join(tmp, KeyFile), private, 0o600); err != nil {
		return nil, fmt.Errorf("write the signing key: %w", err)
	}
	commit, err := writeFirstCommit(filepath.Join(tmp, RepoDir), opts.Name, firstFiles(opts.Name, public), now())
	if err != nil {
		return nil, fmt.Errorf("make the mesh repository: %w", err)
	}
	var delivered []string
	if opts.Vault != nil {
		if delivered, err = deliver(ctx, opts.Vault); err != nil {
			return nil, err
		}
	}
	// Built in private (0700); in place, others may read the repository (a
	// git daemon, a node on this machine) but not the key, which is 0600.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("open %q to readers: %w", tmp, err)
	}
	// Everything worked: move the mesh into place. rename(2) replaces a
	// directory only when it is empty (os.Rename refuses any directory), so
	// anything that appeared there since the check above is still refused.
	if err := syscall.Rename(tmp, home); err != nil {
		return nil, fmt.Errorf("move the new mesh to %q: %w (the vault already adopted %v: rotate them once the mesh is in place)", home, err, delivered)
	}
	moved = true
	return &Result{
		Home:      home,
		Repo:      filepath.Join(home, RepoDir),
		Key:       filepath.Join(home, KeyFile),
		PublicKey: public,
		Commit:    commit,
		Delivered: delivered,
	}, nil
}

// refuseExisting returns an error wrapping ErrExists when home exists and is
// not an empty directory.
func refuseExisting(home string) error {
	fi, err := os.Stat(home)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mesh directory %q: %w", home, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("mesh directory %q is a file: %w; genesis never overwrites anything, choose another --dir", home, ErrExists)
	}
	entries, err := os.ReadDir(home)
	if err != nil {
		return fmt.Errorf("mesh directory %q: %w", home, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("mesh directory %q is not empty: %w; genesis never overwrites a mesh, choose another --dir", home, ErrExists)
	}
	return nil
}

// writeFileSync writes data to a new file at path with mode and syncs it.
func writeFileSync(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
