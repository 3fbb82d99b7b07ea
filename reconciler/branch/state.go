package branch

import (
	"context"
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
// source, unless the branch already holds it. It moves the ref with
// compare-and-swap like [Repository.Write], and leaves a record of a newer
// commit of main as it is. It reports whether it committed.
func (r *Repository) WriteState(ctx context.Context, content []byte, opts WriteOptions) (bool, error) {
	if opts.Author.Name == "" {
		opts.Author = object.Signature{Name: "meshgen reconciler", Email: "reconciler@meshgen.invalid"}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 200
	}
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
			up, err = planState(s, objs, tip, content, opts)
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

func planState(s storer.EncodedObjectStorer, objs *objects, tip plumbing.Hash, content []byte, opts WriteOptions) (*refUpdate, error) {
	if !tip.IsZero() {
		c, err := object.GetCommit(s, tip)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", StateRef, err)
		}
		f, err := c.File(StateFile)
		if err == nil && f.Hash == blobHash(content) {
			return nil, nil
		}
		if newerSource(s, opts.Source, stateSource(c.Message)) {
			return nil, nil
		}
	}
	bh, err := objs.blob(content)
	if err != nil {
		return nil, err
	}
	th, err := objs.tree([]treeEntry{{name: StateFile, mode: filemode.Regular, hash: bh}})
	if err != nil {
		return nil, err
	}
	sig := opts.Author
	sig.When = opts.Now()
	c := &object.Commit{Author: sig, Committer: sig, TreeHash: th,
		Message: "reconciler state\n\nSource: " + opts.Source + "\n"}
	if !tip.IsZero() {
		c.ParentHashes = []plumbing.Hash{tip}
	}
	obj := &plumbing.MemoryObject{}
	if err := c.Encode(obj); err != nil {
		return nil, err
	}
	ch, err := objs.add(obj)
	if err != nil {
		return nil, err
	}
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
	f, err := c.File(StateFile)
	if err != nil {
		return nil, fmt.Errorf("read %s:%s: %w", StateRef, StateFile, err)
	}
	rd, err := f.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return io.ReadAll(rd)
}
