package hostd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/hostd/podman"
)

// Removal is the last phase of an apply: what hostd made that the declaration
// no longer names goes. That is containers hostd made for this node, and files
// hostd wrote from a sealed secret. Directories, files with inline content
// and create-once files stay: data is never removed (ADR 0030).
//
// Removal runs only after a complete apply: every resource applied, none
// failed or gated. The apply that failed may be the very one that moves a
// reader off a secret file, so until it succeeds the file may still be
// named. A container gated by the failure still runs as an earlier
// generation made it, with that generation's mounts. podman resolves a bind
// mount's source at each start, so removing a file it mounts would make its
// next restart fail. So a value a rotation retired or abandoned (design 27,
// "Rotation") stays on disk only while applies fail, and never silently: the
// report lists it in LeftFiles (on status/<node>, in `hostd status`) and the
// textfile counts it in hostd_secret_files_left. A node leaving the mesh gets
// a declaration with no resources. No resource of it can fail, so its
// secrets go on the first apply that can observe its containers.

// removeUndeclared removes the containers hostd made for this node (labelled
// with its mesh and node) that the declaration no longer names: a module
// moved away stops.
func (a *applier) removeUndeclared(ctx context.Context) ([]string, error) {
	declared := map[string]bool{}
	for _, r := range a.d.Resources {
		if r.Container != nil {
			declared[r.Container.Name] = true
		}
	}
	var names []string
	for name, o := range a.observed {
		if !declared[name] && o.Labels[podman.LabelNode] == a.d.Node {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var removed []string
	for _, name := range names {
		if err := a.h.rt.Remove(ctx, name); err != nil {
			return removed, fmt.Errorf("remove undeclared container: %w", err)
		}
		delete(a.st.Containers, name)
		removed = append(removed, name)
	}
	return removed, nil
}

// undeclaredSecrets returns, sorted, the secret files hostd recorded that no
// resource of the declaration names. A path named in any way is kept. That
// covers a file (a secret of a new version, or content now), a directory, a
// mount's source and a step's answer.
func (a *applier) undeclaredSecrets() []string {
	named := map[string]bool{}
	for _, r := range a.d.Resources {
		switch {
		case r.File != nil:
			named[r.File.Path] = true
		case r.Directory != nil:
			named[r.Directory.Path] = true
		case r.Container != nil:
			for _, m := range r.Container.Mounts {
				named[m.Source] = true
			}
			if r.Container.Answer != "" {
				named[r.Container.Answer] = true
			}
		}
	}
	var paths []string
	for p := range a.st.SecretFiles {
		if !named[p] {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	return paths
}

// heldReason is why a failed apply leaves the secret files it would remove.
const heldReason = "no longer declared, kept until an apply succeeds (a container the failure gated may still mount it)"

// heldSecretFiles lists the secret files a failed apply did not remove.
func (a *applier) heldSecretFiles() []declaration.LeftFile {
	var left []declaration.LeftFile
	for _, p := range a.undeclaredSecrets() {
		left = append(left, declaration.LeftFile{Path: p, Reason: heldReason})
	}
	return left
}

// removeSecretFiles removes the secret files no resource names any more.
// The record of each goes only after the file did (the state is saved when
// Apply returns), so a hostd killed in between finds the file gone and
// finishes. Each path is tried even when one fails: a secret left behind
// because another could not be removed would be one too many.
func (a *applier) removeSecretFiles() (removed []string, left []declaration.LeftFile, err error) {
	var errs []error
	for _, p := range a.undeclaredSecrets() {
		rm, rerr := a.h.removeSecretFile(p)
		switch {
		case rerr != nil:
			errs = append(errs, fmt.Errorf("remove secret file %s, no longer declared: %w", p, rerr))
			left = append(left, declaration.LeftFile{Path: p, Reason: "could not be removed: " + rerr.Error()})
			continue
		case rm.left == "":
			removed = append(removed, p)
		default:
			left = append(left, declaration.LeftFile{Path: p, Reason: rm.left})
		}
		if rm.forget {
			delete(a.st.SecretFiles, p)
		}
	}
	return removed, left, errors.Join(errs...)
}

// removal is what became of one secret file no longer declared.
type removal struct {
	// left says why the path was left as it is; empty when the file is gone.
	left string
	// forget says the record goes: the path holds nothing hostd wrote.
	forget bool
}

// removeSecretFile removes the regular file at p, a path hostd recorded as
// written from a secret. The path policy of writes holds: p must be under
// the node's roots, and its parent must resolve under them ([Host.confine]).
// The removal itself goes through an [os.Root]. No symbolic link on the way
// can lead it out of the root, even one planted after the check. The last
// element is never followed: a symbolic link (or a directory) now at p is
// not what hostd wrote, and is left as it is.
//
// A file already gone counts as removed. That is what a hostd killed between
// the removal and its record finds.
func (h *Host) removeSecretFile(p string) (removal, error) {
	if !under(p, h.roots) {
		return removal{left: fmt.Sprintf("left alone: it is no longer under the node's roots (%s)", strings.Join(h.roots, ", "))}, nil
	}
	if err := h.confine(p); err != nil {
		if errors.Is(err, ErrPathPolicy) {
			where := strings.TrimPrefix(err.Error(), ErrPathPolicy.Error()+": ")
			return removal{left: fmt.Sprintf("left alone, not followed: %s, outside the node's roots (put the directory back, or remove the file by hand)", where)}, nil
		}
		return removal{}, err
	}
	root, rel := h.rootOf(p)
	r, err := os.OpenRoot(root)
	if gone(err) {
		return removal{forget: true}, nil
	}
	if err != nil {
		return removal{}, fmt.Errorf("open the node root %s: %w", root, err)
	}
	defer r.Close()
	fi, err := r.Lstat(rel)
	if gone(err) {
		return removal{forget: true}, nil
	}
	if err != nil {
		return removal{}, fmt.Errorf("stat: %w", bare(err))
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return removal{left: "left alone: it is a symbolic link now, not the file hostd wrote; the link is not followed", forget: true}, nil
	case !fi.Mode().IsRegular():
		return removal{left: fmt.Sprintf("left alone: it is a %s now, not the file hostd wrote", describe(fi.Mode())), forget: true}, nil
	}
	if err := r.Remove(rel); err != nil && !gone(err) {
		return removal{}, bare(err)
	}
	// The removal is durable before its record goes.
	if d, err := r.Open(filepath.Dir(rel)); err == nil {
		d.Sync()
		d.Close()
	}
	return removal{forget: true}, nil
}

// rootOf returns the innermost of the node's roots holding p, and p relative
// to it.
func (h *Host) rootOf(p string) (root, rel string) {
	for _, r := range h.roots {
		if under(p, []string{r}) && len(r) > len(root) {
			root = r
		}
	}
	rel, _ = filepath.Rel(root, p)
	return root, rel
}

// gone reports whether err says a path does not exist, or that a parent on
// its way is no directory: either way nothing is left there.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

func describe(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
