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
// slash-separated path: mesh.yaml, the signing key's public half, a README
// saying what goes where, and an empty .gitkeep in each folder an operator
// fills, so git keeps the folder (the loader skips dot files).
func firstFiles(name string, pub []byte) map[string][]byte {
	return map[string][]byte{
		"mesh.yaml": []byte(fmt.Sprintf(`# The mesh: its name, and the defaults a node takes unless it states its own.
name: %s
defaults:
  root: %s
  pollInterval: %s
`, name, DefaultRoot, DefaultPollInterval)),
		PubFile:                      pub,
		"nodes/.gitkeep":             nil,
		"catalog/contracts/.gitkeep": nil,
		"catalog/modules/.gitkeep":   nil,
		"assignments/.gitkeep":       nil,
		"README.md": []byte(fmt.Sprintf(`# Mesh %s

Made by `+"`meshgen genesis`"+`. What goes where:

| path | holds |
|---|---|
| mesh.yaml | the mesh's name and the defaults a node takes |
| nodes/<node>.yaml | a machine: the age recipient `+"`hostd init`"+` printed on it, its root, its facts |
| catalog/contracts/<provision>.yaml | a provision's contract: its fields, their types, which are secret |
| catalog/modules/<module>/module.yaml | a module: seats it can hold, what it provides and requires, its resources in order |
| assignments/<node>/<module>.yaml | a module on a node: values, pins, placements, seats held |
| keys/reconciler.pub | the public key declarations are signed with; nodes are given it when enrolled |

Check a change with `+"`meshgen check --repo .`"+` and review it with `+"`meshgen plan`"+`.
`, name)),
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
