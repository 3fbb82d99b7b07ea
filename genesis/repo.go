package genesis

import (
	"fmt"
	"sort"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// mainBranch is the branch operators commit the mesh to (DESIGN.md).
const mainBranch = plumbing.ReferenceName("refs/heads/main")

// firstFiles returns the files of the mesh's first commit on main, by
// slash-separated path: mesh.yaml, the signing key's public half, and a
// README in each folder an operator fills, so git keeps the folder.
func firstFiles(name string, pub []byte) map[string][]byte {
	return map[string][]byte{
		"mesh.yaml": []byte(fmt.Sprintf(`# The mesh: its name, and the defaults a node takes unless it states its own.
name: %s
defaults:
  root: %s
  pollInterval: %s
`, name, DefaultRoot, DefaultPollInterval)),
		"keys/reconciler.pub": pub,
		"nodes/README.md": []byte(`# Nodes

One file per machine, nodes/<node>.yaml, holding the age recipient that
` + "`hostd init`" + ` printed on that machine:

    recipient: age1...
    facts:
      address: 10.0.0.1
`),
		"catalog/contracts/README.md": []byte(`# Contracts

One file per provision, catalog/contracts/<provision>.yaml: the fields the
provision promises, their types, and which are secret.
`),
		"catalog/modules/README.md": []byte(`# Modules

One folder per module, catalog/modules/<module>/module.yaml: the seats it can
hold, what it provides, what it requires, and its resources in order.
`),
		"assignments/README.md": []byte(`# Assignments

One file per module on a node, assignments/<node>/<module>.yaml: the values,
pins, placements and seats of that assignment.
`),
	}
}

// writeFirstCommit makes a bare repository at dir whose main branch holds
// files in one commit, and points HEAD at main. It returns the commit's hash.
func writeFirstCommit(dir, name string, files map[string][]byte, when time.Time) (string, error) {
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		Bare:        true,
		InitOptions: git.InitOptions{DefaultBranch: mainBranch},
	})
	if err != nil {
		return "", fmt.Errorf("make bare repository: %w", err)
	}
	tree, err := writeTree(repo.Storer, files)
	if err != nil {
		return "", err
	}
	sig := object.Signature{Name: "meshgen genesis", Email: "genesis@" + name + ".mesh", When: when}
	commit := &object.Commit{
		Author:    sig,
		Committer: sig,
		Message:   fmt.Sprintf("genesis: mesh %q\n\nmesh.yaml, empty nodes/, catalog/ and assignments/, and keys/reconciler.pub,\nthe public half of the key the reconciler signs declarations with.\n", name),
		TreeHash:  tree,
	}
	obj := repo.Storer.NewEncodedObject()
	if err := commit.Encode(obj); err != nil {
		return "", fmt.Errorf("encode first commit: %w", err)
	}
	hash, err := repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return "", fmt.Errorf("write first commit: %w", err)
	}
	if err := repo.Storer.SetReference(plumbing.NewHashReference(mainBranch, hash)); err != nil {
		return "", fmt.Errorf("set %s: %w", mainBranch, err)
	}
	if err := repo.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, mainBranch)); err != nil {
		return "", fmt.Errorf("point HEAD at %s: %w", mainBranch, err)
	}
	return hash.String(), nil
}

// writeTree writes the tree of files (by slash-separated path, recursively)
// and returns its hash. Entries are sorted the way git sorts them: a folder
// compares as its name followed by "/".
func writeTree(s storer.EncodedObjectStorer, files map[string][]byte) (plumbing.Hash, error) {
	blobs := map[string][]byte{}
	subdirs := map[string]map[string][]byte{}
	for rest, body := range files {
		if first, below, isDir := strings.Cut(rest, "/"); isDir {
			if subdirs[first] == nil {
				subdirs[first] = map[string][]byte{}
			}
			subdirs[first][below] = body
		} else {
			blobs[rest] = body
		}
	}
	var entries []object.TreeEntry
	for name, body := range blobs {
		obj := s.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)
		w, err := obj.Writer()
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("write %s: %w", name, err)
		}
		if _, err := w.Write(body); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("write %s: %w", name, err)
		}
		if err := w.Close(); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("write %s: %w", name, err)
		}
		h, err := s.SetEncodedObject(obj)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("store %s: %w", name, err)
		}
		entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: h})
	}
	for name, below := range subdirs {
		h, err := writeTree(s, below)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
	}
	sortKey := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(entries, func(i, j int) bool { return sortKey(entries[i]) < sortKey(entries[j]) })
	tree := &object.Tree{Entries: entries}
	obj := s.NewEncodedObject()
	if err := tree.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode tree: %w", err)
	}
	h, err := s.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store tree: %w", err)
	}
	return h, nil
}
