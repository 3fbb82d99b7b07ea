package schema

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// LoadRef reads and checks the mesh repository at ref of the git repository
// at repoPath (bare or not), without a checkout. ref is a branch name, a
// full ref name or a commit hash. The Repo's Source is the commit's hash.
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
// read-only fs.FS, and the full hash of the commit it names.
func RefFS(repoPath, ref string) (fs.FS, string, error) {
	repo, err := git.PlainOpenWithOptions(repoPath, &git.PlainOpenOptions{DetectDotGit: false})
	if err != nil {
		return nil, "", fmt.Errorf("open git repository %s: %w", repoPath, err)
	}
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
	return &treeFS{tree: tree, when: commit.Committer.When}, hash.String(), nil
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

// treeFS is a git tree as an fs.FS.
type treeFS struct {
	tree *object.Tree
	when time.Time
}

var (
	_ fs.ReadDirFS  = (*treeFS)(nil)
	_ fs.ReadFileFS = (*treeFS)(nil)
)

// Open implements fs.FS.
func (t *treeFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return &treeDir{info: t.info(".", filemode.Dir, 0), fs: t, tree: t.tree}, nil
	}
	e, err := t.tree.FindEntry(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if e.Mode == filemode.Dir {
		sub, err := t.tree.Tree(name)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return &treeDir{info: t.info(path.Base(name), e.Mode, 0), fs: t, tree: sub}, nil
	}
	if !e.Mode.IsFile() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("not a regular file (mode %s)", e.Mode)}
	}
	f, err := t.tree.TreeEntryFile(e)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	r, err := f.Reader()
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &treeFile{info: t.info(path.Base(name), e.Mode, f.Size), r: r}, nil
}

// ReadFile implements fs.ReadFileFS.
func (t *treeFS) ReadFile(name string) ([]byte, error) {
	f, err := t.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, ok := f.(*treeDir); ok {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
	}
	return io.ReadAll(f)
}

// ReadDir implements fs.ReadDirFS.
func (t *treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	f, err := t.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, ok := f.(*treeDir)
	if !ok {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	return d.ReadDir(-1)
}

func (t *treeFS) info(name string, m filemode.FileMode, size int64) *treeInfo {
	return &treeInfo{name: name, mode: m, size: size, when: t.when}
}

// treeInfo is fs.FileInfo and fs.DirEntry for a tree entry.
type treeInfo struct {
	name string
	mode filemode.FileMode
	size int64
	when time.Time
}

func (i *treeInfo) Name() string               { return i.name }
func (i *treeInfo) Size() int64                { return i.size }
func (i *treeInfo) ModTime() time.Time         { return i.when }
func (i *treeInfo) IsDir() bool                { return i.mode == filemode.Dir }
func (i *treeInfo) Sys() any                   { return nil }
func (i *treeInfo) Type() fs.FileMode          { return i.Mode().Type() }
func (i *treeInfo) Info() (fs.FileInfo, error) { return i, nil }
func (i *treeInfo) Mode() fs.FileMode {
	m, err := i.mode.ToOSFileMode()
	if err != nil {
		return fs.ModeIrregular
	}
	return m
}

// treeFile is an open blob.
type treeFile struct {
	info *treeInfo
	r    io.ReadCloser
}

func (f *treeFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *treeFile) Read(p []byte) (int, error) { return f.r.Read(p) }
func (f *treeFile) Close() error               { return f.r.Close() }

// treeDir is an open tree.
type treeDir struct {
	info *treeInfo
	fs   *treeFS
	tree *object.Tree
	read int
}

func (d *treeDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *treeDir) Close() error               { return nil }
func (d *treeDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: errors.New("is a directory")}
}

// ReadDir implements fs.ReadDirFile; entries come in git's order, which
// sorts by name.
func (d *treeDir) ReadDir(n int) ([]fs.DirEntry, error) {
	entries := d.tree.Entries[d.read:]
	if n > 0 && len(entries) > n {
		entries = entries[:n]
	}
	if n > 0 && len(entries) == 0 {
		return nil, io.EOF
	}
	out := make([]fs.DirEntry, 0, len(entries))
	for _, e := range entries {
		var size int64
		if e.Mode.IsFile() {
			if f, err := d.tree.TreeEntryFile(&e); err == nil {
				size = f.Size
			}
		}
		out = append(out, d.fs.info(strings.TrimSuffix(e.Name, "/"), e.Mode, size))
	}
	d.read += len(entries)
	return out, nil
}
