package branch

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/hash"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/klauspost/compress/zlib"
)

// objects collects new git objects in memory, in the order they were made,
// as the bytes [writePackfile] packs. It is safe for concurrent use; the
// objects are made by [builder]s, one per goroutine.
type objects struct {
	mu     sync.Mutex
	byHash map[plumbing.Hash]rawObject
	hashes []plumbing.Hash
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

// put keeps obj under its hash h. The content is kept, not copied: callers
// do not change it until the pack is written.
func (o *objects) put(h plumbing.Hash, obj rawObject) plumbing.Hash {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.byHash[h]; ok {
		return h
	}
	o.byHash[h] = obj
	o.hashes = append(o.hashes, h)
	return h
}

func (o *objects) get(h plumbing.Hash) (rawObject, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	obj, ok := o.byHash[h]
	return obj, ok
}

// builder makes objects into objs for one goroutine, reusing its hasher,
// its compressor and its buffers from one object to the next: a write of
// 1,000 nodes makes tens of thousands of objects, most of them small, and
// allocating afresh for each was a good part of its cost. A builder is not
// safe for concurrent use.
type builder struct {
	objs *objects
	sha  hash.Hash    // SHA-1 with collision detection, as go-git and git hash objects
	zw   *zlib.Writer // at BestSpeed; Reset for each object
	// zout receives each zlib stream, which is then copied to chunk.
	zout bytes.Buffer
	// chunk holds what the objects keep (their zlib streams, trees,
	// commits) back to back, so that many small objects share one
	// allocation; each keeps a slice of it, capped at its own length.
	chunk []byte
	// hdr holds an object's header while it is hashed, then its hash;
	// scratch a tree's or a commit's bytes while they are encoded; entries
	// a tree's entries while they are collected; secrets plan's hashes of a
	// node's sealed files.
	hdr     [32]byte // "commit " and 20 digits at most, and a NUL
	scratch []byte
	entries []treeEntry
	secrets map[string]plumbing.Hash
}

// chunkSize is the size of a builder's chunks: large enough that a node's
// objects take a few, small enough that a write's last, partly filled
// chunks waste little.
const chunkSize = 128 << 10

func (o *objects) builder() *builder {
	zw, _ := zlib.NewWriterLevel(nil, zlib.BestSpeed) // a valid level: no error
	return &builder{objs: o, sha: hash.New(hash.CryptoType), zw: zw, secrets: map[string]plumbing.Hash{}}
}

// hash returns the hash git gives content as an object of type typ: the
// SHA-1 of "<type> <size>\x00" and the content.
func (b *builder) hash(typ plumbing.ObjectType, content []byte) plumbing.Hash {
	hdr := append(b.hdr[:0], typ.String()...)
	hdr = append(hdr, ' ')
	hdr = strconv.AppendInt(hdr, int64(len(content)), 10)
	hdr = append(hdr, 0)
	b.sha.Reset()
	b.sha.Write(hdr)
	b.sha.Write(content)
	var h plumbing.Hash
	copy(h[:], b.sha.Sum(b.hdr[:0])) // into hdr's room, not a new slice
	return h
}

// keep copies p to the builder's chunk and returns the copy.
func (b *builder) keep(p []byte) []byte {
	if cap(b.chunk)-len(b.chunk) < len(p) {
		b.chunk = make([]byte, 0, max(chunkSize, len(p)))
	}
	start := len(b.chunk)
	b.chunk = append(b.chunk, p...)
	return b.chunk[start:len(b.chunk):len(b.chunk)]
}

// deflate returns data as a zlib stream at BestSpeed.
func (b *builder) deflate(data []byte) []byte {
	b.zout.Reset()
	b.zw.Reset(&b.zout)
	b.zw.Write(data) // a bytes.Buffer takes every write
	b.zw.Close()
	return b.keep(b.zout.Bytes())
}

// put deflates data and keeps it as an object of type typ under its hash h.
func (b *builder) put(h plumbing.Hash, typ plumbing.ObjectType, data []byte) plumbing.Hash {
	return b.objs.put(h, rawObject{typ: typ, data: data, deflated: b.deflate(data)})
}

// blob keeps content as a blob, deflated. The content is kept, not copied.
func (b *builder) blob(content []byte) plumbing.Hash {
	return b.put(b.hash(plumbing.BlobObject, content), plumbing.BlobObject, content)
}

// sealed keeps a sealed file, whose blob hash is h, to be packed without
// compression. The content is kept, not copied.
func (b *builder) sealed(content []byte, h plumbing.Hash) plumbing.Hash {
	return b.objs.put(h, rawObject{typ: plumbing.BlobObject, data: content, stored: true})
}

// treeEntry is a name in a tree pointing at a blob or a subtree.
type treeEntry struct {
	name string
	mode filemode.FileMode
	hash plumbing.Hash
}

// compareEntries orders tree entries as git does: by name, a subtree's
// name comparing as if it ended in "/".
func compareEntries(a, c treeEntry) int {
	n := min(len(a.name), len(c.name))
	if r := strings.Compare(a.name[:n], c.name[:n]); r != 0 {
		return r
	}
	return cmp.Compare(a.at(n), c.at(n))
}

// at returns the byte at i of e's name as git compares it: past the end of
// a subtree's name comes "/", past the end of a file's name nothing (-1).
// Names hold no "/", so two names that differ first at i of the shorter
// compare there.
func (e treeEntry) at(i int) int {
	switch {
	case i < len(e.name):
		return int(e.name[i])
	case e.mode == filemode.Dir:
		return '/'
	default:
		return -1
	}
}

// tree keeps a tree of entries, which it sorts as git sorts them.
func (b *builder) tree(entries []treeEntry) plumbing.Hash {
	data := b.keep(b.encodeTree(entries))
	return b.put(b.hash(plumbing.TreeObject, data), plumbing.TreeObject, data)
}

// encodeTree sorts entries as git sorts them and returns the tree holding
// them, encoded in the builder's scratch.
func (b *builder) encodeTree(entries []treeEntry) []byte {
	slices.SortFunc(entries, compareEntries)
	buf := b.scratch[:0]
	for _, e := range entries {
		buf = strconv.AppendUint(buf, uint64(e.mode), 8)
		buf = append(buf, ' ')
		buf = append(buf, e.name...)
		buf = append(buf, 0)
		buf = append(buf, e.hash[:]...)
	}
	b.scratch = buf
	return buf
}

// secretsTree returns the hash of the tree secrets/ holding sealed files
// whose blob hashes, by path ("secrets/<id>.age"), are hashes, as nodeTree
// makes it, without keeping it; zero for no sealed files, as a node's tree
// then holds no secrets/.
func (b *builder) secretsTree(hashes map[string]plumbing.Hash) plumbing.Hash {
	if len(hashes) == 0 {
		return plumbing.ZeroHash
	}
	entries := b.entries[:0]
	for p, h := range hashes {
		entries = append(entries, treeEntry{name: strings.TrimPrefix(p, SecretsDir+"/"), mode: filemode.Regular, hash: h})
	}
	b.entries = entries
	return b.hash(plumbing.TreeObject, b.encodeTree(entries))
}

// commitInfo is what a commit says besides its tree.
type commitInfo struct {
	message string        // see commitMessage
	parent  plumbing.Hash // zero for a branch's first commit
	when    time.Time
	author  object.Signature // author and committer; its When is ignored
}

// commit keeps the commit of tree that ci describes, encoded as go-git's
// [object.Commit.Encode] encodes a commit without extra headers.
func (b *builder) commit(tree plumbing.Hash, ci commitInfo) plumbing.Hash {
	buf := append(b.scratch[:0], "tree "...)
	buf = hex.AppendEncode(buf, tree[:])
	if !ci.parent.IsZero() {
		buf = append(buf, "\nparent "...)
		buf = hex.AppendEncode(buf, ci.parent[:])
	}
	buf = appendSignature(append(buf, "\nauthor "...), ci.author, ci.when)
	buf = appendSignature(append(buf, "\ncommitter "...), ci.author, ci.when)
	buf = append(buf, "\n\n"...)
	buf = append(buf, ci.message...)
	b.scratch = buf
	data := b.keep(buf)
	return b.put(b.hash(plumbing.CommitObject, data), plumbing.CommitObject, data)
}

// appendSignature appends an author or committer line's value as go-git
// writes it: "<name> <<email>> <seconds since 1970, at least 0> <zone>".
func appendSignature(buf []byte, who object.Signature, when time.Time) []byte {
	buf = append(buf, who.Name...)
	buf = append(buf, " <"...)
	buf = append(buf, who.Email...)
	buf = append(buf, "> "...)
	buf = strconv.AppendInt(buf, max(when.Unix(), 0), 10)
	buf = append(buf, ' ')
	return when.AppendFormat(buf, "-0700")
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

// nodeTree keeps one node's files, declaration.json, its signature and
// secrets/<id>.age, and returns the tree holding them. hashes holds the
// sealed files' blob hashes, by path, when the caller has them already.
func (b *builder) nodeTree(decl, sig []byte, secrets map[string][]byte, hashes map[string]plumbing.Hash) plumbing.Hash {
	dh := b.blob(decl)
	sh := b.blob(sig)
	var sub plumbing.Hash
	if len(secrets) > 0 {
		entries := b.entries[:0]
		for p, ct := range secrets {
			h, ok := hashes[p]
			if !ok {
				h = b.hash(plumbing.BlobObject, ct)
			}
			b.sealed(ct, h)
			entries = append(entries, treeEntry{name: strings.TrimPrefix(p, SecretsDir+"/"), mode: filemode.Regular, hash: h})
		}
		b.entries = entries
		sub = b.tree(entries)
	}
	root := append(b.entries[:0],
		treeEntry{name: DeclarationFile, mode: filemode.Regular, hash: dh},
		treeEntry{name: SignatureFile, mode: filemode.Regular, hash: sh})
	if len(secrets) > 0 {
		root = append(root, treeEntry{name: SecretsDir, mode: filemode.Dir, hash: sub})
	}
	b.entries = root
	return b.tree(root)
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
