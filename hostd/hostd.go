// Package hostd is the node side of meshgen: it fetches the node's signed
// declaration from branch node/<name>, verifies it against the key installed
// at enrolment, decrypts its sealed files with the node's age identity,
// applies it in declared order, records what worked, and pushes a report to
// branch status/<name>.
//
// The phases live in their own files: [Host.Fetch] (fetch.go), [Verify]
// (verify.go), decrypt.go, [Host.Apply] (apply.go, files.go, container.go,
// remove.go), record.go, push.go, run.go. Use [Init] once on a node to make
// its age identity, [New] to build a [Host] from a [Config] ([LoadConfig]
// reads the local file), then [Host.Once] for one poll-and-apply or
// [Host.Run] for the loop. Containers run through a [Runtime]; [podman.Podman] is the real one.
//
// # What hostd accepts
//
// Branch node/<name> holds declaration.json ([declaration.Marshal]),
// declaration.json.sig (see [VerifySignature] for the exact format, which is
// `cosign sign-blob --key`'s) and secrets/<id>.age (age ciphertext). A
// declaration that cannot be trusted is refused as a whole with a [*Refusal]
// naming every reason ([ErrUnsigned], [ErrBadSignature], [ErrWrongNode],
// [ErrWrongMesh], [ErrSealedMismatch], [ErrReplay], [ErrPathPolicy],
// [ErrInvalid]): nothing of it is applied and the last good declaration stays
// the one hostd holds the machine to.
//
// # The state directory
//
// Config.StateDir holds, each file replaced atomically:
//
//	state.json    what was applied: digests per resource, step markers
//	              (written only after a step exited 0, ADR 0052), container
//	              IDs, the paths of the files written from a secret (removed
//	              once no longer declared), the generation last applied in
//	              full, the last commit fetched and why it was refused if it was
//	target.json   the newest branch content that verified (ciphertext only)
//	refused.json  the last branch content refused, to say why on each poll
//	report.json   the last report ([declaration.Report]), read by `hostd status`
//	git/          the shallow cache node/<name> is fetched into: only the
//	              last commit fetched, started afresh on each fetch
//	lock          held while applying
//
// A crash at any point leaves these consistent: the next apply converges.
package hostd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"filippo.io/age"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/hostd/podman"
)

// Runtime runs containers. [podman.Podman] is the implementation on a real
// machine; its conformance runs in this package's tests.
type Runtime interface {
	// List returns every container labelled with the mesh, by name, in one
	// query; their env, mounts and ports need not be filled in.
	List(ctx context.Context, mesh string) (map[string]podman.Observed, error)
	// Inspect returns the full configuration of the named containers, in one
	// query.
	Inspect(ctx context.Context, names []string) (map[string]podman.Observed, error)
	// Run creates and starts a long-running container and returns its ID.
	Run(ctx context.Context, s podman.Spec) (string, error)
	// RunOnce runs a container to completion and removes it; a non-zero exit
	// is an [*podman.ExitError].
	RunOnce(ctx context.Context, s podman.Spec) error
	// Start starts a stopped container.
	Start(ctx context.Context, name string) error
	// Remove removes a container, running or not; a missing one is no error.
	Remove(ctx context.Context, name string) error
}

// Host applies one node's declarations.
type Host struct {
	cfg      Config
	rt       Runtime
	pub      []byte // the enrolment public key, PEM
	identity []age.Identity
	roots    []string
}

// New checks cfg, reads the enrolment public key and the age identity, and
// returns a Host. The runtime is podman with cfg.Podman unless cfg.Runtime is
// set.
func New(cfg Config) (*Host, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	pub, err := os.ReadFile(cfg.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("read the enrolment public key: %w (install the reconciler's cosign public key at publicKey)", err)
	}
	if _, err := loadVerifier(pub); err != nil {
		return nil, fmt.Errorf("enrolment public key %s: %w", cfg.PublicKey, err)
	}
	ids, err := readIdentity(cfg.Identity)
	if err != nil {
		return nil, err
	}
	h := &Host{cfg: cfg, rt: cfg.Runtime, pub: pub, identity: ids}
	if h.rt == nil {
		h.rt = podman.New(podman.Options{
			Binary: cfg.Podman.Binary, Root: cfg.Podman.Root, RunRoot: cfg.Podman.RunRoot, TmpDir: cfg.Podman.TmpDir,
			StopTimeout: cfg.Podman.StopTimeoutSeconds(), AllowPulls: cfg.AllowPulls,
		})
	}
	h.roots = append([]string{filepath.Clean(cfg.Root)}, cleanAll(cfg.ExtraRoots)...)
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("make state directory: %w", err)
	}
	return h, nil
}

func cleanAll(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = filepath.Clean(p)
	}
	return out
}

// Once polls the remote and applies: fetch branch node/<name> (one round
// trip when nothing is new), verify anything new, and apply the newest
// declaration that verified, which also corrects drift. It records the
// outcome, writes the textfile and pushes the report when a push URL is set.
//
// A refused declaration gives a report with Refused set and a [*Refusal]
// error; the last good declaration is applied again in its place. A failed
// resource gives a report with the failure and an error naming it.
func (h *Host) Once(ctx context.Context) (declaration.Report, error) {
	st, err := h.loadState()
	if err != nil {
		return declaration.Report{}, err
	}
	var refusal error
	have := st.Fetched
	if _, terr := h.loadTarget(); errors.Is(terr, fs.ErrNotExist) && st.Refused == "" {
		have = "" // nothing adopted (or target.json was lost): fetch again
	}
	br, err := h.Fetch(ctx, have)
	switch {
	case errors.Is(err, ErrNothingNew):
		if st.Refused != "" {
			// The branch still holds the refused commit: say why again,
			// from the copy kept, without fetching it again.
			var kept Branch
			if rerr := readJSON(h.statePath(refusedFile), &kept); rerr == nil {
				_, _, refusal = h.check(kept)
			}
			if refusal == nil {
				refusal = &Refusal{Reasons: []error{errors.New(st.Refused)}}
			}
		}
	case err != nil:
		return declaration.Report{}, err
	default:
		_, aerr := h.adopt(br)
		var r *Refusal
		if aerr != nil && !errors.As(aerr, &r) {
			// Not a verdict on the declaration (a disk error): try again
			// next poll.
			return declaration.Report{}, aerr
		}
		st.Fetched, st.Refused = br.Commit, ""
		if refusal = aerr; refusal != nil {
			st.Refused = strings.TrimPrefix(refusal.Error(), "declaration refused: ")
			if werr := writeJSON(h.statePath(refusedFile), &br); werr != nil {
				return declaration.Report{}, werr
			}
		}
		if err := h.saveState(st); err != nil {
			return declaration.Report{}, err
		}
	}
	rep, err := h.ApplyTarget(ctx)
	if st.Refused != "" {
		// The report says the newest commit was refused, while it shows
		// the last good declaration still held.
		rep.Refused = st.Refused
		err = errors.Join(err, writeJSON(h.statePath(reportFile), &rep))
	}
	err = errors.Join(refusal, err)
	return rep, errors.Join(err, h.publish(ctx, rep))
}
