package branch

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// tip is what a node's branch holds now, as far as deciding a write needs.
type tip struct {
	commit     plumbing.Hash // zero when the branch does not exist
	generation uint64
	source     string
	decl       plumbing.Hash // blob hash of declaration.json
	content    string        // the commit's content digest, if it states one
	removed    bool          // the commit says the node was removed from the mesh
	// secrets is the hash of the tree secrets/ (zero: there is none),
	// which says which sealed files the branch holds without reading it.
	secrets plumbing.Hash
}

// readTip reads the declaration's generation and source and the files'
// hashes from the commit at h. A branch without a readable declaration is an
// error: guessing its generation could lower it.
func readTip(s storer.EncodedObjectStorer, node string, h plumbing.Hash) (*tip, error) {
	t := &tip{commit: h}
	if h.IsZero() {
		return t, nil
	}
	c, err := object.GetCommit(s, h)
	if err != nil {
		return nil, fmt.Errorf("read branch node/%s at %s: %w", node, h, err)
	}
	tree, err := object.GetTree(s, c.TreeHash)
	if err != nil {
		return nil, fmt.Errorf("read branch node/%s at %s: tree: %w", node, h, err)
	}
	for _, e := range tree.Entries {
		switch {
		case e.Name == DeclarationFile:
			t.decl = e.Hash
		case e.Name == SecretsDir && !e.Mode.IsFile():
			t.secrets = e.Hash
		}
	}
	if t.decl.IsZero() {
		return nil, fmt.Errorf("branch node/%s at %s holds no %s: repair or delete the branch", node, h, DeclarationFile)
	}
	// The writer states the generation and source in its commit message;
	// reading them there spares decompressing every declaration. A commit
	// the writer did not make is read the long way.
	if m, ok := parseMessage(c.Message, node); ok {
		t.generation, t.source, t.content, t.removed = m.generation, m.source, m.content, m.removed
		return t, nil
	}
	blob, err := object.GetBlob(s, t.decl)
	if err != nil {
		return nil, fmt.Errorf("read node/%s:%s: %w", node, DeclarationFile, err)
	}
	r, err := blob.Reader()
	if err != nil {
		return nil, fmt.Errorf("read node/%s:%s: %w", node, DeclarationFile, err)
	}
	defer r.Close()
	head, err := readHead(r)
	if err != nil {
		return nil, fmt.Errorf("read node/%s:%s: %w", node, DeclarationFile, err)
	}
	t.generation, t.source = head.Generation, head.Source
	return t, nil
}

// newerSource reports whether the branch's source commit is a strict
// descendant of ours on main: the branch already holds a render of a newer
// main, and writing ours would undo it. Commits s does not hold (a source
// that is not a commit of this repository) are never newer.
func newerSource(s storer.EncodedObjectStorer, ours, theirs string) bool {
	if ours == theirs || !plumbing.IsHash(ours) || !plumbing.IsHash(theirs) {
		return false
	}
	oc, err := object.GetCommit(s, plumbing.NewHash(ours))
	if err != nil {
		return false
	}
	tc, err := object.GetCommit(s, plumbing.NewHash(theirs))
	if err != nil {
		return false
	}
	ok, err := oc.IsAncestor(tc)
	return err == nil && ok
}

// declHead is the part of a declaration a write needs from the branch.
type declHead struct {
	Generation uint64
	Source     string
}

// readHead reads a declaration's generation and source without decoding its
// resources: they come before the resources in the canonical form, so it
// stops as soon as both are read.
func readHead(r io.Reader) (declHead, error) {
	var h declHead
	dec := json.NewDecoder(r)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return h, fmt.Errorf("not a JSON object")
	}
	found := 0
	for found < 2 && dec.More() {
		key, err := dec.Token()
		if err != nil {
			return h, err
		}
		switch key {
		case "generation":
			err = dec.Decode(&h.Generation)
			found++
		case "source":
			err = dec.Decode(&h.Source)
			found++
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return h, fmt.Errorf("field %v: %w", key, err)
		}
	}
	if found < 2 {
		return h, fmt.Errorf("no generation or no source")
	}
	return h, nil
}

// message is what a commit message [commitMessage] wrote states.
type message struct {
	generation      uint64
	source, content string
	removed         bool
}

// parseMessage reads a message [commitMessage] wrote for node; content is
// empty when the message states none (an older writer's).
func parseMessage(msg, node string) (message, bool) {
	subject, rest, _ := strings.Cut(msg, "\n")
	gen, ok := strings.CutPrefix(subject, "node "+node+": generation ")
	if !ok {
		return message{}, false
	}
	var m message
	var err error
	if m.generation, err = strconv.ParseUint(gen, 10, 64); err != nil {
		return message{}, false
	}
	for line := range strings.SplitSeq(rest, "\n") {
		if v, ok := strings.CutPrefix(line, "Source: "); ok {
			m.source = v
		} else if v, ok := strings.CutPrefix(line, "Content: "); ok {
			m.content = v
		} else if line == removedLine {
			m.removed = true
		}
	}
	if m.source == "" {
		return message{}, false
	}
	return m, true
}

// CommitHead is what a node branch's commit message states about its
// declaration.
type CommitHead struct {
	Generation uint64
	Source     string
	// Removed says the commit holds the final declaration of a node
	// removed from the mesh ([Node.Removed]).
	Removed bool
}

// ParseCommitMessage reads the generation and source the writer states in
// the message of a commit on node/<node>; ok is false for a commit another
// tool made (read its declaration.json instead).
func ParseCommitMessage(msg, node string) (CommitHead, bool) {
	m, ok := parseMessage(msg, node)
	return CommitHead{Generation: m.generation, Source: m.source, Removed: m.removed}, ok
}
