package branch

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// OpenLocal opens the repository at path for writing node branches: a bare
// repository, or a work tree's .git directory.
func OpenLocal(path string) (*Repository, error) {
	dir, err := gitDir(path)
	if err != nil {
		return nil, err
	}
	return &Repository{b: &local{path: dir}}, nil
}

// gitDir returns the git directory of the repository at path.
func gitDir(path string) (string, error) {
	for _, d := range []string{filepath.Join(path, ".git"), path} {
		if st, err := os.Stat(filepath.Join(d, "objects")); err == nil && st.IsDir() {
			if _, err := os.Stat(filepath.Join(d, "HEAD")); err == nil {
				return d, nil
			}
		}
	}
	return "", fmt.Errorf("open repository %s: not a git repository: create it with `git init --bare %s`", path, path)
}

// local is a repository on this machine. Its refs are moved with git's own
// lock-file protocol (create <ref>.lock exclusively, check the old value,
// rename), so it is safe beside git itself: `git push`, receive-pack under
// `git daemon`, `git pack-refs`.
type local struct {
	path string
}

func (l *local) dir() string { return l.path }

func (l *local) storage() *filesystem.Storage {
	return l.storageOf(listingFS{osfs.New(l.path), l.path, nil})
}

func (l *local) storageOf(fsys listingFS) *filesystem.Storage {
	// A fresh storage per snapshot: go-git caches the pack index list, and
	// another writer may have added packs since. Pack files stay open for
	// the storage's life: go-git otherwise opens one per object read.
	return filesystem.NewStorageWithOptions(fsys, cache.NewObjectLRUDefault(),
		filesystem.Options{KeepDescriptors: true})
}

// view opens a storage for one goroutine, to read objects and to look them
// up; close releases its open packs. Its loose objects are those one
// listing of objects/ finds now, rather than one lstat for every object
// looked up (nearly every one is packed here): a loose object added later
// is taken for absent, and written again, which costs space, never
// correctness; every object a tip read before the view reaches is listed.
// A view is never written to.
func (l *local) view() (storer.EncodedObjectStorer, func()) {
	loose, err := looseObjects(l.path)
	if err != nil {
		loose = nil // look each up on the file system instead
	}
	s := l.storageOf(listingFS{osfs.New(l.path), l.path, loose})
	return s, func() { s.Close() }
}

// looseObjects returns the paths of the loose objects of the git directory
// dir, "objects/<2 hex>/<38 hex>".
func looseObjects(dir string) (map[string]bool, error) {
	fans, err := readDirNames(filepath.Join(dir, "objects"))
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, fan := range fans {
		if len(fan) != 2 {
			continue
		}
		names, err := readDirNames(filepath.Join(dir, "objects", fan))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			continue // removed since (git prune-packed), or not a directory
		}
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			if p := "objects/" + fan + "/" + name; isLooseObject(p) {
				out[p] = true
			}
		}
	}
	return out, nil
}

// readDirNames lists a directory's names, unsorted.
func readDirNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

// listingFS lists a directory while other writers add and remove files in
// it, leaving out their lock files. go-billy's osfs fails a whole ReadDir with "not exist" when an entry
// vanishes between listing and stat (another writer's tmp_pack_ renamed into
// place), and go-git then takes objects/pack for absent and sees no pack at
// all: a concurrent pack write made every object invisible.
type listingFS struct {
	billy.Filesystem
	root string
	// loose, when not nil, holds the loose objects there are (see
	// [local.view]); the file system is not asked about any other.
	loose map[string]bool
}

// Open reads a pack index whole: go-git decodes an index with one read
// system call per 4-byte word, which made loading a repository's indexes the
// bulk of a write.
//
// A loose object that is not there (go-git looks for every object loose
// before it looks in the packs, and nearly every object is packed here) is
// answered from the listing of loose objects, or else with one lstat, not
// go-billy's walk of every path component.
func (f listingFS) Open(name string) (billy.File, error) {
	if isLooseObject(name) {
		if f.loose != nil {
			if !f.loose[filepath.ToSlash(name)] {
				return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
			}
		} else if _, err := os.Lstat(filepath.Join(f.root, filepath.FromSlash(name))); errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	file, err := f.Filesystem.Open(name)
	if err != nil || !strings.HasSuffix(name, ".idx") {
		return file, err
	}
	b, err := io.ReadAll(file)
	if err != nil {
		file.Close()
		return nil, err
	}
	return &readFile{File: file, r: bytes.NewReader(b)}, nil
}

// isLooseObject says whether name is objects/<2 hex>/<38 hex>.
func isLooseObject(name string) bool {
	rest, ok := strings.CutPrefix(filepath.ToSlash(name), "objects/")
	if !ok || len(rest) != 41 || rest[2] != '/' {
		return false
	}
	return plumbing.IsHash(rest[:2] + rest[3:])
}

// readFile serves reads of an open file from its contents in memory.
type readFile struct {
	billy.File
	r *bytes.Reader
}

func (f *readFile) Read(p []byte) (int, error)              { return f.r.Read(p) }
func (f *readFile) ReadAt(p []byte, off int64) (int, error) { return f.r.ReadAt(p, off) }
func (f *readFile) Seek(off int64, whence int) (int64, error) {
	return f.r.Seek(off, whence)
}

func (f listingFS) ReadDir(p string) ([]fs.FileInfo, error) {
	entries, err := os.ReadDir(filepath.Join(f.root, filepath.FromSlash(p)))
	if err != nil {
		return nil, err
	}
	infos := make([]fs.FileInfo, 0, len(entries))
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".lock") {
			// Another writer's lock file, empty while it is made: git
			// never reads one as a ref, and go-git's walk of refs/ would
			// fail the whole listing on it ("ref file is empty").
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // gone since it was listed
		}
		if err != nil {
			return nil, err
		}
		infos = append(infos, fi)
	}
	if filepath.ToSlash(filepath.Clean(p)) == "objects/pack" {
		infos = indexedPacks(f.root, infos)
	}
	return infos, nil
}

// indexedPacks leaves out of a listing of objects/pack every pack whose
// index is not in place yet. git receive-pack and index-pack (a push into
// this repository) rename a new .pack into place before its .idx; go-git
// finds packs by the .pack, and would fail every read on the index it
// cannot open yet. ([writePackfile] renames the .idx first.)
func indexedPacks(root string, infos []fs.FileInfo) []fs.FileInfo {
	names := make(map[string]bool, len(infos))
	for _, fi := range infos {
		names[fi.Name()] = true
	}
	out := infos[:0]
	for _, fi := range infos {
		if base, ok := strings.CutSuffix(fi.Name(), ".pack"); ok && strings.HasPrefix(base, "pack-") && !names[base+".idx"] {
			// The listing may have missed an index renamed in meanwhile.
			if _, err := os.Stat(filepath.Join(root, "objects", "pack", base+".idx")); err != nil {
				continue
			}
		}
		out = append(out, fi)
	}
	return out
}

func (l *local) snapshot(_ context.Context, refs []string) (func() (storer.EncodedObjectStorer, func()), map[string]plumbing.Hash, error) {
	packed, err := readPackedRefs(l.path)
	if err != nil {
		return nil, nil, err
	}
	tips := make(map[string]plumbing.Hash, len(refs))
	for _, ref := range refs {
		h, ok, err := readLooseRef(l.path, ref)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			h, ok = packed[ref]
		}
		if ok {
			tips[ref] = h
		}
	}
	return l.view, tips, nil
}

func (l *local) writePack(_ context.Context, _ storer.EncodedObjectStorer, objs *objects, hashes []plumbing.Hash) error {
	if len(hashes) == 0 {
		return nil
	}
	_, err := writePackfile(l.path, objs, hashes)
	return err
}

func (l *local) update(_ context.Context, ups []refUpdate) (conflicts, locked []string, err error) {
	for _, u := range ups {
		err := casRef(l.path, u.ref, u.old, u.new)
		var held *lockHeldError
		switch {
		case err == nil:
		case errors.Is(err, errRefMoved):
			conflicts = append(conflicts, u.ref)
		case errors.As(err, &held):
			conflicts = append(conflicts, u.ref)
			locked = append(locked, held.path)
		default:
			return nil, nil, err
		}
	}
	return conflicts, locked, nil
}

// errRefMoved: the ref no longer holds the expected old value.
var errRefMoved = errors.New("ref moved")

// lockHeldError: another writer holds the ref's lock file.
type lockHeldError struct{ path string }

func (e *lockHeldError) Error() string { return "lock file " + e.path + " is held" }

// casRef moves ref from old (zero: must not exist) to new, the way git does:
// take <ref>.lock with O_EXCL, compare, write, rename over the ref.
func casRef(dir, ref string, old, new plumbing.Hash) (err error) {
	path := filepath.Join(dir, filepath.FromSlash(ref))
	lock := path + ".lock"
	var f *os.File
	// `git pack-refs` removes emptied directories under refs/: make the
	// directory again when it vanished between making it and using it.
	for range 10 {
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("update %s: %w", ref, err)
		}
		f, err = os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if errors.Is(err, fs.ErrExist) {
		return &lockHeldError{path: lock}
	}
	if err != nil {
		return fmt.Errorf("update %s: %w", ref, err)
	}
	renamed := false
	defer func() {
		if !renamed {
			f.Close()
			os.Remove(lock)
		}
	}()
	cur, ok, err := readLooseRef(dir, ref)
	if err != nil {
		return err
	}
	if !ok {
		packed, err := readPackedRefs(dir)
		if err != nil {
			return err
		}
		cur = packed[ref]
	}
	if cur != old {
		return errRefMoved
	}
	if _, err := f.WriteString(new.String() + "\n"); err != nil {
		return fmt.Errorf("update %s: %w", ref, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("update %s: %w", ref, err)
	}
	if err := os.Rename(lock, path); err != nil {
		return fmt.Errorf("update %s: %w", ref, err)
	}
	renamed = true
	return nil
}

// readLooseRef reads refs/... as a loose file; ok is false when there is none.
func readLooseRef(dir, ref string) (plumbing.Hash, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(ref)))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrInvalid) {
		return plumbing.ZeroHash, false, nil
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "is a directory") {
			return plumbing.ZeroHash, false, nil
		}
		return plumbing.ZeroHash, false, fmt.Errorf("read ref %s: %w", ref, err)
	}
	s := strings.TrimSpace(string(b))
	if !plumbing.IsHash(s) {
		return plumbing.ZeroHash, false, fmt.Errorf("read ref %s: %q is not a commit hash (a symbolic ref is not expected here)", ref, s)
	}
	return plumbing.NewHash(s), true, nil
}

// readPackedRefs reads the packed-refs file, if any.
func readPackedRefs(dir string) (map[string]plumbing.Hash, error) {
	f, err := os.Open(filepath.Join(dir, "packed-refs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read packed-refs: %w", err)
	}
	defer f.Close()
	out := map[string]plumbing.Hash{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || line[0] == '^' {
			continue
		}
		h, name, ok := strings.Cut(line, " ")
		if ok && plumbing.IsHash(h) {
			out[name] = plumbing.NewHash(h)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read packed-refs: %w", err)
	}
	return out, nil
}

// OpenGit opens the repository at path (bare, or a work tree's .git) for
// reading with go-git, safely beside writers: go-git's own PlainOpen lists
// objects/pack with go-billy, which fails when another writer's temporary
// pack vanishes mid-listing (a reconciler, or git receive-pack taking a
// push), and go-git then sees no pack at all and reports objects missing.
func OpenGit(path string) (*git.Repository, error) {
	dir, err := gitDir(path)
	if err != nil {
		return nil, err
	}
	repo, err := git.Open(filesystem.NewStorage(listingFS{osfs.New(dir), dir, nil}, cache.NewObjectLRUDefault()), nil)
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", path, err)
	}
	return repo, nil
}
