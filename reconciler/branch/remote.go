package branch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// RemoteOptions configure a remote repository.
type RemoteOptions struct {
	// CacheDir is a private bare repository this process keeps in step with
	// the remote: objects are built here and pushed from here. It is
	// created when absent. One process at a time uses it (a lock is held
	// while the repository is open).
	CacheDir string
	// Auth authenticates to the server; nil for none (git://, file://).
	Auth transport.AuthMethod
}

// Remote is a mesh repository on a git server, with its local cache.
type Remote struct {
	Repository
	r *remote
}

// OpenRemote opens the repository at url through the cache repository in
// opts.CacheDir. Close releases the cache.
func OpenRemote(url string, opts RemoteOptions) (*Remote, error) {
	if opts.CacheDir == "" {
		return nil, errors.New("open remote repository: no cache directory")
	}
	_, err := git.PlainOpen(opts.CacheDir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		_, err = git.PlainInit(opts.CacheDir, true)
	}
	if err != nil {
		return nil, fmt.Errorf("open cache repository %s: %w", opts.CacheDir, err)
	}
	lock, err := os.OpenFile(filepath.Join(opts.CacheDir, "meshgen.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock cache repository: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("cache repository %s is in use by another reconciler: give each its own cache directory", opts.CacheDir)
	}
	r := &remote{url: url, cache: opts.CacheDir, auth: opts.Auth, lock: lock, local: &local{path: opts.CacheDir}}
	return &Remote{Repository: Repository{b: r}, r: r}, nil
}

// Close releases the cache repository.
func (r *Remote) Close() error { return r.r.lock.Close() }

// CacheDir returns the local cache repository, to read main and status
// branches from after [Remote.Fetch].
func (r *Remote) CacheDir() string { return r.r.cache }

// Fetch brings the cache's copies of refs (full names, or patterns such as
// "refs/heads/status/*") in step with the remote, pruning those the remote
// no longer has.
func (r *Remote) Fetch(ctx context.Context, refs ...string) error {
	return r.r.fetch(ctx, refs...)
}

// remote writes through a cache: snapshot fetches node branches, objects go
// into the cache, and one atomic push moves every ref. The server checks
// each ref's old hash as it takes the ref's lock, and the push is not forced,
// so it is a compare-and-swap on every ref at once.
type remote struct {
	url   string
	cache string
	auth  transport.AuthMethod
	lock  *os.File
	local *local
}

// remote returns an anonymous remote for the server (nothing is saved in the
// cache's configuration) over a fresh view of the cache: go-git's storage
// keeps the pack list it first read, and packs are added since.
func (r *remote) remote() (*git.Remote, func()) {
	s := r.local.storage()
	return git.NewRemote(s, &config.RemoteConfig{Name: "origin", URLs: []string{r.url}}), func() { s.Close() }
}

func (r *remote) fetch(ctx context.Context, refs ...string) error {
	specs := make([]config.RefSpec, len(refs))
	for i, ref := range refs {
		specs[i] = config.RefSpec("+" + ref + ":" + ref)
	}
	rem, done := r.remote()
	err := rem.FetchContext(ctx, &git.FetchOptions{
		RefSpecs: specs, Auth: r.auth, Force: true, Prune: true, Tags: git.NoTags,
	})
	done()
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return nil
	}
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fmt.Errorf("fetch %s from %s: %w", refs, r.url, err)
	}
	return nil
}

func (r *remote) snapshot(ctx context.Context, refs []string) (func() (storer.EncodedObjectStorer, func()), map[string]plumbing.Hash, error) {
	if err := r.fetch(ctx, "refs/heads/node/*"); err != nil {
		return nil, nil, err
	}
	return r.local.snapshot(ctx, refs)
}

func (r *remote) dir() string { return r.cache }

func (r *remote) writePack(ctx context.Context, s storer.EncodedObjectStorer, objs *objects, hashes []plumbing.Hash) error {
	return r.local.writePack(ctx, s, objs, hashes)
}

func (r *remote) update(ctx context.Context, ups []refUpdate) (conflicts, locked []string, err error) {
	specs := make([]config.RefSpec, len(ups))
	for i, u := range ups {
		// The cache is private: its refs are set plainly, then pushed.
		if err := os.MkdirAll(filepath.Dir(filepath.Join(r.cache, u.ref)), 0o755); err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(filepath.Join(r.cache, filepath.FromSlash(u.ref)), []byte(u.new.String()+"\n"), 0o644); err != nil {
			return nil, nil, fmt.Errorf("update cache ref %s: %w", u.ref, err)
		}
		specs[i] = config.RefSpec(u.ref + ":" + u.ref)
	}
	rem, done := r.remote()
	pushErr := rem.PushContext(ctx, &git.PushOptions{
		RefSpecs: specs, Auth: r.auth, Atomic: true,
	})
	done()
	if pushErr == nil || errors.Is(pushErr, git.NoErrAlreadyUpToDate) {
		return nil, nil, nil
	}
	// Refused: find out whether a ref moved (retry all: the push was
	// atomic) or the push failed for another reason (report it).
	if err := r.fetch(ctx, "refs/heads/node/*"); err != nil {
		return nil, nil, errors.Join(fmt.Errorf("push to %s: %w", r.url, pushErr), err)
	}
	packed, err := readPackedRefs(r.cache)
	if err != nil {
		return nil, nil, err
	}
	moved := false
	for _, u := range ups {
		h, ok, err := readLooseRef(r.cache, u.ref)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			h = packed[u.ref]
		}
		if h != u.old {
			moved = true
		}
	}
	if !moved {
		return nil, nil, fmt.Errorf("push node branches to %s: %w", r.url, pushErr)
	}
	for _, u := range ups {
		conflicts = append(conflicts, u.ref)
	}
	return conflicts, nil, nil
}
