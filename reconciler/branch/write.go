package branch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/internal/workers"
)

// Node is what one node's branch must hold.
type Node struct {
	// Declaration is the rendered declaration. Its Generation and Source are
	// ignored: [Repository.Write] sets them.
	Declaration *declaration.Declaration
	// Secrets are the sealed files by their path on the branch,
	// "secrets/<id>.age"; each must be named by a file of the declaration
	// with a matching sha256, and nothing else may be.
	Secrets map[string][]byte
	// Removed marks the final declaration of a node removed from the mesh:
	// it must hold no resources and no secrets, and its commit says the
	// node was removed ([CommitHead.Removed]). The branch is kept, so the
	// generation never goes back if the node is enrolled again. A branch
	// whose tip already says so with the same content is left alone.
	Removed bool
}

// Signer signs the canonical bytes of a declaration; reconciler/sign's Signer
// is one.
type Signer interface {
	Sign(blob []byte) ([]byte, error)
}

// WriteOptions are the inputs of one write that are not per node.
type WriteOptions struct {
	// Source is the commit of main the declarations were rendered from.
	Source string
	// Signer signs each changed declaration.
	Signer Signer
	// Author names the commits; the default is "meshgen reconciler".
	Author object.Signature
	// Now gives the commits' time; the default is time.Now.
	Now func() time.Time
	// MaxAttempts bounds how often a node whose ref moved is read and written
	// again; the default is 200.
	MaxAttempts int
}

// Outcome is what a write did to one node's branch.
type Outcome string

// The outcomes of a write.
const (
	// Written: a new commit, with the generation raised by one.
	Written Outcome = "written"
	// Unchanged: the branch already held this content; nothing was committed.
	Unchanged Outcome = "unchanged"
	// Superseded: the branch holds a render of a newer commit of main, which
	// this (older) render must not undo; nothing was committed.
	Superseded Outcome = "superseded"
)

// NodeResult is what happened to one node's branch.
type NodeResult struct {
	Node    string  `json:"node"`
	Outcome Outcome `json:"outcome"`
	// Generation is the generation the branch holds now.
	Generation uint64 `json:"generation"`
	// Commit is the branch's tip now; Previous the tip it replaced (empty
	// for a new branch or when nothing was written).
	Commit   string `json:"commit"`
	Previous string `json:"previous,omitempty"`
}

// Result is what one write did.
type Result struct {
	// Nodes holds one result per node written or considered, by node name.
	Nodes []NodeResult
	// Objects is how many new objects were written, over all attempts.
	Objects int
	// Attempts is how many rounds the write took (1 without contention).
	Attempts int
}

// Changed returns the names of the nodes whose branch got a new commit.
func (r *Result) Changed() []string {
	var out []string
	for _, n := range r.Nodes {
		if n.Outcome == Written {
			out = append(out, n.Node)
		}
	}
	return out
}

// ConflictError says refs kept moving under a write for MaxAttempts rounds.
type ConflictError struct {
	Nodes    []string
	Attempts int
	// Locked names lock files that were held at the last attempt.
	Locked []string
}

func (e *ConflictError) Error() string {
	msg := fmt.Sprintf("write node branches: %d branch(es) kept moving after %d attempts: %s",
		len(e.Nodes), e.Attempts, strings.Join(e.Nodes, ", "))
	if len(e.Locked) > 0 {
		msg += fmt.Sprintf(" (held lock files: %s; remove them if no git process is running)", strings.Join(e.Locked, ", "))
	}
	return msg
}

// refUpdate moves one ref from old (zero: must not exist) to new.
type refUpdate struct {
	ref      string
	old, new plumbing.Hash
}

// backend is a repository the writer reads from and writes to.
type backend interface {
	// snapshot returns the current tips of refs (absent refs are left out)
	// and a way to open views of the objects, each for one goroutine, that
	// hold every object those tips reach. close releases a view.
	snapshot(ctx context.Context, refs []string) (open func() (s storer.EncodedObjectStorer, close func()), tips map[string]plumbing.Hash, err error)
	// writePack stores hashes (all held by objs) in one packfile.
	writePack(ctx context.Context, s storer.EncodedObjectStorer, objs *objects, hashes []plumbing.Hash) error
	// update moves every ref with compare-and-swap; it returns the refs that
	// had moved (or were locked) and were not updated, and the lock files
	// found held.
	update(ctx context.Context, ups []refUpdate) (conflicts []string, locked []string, err error)
	// dir is the local git directory objects are written to.
	dir() string
}

// Repository is a mesh repository whose node branches can be written.
type Repository struct {
	b backend
}

// Write makes every node's branch hold nodes[node], committing only where
// the content changed. It returns what it did per node; on error, the nodes
// already updated are in the result too.
func (r *Repository) Write(ctx context.Context, nodes map[string]*Node, opts WriteOptions) (*Result, error) {
	if opts.Signer == nil {
		return nil, errors.New("write node branches: no signer")
	}
	if opts.Source == "" {
		return nil, errors.New("write node branches: no source commit")
	}
	opts = opts.withDefaults()
	pending := make([]string, 0, len(nodes))
	for name := range nodes {
		pending = append(pending, name)
	}
	sort.Strings(pending)
	// Every node is checked before anything is written, on every
	// processor (each sealed file's sha256 is checked); the first node
	// refused, by name, is reported.
	refused := make([]error, len(pending))
	workers.Each(len(pending), 0, func(i int) { refused[i] = checkNode(pending[i], nodes[pending[i]]) })
	for _, err := range refused {
		if err != nil {
			return nil, err
		}
	}

	res := &Result{}
	done := map[string]NodeResult{}
	defer func() {
		for _, nr := range done {
			res.Nodes = append(res.Nodes, nr)
		}
		sort.Slice(res.Nodes, func(i, j int) bool { return res.Nodes[i].Node < res.Nodes[j].Node })
	}()
	readRetries := 0
	for len(pending) > 0 {
		res.Attempts++
		refs := make([]string, len(pending))
		for i, n := range pending {
			refs[i] = Ref(n)
		}
		open, tips, err := r.b.snapshot(ctx, refs)
		if err != nil {
			return res, err
		}
		objs := newObjects()
		var ups []refUpdate
		planned := map[string]NodeResult{}
		plans, err := planAll(open, objs, pending, nodes, tips, opts)
		reread := false
		if err != nil && readRetries < 3 {
			// A pack may have been replaced under the snapshot (git gc
			// repacking): read everything again.
			readRetries++
			reread = true
		} else if err != nil {
			return res, err
		}
		for i, p := range plans {
			if reread {
				break
			}
			if p.up == nil {
				done[pending[i]] = p.nr
				continue
			}
			ups = append(ups, *p.up)
			planned[p.up.ref] = p.nr
		}
		if reread {
			continue
		}
		if len(ups) == 0 {
			return res, nil
		}
		s, closeS := open()
		missing, err := objs.missing(s)
		if err == nil {
			err = r.b.writePack(ctx, s, objs, missing)
		}
		closeS()
		if err != nil {
			return res, fmt.Errorf("write node branches: %w", err)
		}
		res.Objects += len(missing)
		conflicts, locked, err := r.b.update(ctx, ups)
		if err != nil {
			return res, err
		}
		moved := map[string]bool{}
		pending = pending[:0]
		for _, ref := range conflicts {
			moved[ref] = true
			n, _ := NodeOfRef(ref)
			pending = append(pending, n)
		}
		for ref, nr := range planned {
			if !moved[ref] {
				done[nr.Node] = nr
			}
		}
		if len(pending) == 0 {
			break
		}
		if res.Attempts >= opts.MaxAttempts {
			sort.Strings(pending)
			return res, &ConflictError{Nodes: pending, Attempts: res.Attempts, Locked: locked}
		}
		// The loser re-reads and retries, after a short jittered wait so
		// racing writers do not collide in lockstep.
		wait := time.Duration(1+rand.IntN(1<<min(res.Attempts, 6))) * time.Millisecond
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(wait):
		}
	}
	return res, nil
}

type planned struct {
	nr NodeResult
	up *refUpdate
}

// planAll plans every pending node, on as many goroutines as there are
// processors, each with its own view of the repository (go-git's storage is
// not safe for concurrent use) and its own builder. Each takes the next node
// not yet taken, so that one slowed down (by the collector, or a neighbour
// on the machine) leaves the rest to the others.
func planAll(open func() (storer.EncodedObjectStorer, func()), objs *objects, pending []string, nodes map[string]*Node, tips map[string]plumbing.Hash, opts WriteOptions) ([]planned, error) {
	out := make([]planned, len(pending))
	procs := min(runtime.GOMAXPROCS(0), 1+len(pending)/64)
	errs := make([]error, procs)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range procs {
		wg.Go(func() {
			s, closeS := open()
			defer closeS()
			b := objs.builder()
			for i := int(next.Add(1) - 1); i < len(pending); i = int(next.Add(1) - 1) {
				name := pending[i]
				nr, up, err := plan(s, b, name, nodes[name], tips[Ref(name)], opts)
				if err != nil {
					errs[w] = err
					return
				}
				out[i] = planned{nr, up}
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// plan decides one node's write against the tip its branch has now, and
// builds its objects with b if it is to be written. It returns the ref
// update to make, or nil when there is nothing to write.
func plan(s storer.EncodedObjectStorer, b *builder, name string, n *Node, at plumbing.Hash, opts WriteOptions) (NodeResult, *refUpdate, error) {
	t, err := readTip(s, name, at)
	if err != nil {
		return NodeResult{}, nil, err
	}
	secrets := b.secrets // the builder's, reused from node to node
	clear(secrets)
	for p, ct := range n.Secrets {
		secrets[p] = b.hash(plumbing.BlobObject, ct)
	}
	d := *n.Declaration
	content, err := contentDigest(&d)
	if err != nil {
		return NodeResult{}, nil, fmt.Errorf("node %s: %w", name, err)
	}
	// The branch holds the same sealed files when its tree secrets/ is the
	// one they make.
	sameSecrets := !t.commit.IsZero() && t.secrets == b.secretsTree(secrets)
	if !t.commit.IsZero() && t.content != "" && t.content == content && sameSecrets && t.removed == n.Removed {
		// The writer's own commit states its content's digest: equal
		// digests are equal declarations.
		return NodeResult{Node: name, Outcome: Unchanged, Generation: t.generation, Commit: t.commit.String()}, nil, nil
	}
	if !t.commit.IsZero() {
		if t.content != content {
			// The tip states no digest, or one computed another way (an
			// older writer's): would the branch change, beyond its
			// generation and source? Its canonical bytes say.
			same := d
			same.Generation, same.Source = t.generation, t.source
			canon, err := declaration.Marshal(&same)
			if err != nil {
				return NodeResult{}, nil, fmt.Errorf("node %s: %w", name, err)
			}
			if b.hash(plumbing.BlobObject, canon) == t.decl && sameSecrets && t.removed == n.Removed {
				return NodeResult{Node: name, Outcome: Unchanged, Generation: t.generation, Commit: t.commit.String()}, nil, nil
			}
		}
		if newerSource(s, opts.Source, t.source) {
			return NodeResult{Node: name, Outcome: Superseded, Generation: t.generation, Commit: t.commit.String()}, nil, nil
		}
	}
	// What is signed and committed: the generation raised by one, and our
	// source.
	d.Generation, d.Source = t.generation+1, opts.Source
	body, err := declaration.Marshal(&d)
	if err != nil {
		return NodeResult{}, nil, fmt.Errorf("node %s: %w", name, err)
	}
	sig, err := opts.Signer.Sign(body)
	if err != nil {
		return NodeResult{}, nil, fmt.Errorf("node %s: %w", name, err)
	}
	tree := b.nodeTree(body, sig, n.Secrets, secrets)
	c := b.commit(tree, commitInfo{
		message: commitMessage(name, d.Generation, opts.Source, content, n.Removed),
		parent:  t.commit, when: opts.Now(), author: opts.Author,
	})
	nr := NodeResult{Node: name, Outcome: Written, Generation: d.Generation, Commit: c.String()}
	if !t.commit.IsZero() {
		nr.Previous = t.commit.String()
	}
	return nr, &refUpdate{ref: Ref(name), old: t.commit, new: c}, nil
}

// contentDigest returns the digest of a declaration's content, what
// decides whether a node's declaration changed: the sha256 of its canonical
// bytes ([declaration.Marshal]) with the generation 0 and the source "", so
// that it does not change with them.
func contentDigest(d *declaration.Declaration) (string, error) {
	c := *d
	c.Generation, c.Source = 0, ""
	b, err := declaration.Marshal(&c)
	if err != nil {
		return "", fmt.Errorf("digest declaration: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// withDefaults returns o with every option left unset given its default.
func (o WriteOptions) withDefaults() WriteOptions {
	if o.Author.Name == "" {
		o.Author = object.Signature{Name: "meshgen reconciler", Email: "reconciler@meshgen.invalid"}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 200
	}
	return o
}

// checkNode refuses a node whose declaration and sealed files disagree: a
// file naming a secret the branch would not hold, or a sealed file nothing
// names. These are rendering bugs; hostd would refuse the branch anyway.
func checkNode(name string, n *Node) error {
	if n == nil || n.Declaration == nil {
		return fmt.Errorf("node %s: no declaration", name)
	}
	if n.Declaration.Node != name {
		return fmt.Errorf("node %s: declaration is for node %q", name, n.Declaration.Node)
	}
	if n.Removed && (len(n.Declaration.Resources) > 0 || len(n.Secrets) > 0) {
		return fmt.Errorf("node %s: removed from the mesh, yet its declaration holds %d resources and %d sealed files", name, len(n.Declaration.Resources), len(n.Secrets))
	}
	named := map[string]bool{}
	for _, r := range n.Declaration.Resources {
		if r.File == nil || r.File.Secret == nil {
			continue
		}
		sec := r.File.Secret
		ct, ok := n.Secrets[sec.Sealed]
		if !ok {
			return fmt.Errorf("node %s: resource %s names sealed file %s, which is not given", name, r.ID, sec.Sealed)
		}
		sum := sha256.Sum256(ct)
		var sumHex [2 * sha256.Size]byte
		hex.Encode(sumHex[:], sum[:])
		if string(sumHex[:]) != sec.SHA256 {
			return fmt.Errorf("node %s: resource %s: sealed file %s does not match its sha256", name, r.ID, sec.Sealed)
		}
		named[sec.Sealed] = true
	}
	for p := range n.Secrets {
		if !named[p] {
			return fmt.Errorf("node %s: sealed file %s is named by no resource", name, p)
		}
	}
	return nil
}
