package hostd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/go-git/go-git/v5/storage/memory"
)

// ErrNothingNew is returned by [Host.Fetch] when branch node/<name> still
// points at the commit already fetched: the poll cost one round trip.
var ErrNothingNew = errors.New("nothing new on the node's branch")

// ErrNoBranch is returned by [Host.Fetch] when the remote has no branch
// node/<name> yet.
var ErrNoBranch = errors.New("the remote has no branch for this node")

// NodeBranch is the branch a node's declaration is committed to.
func NodeBranch(node string) plumbing.ReferenceName {
	return plumbing.NewBranchReferenceName("node/" + node)
}

// StatusBranch is the branch a node's reports are pushed to.
func StatusBranch(node string) plumbing.ReferenceName {
	return plumbing.NewBranchReferenceName("status/" + node)
}

const cacheRemote = "origin"

// cache opens the bare repository hostd fetches into; fresh makes it empty
// first. The cache holds nothing hostd needs between polls (what verified is
// kept in target.json), so each fetch of something new starts it afresh and
// it never grows past one commit.
func (h *Host) cache(fresh bool) (*git.Repository, error) {
	dir := h.statePath("git")
	if fresh {
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("clear git cache %s: %w", dir, err)
		}
	}
	repo, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		repo, err = git.PlainInitWithOptions(dir, &git.PlainInitOptions{Bare: true})
	}
	if err != nil {
		return nil, fmt.Errorf("open git cache %s: %w (remove it to start over)", dir, err)
	}
	return repo, nil
}

func (h *Host) auth(url string) (transport.AuthMethod, error) {
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return nil, fmt.Errorf("remote url: %w", err)
	}
	if ep.Protocol != "ssh" {
		return nil, nil
	}
	user := ep.User
	if user == "" {
		user = "git"
	}
	var hostKeys []string
	if h.cfg.KnownHosts != "" {
		hostKeys = []string{h.cfg.KnownHosts}
	}
	known, err := gitssh.NewKnownHostsCallback(hostKeys...)
	if err != nil {
		return nil, fmt.Errorf("read known hosts: %w (set knownHosts in the hostd config)", err)
	}
	if h.cfg.SSHKey != "" {
		a, err := gitssh.NewPublicKeysFromFile(user, h.cfg.SSHKey, "")
		if err != nil {
			return nil, fmt.Errorf("read ssh key %s: %w", h.cfg.SSHKey, err)
		}
		a.HostKeyCallback = known
		return a, nil
	}
	a, err := gitssh.NewSSHAgentAuth(user)
	if err != nil {
		return nil, fmt.Errorf("ssh remote without sshKey: %w (set sshKey in the hostd config)", err)
	}
	a.HostKeyCallback = known
	return a, nil
}

// Fetch fetches branch node/<name> from the remote, and only it: shallow
// (depth 1), no tags. It first looks the branch up (one round trip:
// protocol v2's ls-refs, so the server sends that branch alone, see
// lsrefs.go) and returns [ErrNothingNew] when the branch still points at
// have, so a poll with nothing new transfers no objects and changes nothing.
func (h *Host) Fetch(ctx context.Context, have string) (Branch, error) {
	auth, err := h.auth(h.cfg.Remote)
	if err != nil {
		return Branch{}, err
	}
	branch := NodeBranch(h.cfg.Node)
	head, err := lsRef(ctx, h.cfg.Remote, auth, branch)
	if errors.Is(err, errNoLsRefs) {
		head, err = listRefs(ctx, h.cfg.Remote, auth, branch)
	}
	if said := (*serverSaid)(nil); errors.As(err, &said) {
		err = said
	}
	if err != nil {
		return Branch{}, &fetchError{fmt.Errorf("list refs of %s: %w", redact(h.cfg.Remote), err)}
	}
	switch {
	case head.IsZero():
		return Branch{}, fmt.Errorf("%w: %s has no %s (has the reconciler run for this node?)", ErrNoBranch, redact(h.cfg.Remote), branch.Short())
	case head.String() == have:
		return Branch{}, ErrNothingNew
	}
	repo, err := h.cache(true)
	if err != nil {
		return Branch{}, err
	}
	remote := git.NewRemote(repo.Storer, &config.RemoteConfig{Name: cacheRemote, URLs: []string{h.cfg.Remote}})
	local := plumbing.ReferenceName("refs/remotes/" + cacheRemote + "/" + branch.Short())
	err = remote.FetchContext(ctx, &git.FetchOptions{
		RemoteName: cacheRemote,
		RefSpecs:   []config.RefSpec{config.RefSpec("+" + branch.String() + ":" + local.String())},
		Depth:      1,
		Tags:       git.NoTags,
		Auth:       auth,
		Force:      true,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return Branch{}, &fetchError{fmt.Errorf("fetch %s from %s: %w", branch.Short(), redact(h.cfg.Remote), err)}
	}
	return readBranch(repo, head)
}

// listRefs looks branch up with go-git's listing, which has the server
// advertise every ref it has (protocol v0): what [Host.Fetch] does where it
// cannot ask for the one branch.
func listRefs(ctx context.Context, url string, auth transport.AuthMethod, branch plumbing.ReferenceName) (plumbing.Hash, error) {
	// Listing needs no objects: an in-memory repository will do.
	repo, err := git.Init(memory.NewStorage(), nil)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	remote := git.NewRemote(repo.Storer, &config.RemoteConfig{Name: cacheRemote, URLs: []string{url}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth})
	if err != nil {
		return plumbing.ZeroHash, err
	}
	for _, r := range refs {
		if r.Name() == branch {
			return r.Hash(), nil
		}
	}
	return plumbing.ZeroHash, nil
}

// readBranch reads declaration.json, its signature and secrets/*.age from a
// commit.
func readBranch(repo *git.Repository, hash plumbing.Hash) (Branch, error) {
	commit, err := repo.CommitObject(hash)
	if err != nil {
		return Branch{}, fmt.Errorf("read fetched commit %s: %w", hash, err)
	}
	tree, err := commit.Tree()
	if err != nil {
		return Branch{}, fmt.Errorf("read tree of %s: %w", hash, err)
	}
	br := Branch{Commit: hash.String(), Sealed: map[string][]byte{}}
	read := func(f *object.File) ([]byte, error) {
		r, err := f.Reader()
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return io.ReadAll(r)
	}
	err = tree.Files().ForEach(func(f *object.File) error {
		var dst *[]byte
		switch {
		case f.Name == DeclarationFile:
			dst = &br.Declaration
		case f.Name == SignatureFile:
			dst = &br.Signature
		case path.Dir(f.Name) == "secrets" && strings.HasSuffix(f.Name, ".age"):
			data, err := read(f)
			if err != nil {
				return fmt.Errorf("read %s: %w", f.Name, err)
			}
			br.Sealed[f.Name] = data
			return nil
		default:
			return nil
		}
		data, err := read(f)
		if err != nil {
			return fmt.Errorf("read %s: %w", f.Name, err)
		}
		*dst = data
		return nil
	})
	if err != nil {
		return Branch{}, fmt.Errorf("read branch at %s: %w", hash, err)
	}
	if br.Declaration == nil {
		return Branch{}, fmt.Errorf("branch at %s has no %s", hash, DeclarationFile)
	}
	return br, nil
}

// redact drops a password from a URL before it reaches an error or a log.
func redact(url string) string {
	ep, err := transport.NewEndpoint(url)
	if err != nil || ep.Password == "" {
		return url
	}
	ep.Password = "xxxxx"
	return ep.String()
}

// fetchError is a failure to reach the remote.
type fetchError struct{ err error }

func (e *fetchError) Error() string { return e.err.Error() }
func (e *fetchError) Unwrap() error { return e.err }
