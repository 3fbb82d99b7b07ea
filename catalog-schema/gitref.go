package schema

import (
	"fmt"
	"io"
	"io/fs"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// LoadRef reads and checks the mesh repository at ref of the git repository
// at repoPath (a work tree, a linked work tree or a bare repository), without
// a checkout. ref is a branch name, a full ref name or a commit hash. The
// Repo's Source is the commit's hash.
func LoadRef(repoPath, ref string) (*Repo, error) {
	fsys, hash, err := RefFS(repoPath, ref)
	if err != nil {
		return nil, err
	}
	r, err := Load(fsys)
	if err != nil {
		return nil, err
	}
	r.Source = hash
	return r, nil
}

// RefFS returns the tree of ref in the git repository at repoPath as a
// read-only fs.FS held in memory, and the full hash of the commit it names.
//
// The tree is read in one walk through one opened object store whose pack
// files stay open until the walk is done, into a file system whose
// directories are indexed: on a mesh of 1,000 nodes × 20 assignments (21,000
// files) that is a fraction of a second, where opening each file through the
// tree (finding its entry from the root, reopening the pack) took seconds.
func RefFS(repoPath, ref string) (fs.FS, string, error) {
	repo, done, err := openRepo(repoPath)
	if err != nil {
		return nil, "", err
	}
	defer done()
	hash, err := resolve(repo, ref)
	if err != nil {
		return nil, "", fmt.Errorf("resolve %q in %s: %w (name a branch, a full ref or a commit hash)", ref, repoPath, err)
	}
	commit, err := repo.CommitObject(hash)
	if err != nil {
		return nil, "", fmt.Errorf("read commit %s of %q in %s: %w", hash, ref, repoPath, err)
	}
	tree, err := commit.Tree()
	if err != nil {
		return nil, "", fmt.Errorf("read the tree of %s in %s: %w", hash, repoPath, err)
	}
	fsys := newMemFS(commit.Committer.When)
	err = tree.Files().ForEach(func(f *object.File) error {
		r, err := f.Reader()
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		defer r.Close()
		data := make([]byte, f.Size) // a blob's size is known
		if _, err := io.ReadFull(r, data); err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		fsys.add(f.Name, data)
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("read the tree of %s in %s: %w", hash, repoPath, err)
	}
	return fsys, hash.String(), nil
}

// openRepo opens the git repository at repoPath as go-git's PlainOpen does
// (a work tree, a linked one, or a bare repository), but with its pack files
// kept open between objects; done closes them.
func openRepo(repoPath string) (*git.Repository, func(), error) {
	plain, err := git.PlainOpenWithOptions(repoPath, &git.PlainOpenOptions{DetectDotGit: false, EnableDotGitCommonDir: true})
	if err != nil {
		return nil, nil, fmt.Errorf("open git repository %s: %w", repoPath, err)
	}
	st, ok := plain.Storer.(*filesystem.Storage)
	if !ok {
		return plain, func() {}, nil
	}
	kept := filesystem.NewStorageWithOptions(st.Filesystem(), cache.NewObjectLRUDefault(), filesystem.Options{KeepDescriptors: true})
	repo, err := git.Open(kept, nil)
	if err != nil {
		kept.Close()
		return nil, nil, fmt.Errorf("open git repository %s: %w", repoPath, err)
	}
	return repo, func() { kept.Close() }, nil
}

// resolve turns a branch name, full ref or commit hash into a commit hash.
func resolve(repo *git.Repository, ref string) (plumbing.Hash, error) {
	if ref == "" {
		ref = "HEAD"
	}
	for _, name := range []plumbing.ReferenceName{
		plumbing.ReferenceName(ref),
		plumbing.NewBranchReferenceName(ref),
		plumbing.NewTagReferenceName(ref),
		plumbing.NewRemoteReferenceName("origin", ref),
	} {
		r, err := repo.Reference(name, true)
		if err == nil {
			return peel(repo, r.Hash())
		}
	}
	if plumbing.IsHash(ref) {
		return peel(repo, plumbing.NewHash(ref))
	}
	h, err := repo.ResolveRevision(plumbing.Revision(ref))
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return *h, nil
}

// peel follows an annotated tag to its commit.
func peel(repo *git.Repository, h plumbing.Hash) (plumbing.Hash, error) {
	if t, err := repo.TagObject(h); err == nil {
		c, err := t.Commit()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		return c.Hash, nil
	}
	if _, err := repo.CommitObject(h); err != nil {
		return plumbing.ZeroHash, err
	}
	return h, nil
}
