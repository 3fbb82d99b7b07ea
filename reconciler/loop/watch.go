package loop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/meshgen/meshgen/reconciler/branch"
)

// WatchOptions configure [Reconciler.Watch].
type WatchOptions struct {
	// Interval is how often a remote is polled, and how often a local
	// repository is looked at even without an event; default 10s.
	Interval time.Duration
	// Quiet is how long refs must stay still before a reconcile, so a burst
	// of pushes is one reconcile; default 200ms.
	Quiet time.Duration
	// Reconciled, when set, is called after each reconcile (for tests and
	// metrics).
	Reconciled func(*Outcome, error)
}

// Watch reconciles now and then after every change of main, of a
// status/<node> branch (a provider's answer or a confirmation arrives
// there) or of vaultd (its change token moved: a put, an operator's
// rotation, one a maximum age started), until ctx ends. A local bare
// repository is watched with fsnotify on its refs and packed-refs and looked
// at every Interval; a remote is polled every Interval. A failed reconcile is
// logged and retried at the next change or interval; only ctx ends Watch.
func (r *Reconciler) Watch(ctx context.Context, opts WatchOptions) error {
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Second
	}
	if opts.Quiet <= 0 {
		opts.Quiet = 200 * time.Millisecond
	}
	events := make(chan struct{}, 1)
	poke := func() {
		select {
		case events <- struct{}{}:
		default:
		}
	}
	if r.remote == nil {
		w, err := r.watchRefs(poke)
		if err != nil {
			return err
		}
		defer w.Close()
	}
	ticker := time.NewTicker(opts.Interval)
	defer ticker.Stop()
	var lastRefs, lastVault string
	run := func() {
		if r.remote != nil {
			if err := r.remote.Fetch(ctx, branch.MainRef, branch.StatusRefs+"*"); err != nil {
				r.log.Error("poll remote", "error", err.Error())
				return
			}
		}
		refs, err := fingerprint(r.dir)
		if err != nil {
			r.log.Error("read refs", "error", err.Error())
			return
		}
		vault, err := r.vaultDigest(ctx)
		if err != nil {
			r.log.Error("look at vaultd", "error", err.Error())
			return
		}
		if refs == lastRefs && vault == lastVault {
			return
		}
		out, err := r.Once(ctx)
		if err == nil || out.Refused {
			// Done (a refused main is not retried until something
			// changes). The vault is read again after the reconcile: the
			// secrets it made change it.
			lastRefs = refs
			var verr error
			if lastVault, verr = r.vaultDigest(ctx); verr != nil {
				lastVault = ""
			}
		}
		if opts.Reconciled != nil {
			opts.Reconciled(out, err)
		}
	}
	run()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			run()
		case <-events:
			// Coalesce: wait until refs stay still for Quiet.
			quiet := time.NewTimer(opts.Quiet)
		settle:
			for {
				select {
				case <-ctx.Done():
					quiet.Stop()
					return nil
				case <-events:
					quiet.Reset(opts.Quiet)
				case <-quiet.C:
					break settle
				}
			}
			run()
		}
	}
}

// watchRefs watches the directories a push to main or to status/<node>
// changes: refs/heads (main), refs/heads/status, and the repository
// directory itself (packed-refs).
func (r *Reconciler) watchRefs(poke func()) (*fsnotify.Watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", r.dir, err)
	}
	gitDir := r.dir
	if fi, err := filepath.Glob(filepath.Join(r.dir, ".git")); err == nil && len(fi) == 1 {
		gitDir = fi[0]
	}
	for _, d := range []string{gitDir, filepath.Join(gitDir, "refs", "heads"), filepath.Join(gitDir, "refs", "heads", "status")} {
		if err := w.Add(d); err != nil && !strings.Contains(d, "status") {
			w.Close()
			return nil, fmt.Errorf("watch %s: %w", d, err)
		}
	}
	go func() {
		for {
			select {
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				base := filepath.Base(ev.Name)
				if base == "main" || base == "packed-refs" || strings.Contains(ev.Name, "status") {
					poke()
				}
				if base == "status" && ev.Has(fsnotify.Create) {
					w.Add(ev.Name) // the first report made the directory
					poke()
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
				poke()
			}
		}
	}()
	return w, nil
}

// fingerprint names the state of main and every status/<node> branch.
func fingerprint(dir string) (string, error) {
	repo, err := branch.OpenGit(dir)
	if err != nil {
		return "", err
	}
	refs, err := repo.References()
	if err != nil {
		return "", err
	}
	var parts []string
	err = refs.ForEach(func(ref *plumbing.Reference) error {
		n := ref.Name().String()
		if n == branch.MainRef || strings.HasPrefix(n, branch.StatusRefs) {
			parts = append(parts, n+" "+ref.Hash().String())
		}
		return nil
	})
	sort.Strings(parts)
	return strings.Join(parts, "\n"), err
}

// vaultDigest names the state of vaultd that changes what is sealed. A
// vault offering a change token ([generationer], vaultd's GET
// /v1/generation) is named by it: a few bytes that move with every record
// vaultd writes (a put, a rotation started by an operator or by a maximum
// age, a confirmation) and never go back, so an idle watch asks vaultd for
// no secret's status. A vault without one is named by each secret's version
// and rotation phase, from its whole status. A vault that is not a
// [Rotator] has none.
func (r *Reconciler) vaultDigest(ctx context.Context) (string, error) {
	if gen, ok := r.opts.Vault.(generationer); ok {
		g, err := gen.Generation(ctx)
		if err != nil {
			return "", fmt.Errorf("vault generation: %w", err)
		}
		return generationPrint(g), nil
	}
	rot, ok := r.opts.Vault.(Rotator)
	if !ok {
		return "", nil
	}
	st, err := rot.Status(ctx)
	if err != nil {
		return "", fmt.Errorf("vault status: %w", err)
	}
	h := sha256.New()
	for _, s := range st.Secrets {
		fmt.Fprintf(h, "%s %d", s.Name, s.Version)
		if s.Rotation != nil {
			fmt.Fprintf(h, " %s %d %d %d", s.Rotation.Phase, s.Rotation.To, len(s.Rotation.WaitsOn), len(s.Rotation.Confirmed))
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
