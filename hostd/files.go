package hostd

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/internal/fsync"
)

func parseMode(s string) (fs.FileMode, error) {
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("mode %q: %w", s, err)
	}
	return fs.FileMode(v) & fs.ModePerm, nil
}

// parseOwner reads "uid:gid"; -1, -1 when empty (leave the owner alone).
func parseOwner(s string) (uid, gid int, err error) {
	if s == "" {
		return -1, -1, nil
	}
	u, g, _ := strings.Cut(s, ":")
	if uid, err = strconv.Atoi(u); err == nil {
		gid, err = strconv.Atoi(g)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("owner %q is not uid:gid", s)
	}
	return uid, gid, nil
}

// attrDiffs names how fi's mode and owner differ from the declared ones.
func attrDiffs(fi fs.FileInfo, mode fs.FileMode, uid, gid int) []string {
	var diffs []string
	if fi.Mode().Perm() != mode {
		diffs = append(diffs, fmt.Sprintf("mode was %04o", fi.Mode().Perm()))
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && uid >= 0 && (int(st.Uid) != uid || int(st.Gid) != gid) {
		diffs = append(diffs, fmt.Sprintf("owner was %d:%d", st.Uid, st.Gid))
	}
	return diffs
}

// confine checks that the existing part of p's parent directory resolves,
// through any symbolic link, to a place under the node's roots, so a link
// planted under the root cannot carry a write elsewhere.
func (h *Host) confine(p string) error {
	dir := filepath.Dir(p)
	for {
		if _, err := os.Lstat(dir); err == nil {
			break
		}
		if !under(dir, h.roots) || slices.Contains(h.roots, dir) {
			// Nothing exists from here up to the root: hostd makes it all,
			// and nothing can be followed.
			return nil
		}
		dir = filepath.Dir(dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", dir, err)
	}
	roots := make([]string, 0, 2*len(h.roots))
	for _, r := range h.roots {
		if rr, err := filepath.EvalSymlinks(r); err == nil {
			roots = append(roots, rr)
		}
		roots = append(roots, r)
	}
	if !under(real, roots) {
		return fmt.Errorf("%w: %s resolves to %s", ErrPathPolicy, dir, real)
	}
	return nil
}

func (a *applier) file(r *declaration.Resource) (declaration.Outcome, string, error) {
	f := r.File
	mode, err := parseMode(f.Mode)
	if err != nil {
		return "", "", err
	}
	uid, gid, err := parseOwner(f.Owner)
	if err != nil {
		return "", "", err
	}
	if err := a.h.confine(f.Path); err != nil {
		return "", "", err
	}
	fi, err := os.Lstat(f.Path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("stat %s: %w", f.Path, err)
	}
	if exists && !fi.Mode().IsRegular() {
		return "", "", fmt.Errorf("%s exists and is not a regular file: move it away", f.Path)
	}
	if exists && f.CreateOnce {
		// A seed is the mesh's only until it exists (ADR 0087).
		return declaration.Kept, "", nil
	}
	want := []byte(f.Content)
	if f.Secret != nil {
		if want, err = a.h.plaintext(a.br, r.ID, f.Secret); err != nil {
			return "", "", err
		}
	}
	var diffs []string
	if exists {
		cur, err := os.ReadFile(f.Path)
		if err != nil {
			return "", "", fmt.Errorf("read %s: %w", f.Path, err)
		}
		if !bytes.Equal(cur, want) {
			diffs = append(diffs, "content differed")
		}
		diffs = append(diffs, attrDiffs(fi, mode, uid, gid)...)
		if len(diffs) == 0 {
			// Already the secret's plaintext: hostd's to remove when it is
			// no longer declared (a node upgraded to a hostd that records
			// secret files enters those it holds here).
			if err := a.claim(r); err != nil {
				return "", "", err
			}
			return declaration.Unchanged, "", nil
		}
	}
	if err := a.claim(r); err != nil {
		return "", "", err
	}
	if err := writeAtomic(f.Path, want, mode, uid, gid); err != nil {
		return "", "", err
	}
	a.changed[r.ID] = "changed"
	if !exists {
		return declaration.Created, "", nil
	}
	return declaration.Corrected, a.why(r.ID, diffs), nil
}

// claim records, before a secret is written to its path, that the path is
// hostd's secret file (state.SecretFiles), so no crash can leave a secret on
// disk that hostd does not know to remove. A write that fails after the
// claim leaves the path claimed: the declaration gave it to a secret, so
// whatever is there is the mesh's to replace or, once undeclared, remove.
// Create-once files and files with inline content are never claimed: they
// may be data a service edits.
func (a *applier) claim(r *declaration.Resource) error {
	f := r.File
	if f.Secret == nil || f.CreateOnce || a.st.SecretFiles[f.Path] == r.ID {
		return nil
	}
	a.st.SecretFiles[f.Path] = r.ID
	if err := a.h.saveState(a.st); err != nil {
		return fmt.Errorf("record %s as a secret file before writing it: %w", f.Path, err)
	}
	return nil
}

// why says what a correction put right, and whether it follows a change of
// the declaration (the record holds another digest) or drift on the machine.
func (a *applier) why(id string, diffs []string) string {
	if prev := a.prev[id]; prev != "" && prev != a.digests[id] {
		return "its declaration changed: " + strings.Join(diffs, ", ")
	}
	return strings.Join(diffs, ", ")
}

const tempSuffix = ".hostd-"

func escapeGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`)
	return r.Replace(s)
}

// writeAtomic writes a file so that a reader (or a crash) sees the old
// content or the new, never a part: a temporary file beside it, mode and
// owner set before any content lands, fsync, rename, fsync of the directory.
// Errors name the target, never the temporary file.
func writeAtomic(path string, data []byte, mode fs.FileMode, uid, gid int) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("make directory for %s: %w", path, err)
	}
	// A hostd killed mid-write leaves its temporary file: clear it first.
	if stale, _ := filepath.Glob(filepath.Join(dir, "."+escapeGlob(filepath.Base(path))+tempSuffix+"*")); len(stale) > 0 {
		for _, s := range stale {
			os.Remove(s)
		}
	}
	fail := func(what string, err error) error {
		return fmt.Errorf("write %s: %s: %w", path, what, bare(err))
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+tempSuffix+"*")
	if err != nil {
		return fail("create a temporary file beside it", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(mode); err != nil {
		return fail("set mode", err)
	}
	if uid >= 0 {
		if err := tmp.Chown(uid, gid); err != nil {
			return fail(fmt.Sprintf("set owner %d:%d", uid, gid), err)
		}
	}
	if _, err := tmp.Write(data); err != nil {
		return fail("write", err)
	}
	if err := tmp.Sync(); err != nil {
		return fail("sync", err)
	}
	if err := tmp.Close(); err != nil {
		return fail("close", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fail("rename into place", err)
	}
	fsync.Dir(dir) // best effort: the file is in place either way
	return nil
}

// bare drops the path an *os.PathError or *os.LinkError carries (a
// temporary file's), keeping the cause.
func bare(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	}
	return err
}

// directory makes a directory with its mode and owner. hostd never deletes
// one: data outlives the mesh that declared it (ADR 0030).
func (a *applier) directory(r *declaration.Resource) (declaration.Outcome, string, error) {
	dd := r.Directory
	mode, err := parseMode(dd.Mode)
	if err != nil {
		return "", "", err
	}
	uid, gid, err := parseOwner(dd.Owner)
	if err != nil {
		return "", "", err
	}
	if err := a.h.confine(dd.Path); err != nil {
		return "", "", err
	}
	fi, err := os.Lstat(dd.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dd.Path, 0o755); err != nil {
			return "", "", fmt.Errorf("make directory %s: %w", dd.Path, err)
		}
		if err := setAttrs(dd.Path, mode, uid, gid); err != nil {
			return "", "", err
		}
		a.changed[r.ID] = "changed"
		return declaration.Created, "", nil
	case err != nil:
		return "", "", fmt.Errorf("stat %s: %w", dd.Path, err)
	case !fi.IsDir():
		return "", "", fmt.Errorf("%s exists and is not a directory: move it away", dd.Path)
	}
	diffs := attrDiffs(fi, mode, uid, gid)
	if len(diffs) == 0 {
		return declaration.Unchanged, "", nil
	}
	if err := setAttrs(dd.Path, mode, uid, gid); err != nil {
		return "", "", err
	}
	a.changed[r.ID] = "changed"
	return declaration.Corrected, a.why(r.ID, diffs), nil
}

func setAttrs(p string, mode fs.FileMode, uid, gid int) error {
	if err := os.Chmod(p, mode); err != nil {
		return fmt.Errorf("set mode of %s: %w", p, err)
	}
	if uid >= 0 {
		if err := os.Lchown(p, uid, gid); err != nil {
			return fmt.Errorf("set owner of %s to %d:%d: %w", p, uid, gid, err)
		}
	}
	return nil
}
