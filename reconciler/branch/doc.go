// Package branch writes each node's signed declaration to its branch
// node/<name> of the mesh repository, fast and safely (issue 6).
//
// A node's branch holds declaration.json, declaration.json.sig and
// secrets/<id>.age (DESIGN.md). [Write] takes what every node must hold and:
//
//   - reads each branch's tip and the declaration on it, and leaves a node
//     alone when nothing but the generation and source would change: an
//     unchanged mesh commits nothing, secrets included;
//   - otherwise raises the generation by one, records the source commit,
//     signs, and builds blobs, trees and a commit in memory;
//   - skips objects the repository already has and writes ONE packfile for
//     all the rest;
//   - moves each ref with compare-and-swap against the tip it read. A node
//     whose ref moved meanwhile is read again and retried, so two reconcilers
//     racing never lose an update and never lower a generation; a node whose
//     branch already holds a render of a newer commit of main is left as it is
//     ([Superseded]).
//
// Two repositories are supported: a local bare repository ([OpenLocal], the
// embedded default), whose refs are moved with git's own lock-file protocol so
// it can be shared with `git push` and `git daemon`; and a remote git server
// ([OpenRemote]), reached through a private cache repository and updated with
// an atomic push whose ref updates name the old hashes.
package branch

import "strings"

// NodeRefs is the prefix of every node's branch, StatusRefs of every
// branch hostd reports on.
const (
	NodeRefs   = "refs/heads/node/"
	StatusRefs = "refs/heads/status/"
)

// Ref returns the name of node's branch, "refs/heads/node/<node>".
func Ref(node string) string { return NodeRefs + node }

// StatusRef returns the name of the branch hostd reports on,
// "refs/heads/status/<node>".
func StatusRef(node string) string { return StatusRefs + node }

// NodeOfRef returns the node whose branch ref is, and whether ref is a
// node's branch.
func NodeOfRef(ref string) (string, bool) { return strings.CutPrefix(ref, NodeRefs) }

// NodeOfStatusRef returns the node reporting on ref, and whether ref is a
// status branch.
func NodeOfStatusRef(ref string) (string, bool) { return strings.CutPrefix(ref, StatusRefs) }

// MainRef is the branch the operators push to.
const MainRef = "refs/heads/main"

// The files of a node's branch.
const (
	DeclarationFile = "declaration.json"
	SignatureFile   = "declaration.json.sig"
	SecretsDir      = "secrets"
)
