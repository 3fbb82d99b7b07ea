package branch

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// ListRefs returns every ref of the repository at path (bare, or a work
// tree's) whose full name starts with prefix ("refs/heads/status/"), with the
// commit it holds, as git reads them: packed-refs first, then the loose refs
// that override it. It reads only the refs, no object, so it is cheap enough
// to decide whether anything changed since the last reconcile.
//
// A ref moved from loose to packed by `git pack-refs` while it is read can
// be missed; a caller comparing against what it saw before then sees a
// change, which costs a reconcile, never a wrong answer.
func ListRefs(path, prefix string) (map[string]plumbing.Hash, error) {
	dir, err := gitDir(path)
	if err != nil {
		return nil, err
	}
	out := map[string]plumbing.Hash{}
	packed, err := readPackedRefs(dir)
	if err != nil {
		return nil, err
	}
	for name, h := range packed {
		if strings.HasPrefix(name, prefix) {
			out[name] = h
		}
	}
	// Walk the directory the prefix names (or holds its last component).
	root := prefix
	if !strings.HasSuffix(root, "/") {
		root = filepath.ToSlash(filepath.Dir(filepath.FromSlash(root)))
	}
	root = strings.TrimSuffix(root, "/")
	err = filepath.WalkDir(filepath.Join(dir, filepath.FromSlash(root)), func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // the directory vanished (pack-refs) or never was
		}
		if err != nil {
			return err
		}
		if d.IsDir() || strings.HasSuffix(p, ".lock") {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if !strings.HasPrefix(name, prefix) {
			return nil
		}
		h, ok, err := readLooseRef(dir, name)
		if err != nil {
			return err
		}
		if ok {
			out[name] = h
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list refs %s* of %s: %w", prefix, path, err)
	}
	return out, nil
}
