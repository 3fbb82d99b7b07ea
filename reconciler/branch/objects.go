package branch

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/klauspost/compress/zlib"
)

// objects collects new git objects in memory, in the order they were made,
// as the bytes [writePackfile] packs.
type objects struct {
	mu     sync.Mutex
	byHash map[plumbing.Hash]rawObject
	hashes []plumbing.Hash
	zlibs  sync.Pool // of *zlib.Writer at BestSpeed
}

// rawObject is one object's type and content.
type rawObject struct {
	typ  plumbing.ObjectType
	data []byte
	// stored: the content does not compress (age ciphertext), so it is
	// packed with zlib's stored blocks rather than deflated.
	stored bool
	// deflated is data as a zlib stream at BestSpeed, made by the goroutine
	// that built the object: objects are planned on every processor, the
	// pack is written on one. The compressor is klauspost/compress's, a
	// pure Go deflate that is half again as fast as compress/flate's at
	// this level, for streams any inflater reads.
	deflated []byte
}

func newObjects() *objects {
	return &objects{byHash: map[plumbing.Hash]rawObject{}}
}

// blobHash returns the hash git gives content as a blob, without storing it.
func blobHash(content []byte) plumbing.Hash {
	return plumbing.ComputeHash(plumbing.BlobObject, content)
}

// put keeps obj under its hash h. The content is kept, not copied: callers
// do not change it until the pack is written.
func (o *objects) put(h plumbing.Hash, obj rawObject) plumbing.Hash {
	if !obj.stored {
		obj.deflated = o.deflate(obj.data)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.byHash[h]; ok {
		return h
	}
	o.byHash[h] = obj
	o.hashes = append(o.hashes, h)
	return h
}

// deflate returns data as a zlib stream at BestSpeed.
func (o *objects) deflate(data []byte) []byte {
	buf := bytes.NewBuffer(make([]byte, 0, 64+len(data)/3))
	zw, _ := o.zlibs.Get().(*zlib.Writer)
	if zw == nil {
		zw, _ = zlib.NewWriterLevel(buf, zlib.BestSpeed) // a valid level: no error
	} else {
		zw.Reset(buf)
	}
	zw.Write(data) // a bytes.Buffer takes every write
	zw.Close()
	o.zlibs.Put(zw)
	return buf.Bytes()
}

func (o *objects) get(h plumbing.Hash) (rawObject, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	obj, ok := o.byHash[h]
	return obj, ok
}

// add keeps an object encoded by go-git (a commit).
func (o *objects) add(obj plumbing.EncodedObject) (plumbing.Hash, error) {
	r, err := obj.Reader()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return o.put(obj.Hash(), rawObject{typ: obj.Type(), data: data}), nil
}

func (o *objects) blob(content []byte) (plumbing.Hash, error) {
	return o.put(blobHash(content), rawObject{typ: plumbing.BlobObject, data: content}), nil
}

// sealed keeps a sealed file, whose blob hash is h, to be packed without
// compression.
func (o *objects) sealed(content []byte, h plumbing.Hash) plumbing.Hash {
	return o.put(h, rawObject{typ: plumbing.BlobObject, data: content, stored: true})
}

// treeEntry is a name in a tree pointing at a blob or a subtree.
type treeEntry struct {
	name string
	mode filemode.FileMode
	hash plumbing.Hash
}

// tree stores a tree of entries, sorted as git sorts them (a subtree's name
// compares as if it ended in "/").
func (o *objects) tree(entries []treeEntry) (plumbing.Hash, error) {
	key := func(e treeEntry) string {
		if e.mode == filemode.Dir {
			return e.name + "/"
		}
		return e.name
	}
	sort.Slice(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
	var b []byte
	for _, e := range entries {
		b = strconv.AppendUint(b, uint64(e.mode), 8)
		b = append(b, ' ')
		b = append(b, e.name...)
		b = append(b, 0)
		b = append(b, e.hash[:]...)
	}
	return o.put(plumbing.ComputeHash(plumbing.TreeObject, b), rawObject{typ: plumbing.TreeObject, data: b}), nil
}

// commitInfo is what a node's commit says.
type commitInfo struct {
	node       string
	generation uint64
	source     string
	content    string        // contentDigest of the declaration
	removed    bool          // the node was removed from the mesh
	parent     plumbing.Hash // zero for a branch's first commit
	when       time.Time
	author     object.Signature
}

func (o *objects) commit(tree plumbing.Hash, ci commitInfo) (plumbing.Hash, error) {
	sig := ci.author
	sig.When = ci.when
	c := &object.Commit{
		Author:    sig,
		Committer: sig,
		Message:   commitMessage(ci.node, ci.generation, ci.source, ci.content, ci.removed),
		TreeHash:  tree,
	}
	if !ci.parent.IsZero() {
		c.ParentHashes = []plumbing.Hash{ci.parent}
	}
	obj := &plumbing.MemoryObject{}
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return o.add(obj)
}

// commitMessage names the node, the generation, the source commit on main
// and the declaration's content digest (see contentDigest). The final
// declaration of a node removed from the mesh says so in a paragraph of its
// own, whose first line [parseMessage] reads as [CommitHead.Removed].
func commitMessage(node string, generation uint64, source, content string, removed bool) string {
	var note string
	if removed {
		note = removedLine + "\nthis declaration holds no resources, so hostd removes the containers the\n" +
			"node ran (it keeps their data) and the branch holds no secret. The branch\n" +
			"is kept, so the generation never goes back if the node is enrolled again.\n\n"
	}
	return fmt.Sprintf("node %s: generation %d\n\n%sSource: %s\nContent: %s\n", node, generation, note, source, content)
}

// removedLine opens the paragraph of a removed node's final commit.
const removedLine = "Removed from the mesh:"

// nodeTree stores one node's files: declaration.json, its signature and
// secrets/<id>.age. hashes holds the sealed files' blob hashes, by path,
// when the caller has them already.
func (o *objects) nodeTree(decl, sig []byte, secrets map[string][]byte, hashes map[string]plumbing.Hash) (plumbing.Hash, error) {
	dh, err := o.blob(decl)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	sh, err := o.blob(sig)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	root := []treeEntry{
		{name: DeclarationFile, mode: filemode.Regular, hash: dh},
		{name: SignatureFile, mode: filemode.Regular, hash: sh},
	}
	if len(secrets) > 0 {
		var sub []treeEntry
		for p, ct := range secrets {
			h, ok := hashes[p]
			if !ok {
				h = blobHash(ct)
			}
			o.sealed(ct, h)
			sub = append(sub, treeEntry{name: strings.TrimPrefix(p, SecretsDir+"/"), mode: filemode.Regular, hash: h})
		}
		th, err := o.tree(sub)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		root = append(root, treeEntry{name: SecretsDir, mode: filemode.Dir, hash: th})
	}
	return o.tree(root)
}

// missing returns the objects of o that s does not hold, in creation order.
func (o *objects) missing(s storer.EncodedObjectStorer) ([]plumbing.Hash, error) {
	var out []plumbing.Hash
	for _, h := range o.hashes {
		err := s.HasEncodedObject(h)
		switch {
		case err == nil:
		case err == plumbing.ErrObjectNotFound:
			out = append(out, h)
		default:
			return nil, fmt.Errorf("look up object %s: %w", h, err)
		}
	}
	return out, nil
}
