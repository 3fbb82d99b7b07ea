package branch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// StateRef is the branch where the reconciler keeps what one resolution
// decided that the next must keep (ports, seats' holders, public names): the
// reconciler's own record, beside the node branches.
const StateRef = "refs/heads/meshgen/state"

// StateFile is the file on [StateRef] holding that record.
const StateFile = "state.json"

// WriteState records content as state.json on [StateRef], rendered from
// source, unless the branch already holds it; see [Repository.WriteStateFiles].
func (r *Repository) WriteState(ctx context.Context, content []byte, opts WriteOptions) (bool, error) {
	return r.WriteStateFiles(ctx, map[string][]byte{StateFile: content}, opts)
}

// WriteStateFiles records files (name → content, at the top of the tree;
// [StateFile] among them) as the whole tree of [StateRef], rendered from
// source, unless the branch already holds exactly these files. It moves the
// ref with compare-and-swap like [Repository.Write], and leaves a record of
// a newer commit of main as it is. It reports whether it committed.
func (r *Repository) WriteStateFiles(ctx context.Context, files map[string][]byte, opts WriteOptions) (bool, error) {
	if len(files) == 0 {
		return false, errors.New("record reconciler state: no files")
	}
	for name := range files {
		if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
			return false, fmt.Errorf("record reconciler state: %q is not a file name", name)
		}
	}
	opts = opts.withDefaults()
	for attempt := 1; ; attempt++ {
		open, tips, err := r.b.snapshot(ctx, []string{StateRef})
		if err != nil {
			return false, err
		}
		s, closeS := open()
		tip := tips[StateRef]
		objs := newObjects()
		var up *refUpdate
		if err == nil {
			up, err = planState(s, objs, tip, files, opts)
		}
		var missing []plumbing.Hash
		if err == nil && up != nil {
			missing, err = objs.missing(s)
		}
		if err == nil && up != nil {
			err = r.b.writePack(ctx, s, objs, missing)
		}
		closeS()
		if err != nil || up == nil {
			return false, err
		}
		conflicts, _, err := r.b.update(ctx, []refUpdate{*up})
		if err != nil {
			return false, err
		}
		if len(conflicts) == 0 {
			return true, nil
		}
		if attempt >= opts.MaxAttempts {
			return false, &ConflictError{Nodes: []string{"meshgen/state"}, Attempts: attempt}
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(time.Duration(attempt) * time.Millisecond):
		}
	}
}

func planState(s storer.EncodedObjectStorer, objs *objects, tip plumbing.Hash, files map[string][]byte, opts WriteOptions) (*refUpdate, error) {
	b := objs.builder()
	entries := make([]treeEntry, 0, len(files))
	for name, content := range files {
		entries = append(entries, treeEntry{name: name, mode: filemode.Regular, hash: b.blob(content)})
	}
	th := b.tree(entries)
	if !tip.IsZero() {
		c, err := object.GetCommit(s, tip)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", StateRef, err)
		}
		if c.TreeHash == th {
			return nil, nil
		}
		if newerSource(s, opts.Source, stateSource(c.Message)) {
			return nil, nil
		}
	}
	ch := b.commit(th, commitInfo{
		message: "reconciler state\n\nSource: " + opts.Source + "\n",
		parent:  tip, when: opts.Now(), author: opts.Author,
	})
	return &refUpdate{ref: StateRef, old: tip, new: ch}, nil
}

func stateSource(msg string) string {
	for line := range strings.SplitSeq(msg, "\n") {
		if src, ok := strings.CutPrefix(line, "Source: "); ok {
			return src
		}
	}
	return ""
}

// ReadState returns state.json from [StateRef] of the repository at dir,
// or nil when the reconciler never recorded one.
func ReadState(dir string) ([]byte, error) {
	files, err := ReadStateFiles(dir)
	if err != nil || files == nil {
		return nil, err
	}
	b, ok := files[StateFile]
	if !ok {
		return nil, fmt.Errorf("read %s:%s: %w: repair or delete the branch", StateRef, StateFile, object.ErrFileNotFound)
	}
	return b, nil
}

// ReadStateFiles returns every file at the top of [StateRef]'s tree in the
// repository at dir, by name, or nil when the reconciler never recorded one.
func ReadStateFiles(dir string) (map[string][]byte, error) {
	repo, err := OpenGit(dir)
	if err != nil {
		return nil, err
	}
	ref, err := repo.Reference(plumbing.ReferenceName(StateRef), true)
	if err == plumbing.ErrReferenceNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", StateRef, err)
	}
	c, err := repo.CommitObject(ref.Hash())
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", StateRef, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", StateRef, err)
	}
	out := map[string][]byte{}
	for _, e := range tree.Entries {
		if !e.Mode.IsFile() {
			continue
		}
		b, err := repo.BlobObject(e.Hash)
		if err != nil {
			return nil, fmt.Errorf("read %s:%s: %w", StateRef, e.Name, err)
		}
		rd, err := b.Reader()
		if err != nil {
			return nil, fmt.Errorf("read %s:%s: %w", StateRef, e.Name, err)
		}
		content, err := io.ReadAll(rd)
		rd.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s:%s: %w", StateRef, e.Name, err)
		}
		out[e.Name] = content
	}
	return out, nil
}
