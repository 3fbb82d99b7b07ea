// Package status reads what hostd reported: the status/<node> branches, each
// holding report.json ([declaration.Report]), beside the node/<node>
// branches the reconciler wrote. [Read] collects both; [Summarize] says per
// node which generation it applied against the latest, when, what failed and
// what was gated, which nodes have not reported within N poll intervals, and
// which were removed from the mesh (issue 6, `meshgen status`). [ReadWaits]
// reads what the reconciler recorded as waiting ([WaitsFile]).
package status

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/reconciler/branch"
)

// Node is one node as its branches show it.
type Node struct {
	Name string
	// Latest is the generation on node/<name>, LatestSource its source on
	// main; zero and empty when the node has no branch yet.
	Latest       uint64
	LatestSource string
	// Removed says node/<name> holds the final, empty declaration of a node
	// removed from the mesh (branch.CommitHead.Removed).
	Removed bool
	// Report is the last report on status/<name>; nil when hostd never
	// reported.
	Report *declaration.Report
}

// ReadOptions say what to read; the zero value reads every node's report
// and latest generation.
type ReadOptions struct {
	// ReportsOnly skips the node/ branches: Latest and LatestSource stay
	// zero (the reconcile loop needs only the reports).
	ReportsOnly bool
}

// Read returns every node that has a node/ or a status/ branch in the
// repository at dir (bare or a work tree), sorted by name.
func Read(dir string, opts ReadOptions) ([]Node, error) {
	repo, err := branch.OpenGit(dir)
	if err != nil {
		return nil, err
	}
	refs, err := repo.References()
	if err != nil {
		return nil, fmt.Errorf("list branches of %s: %w", dir, err)
	}
	byName := map[string]*Node{}
	get := func(n string) *Node {
		if byName[n] == nil {
			byName[n] = &Node{Name: n}
		}
		return byName[n]
	}
	var errs []error
	err = refs.ForEach(func(ref *plumbing.Reference) error {
		if ref.Type() != plumbing.HashReference {
			return nil
		}
		name := ref.Name().String()
		if n, ok := branch.NodeOfRef(name); ok {
			if opts.ReportsOnly {
				return nil
			}
			head, err := latest(repo, n, ref.Hash())
			if err != nil {
				errs = append(errs, fmt.Errorf("branch node/%s: %w", n, err))
				return nil
			}
			nd := get(n)
			nd.Latest, nd.LatestSource, nd.Removed = head.Generation, head.Source, head.Removed
		} else if n, ok := branch.NodeOfStatusRef(name); ok {
			var rep declaration.Report
			if err := readJSON(repo, ref.Hash(), declaration.ReportFile, &rep); err != nil {
				errs = append(errs, fmt.Errorf("branch status/%s: %w", n, err))
				return nil
			}
			get(n).Report = &rep
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	out := make([]Node, 0, len(byName))
	for _, n := range byName {
		out = append(out, *n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// latest reads the generation and source of the declaration at commit h
// of node/<node>: from the writer's commit message, else from the file.
func latest(repo *git.Repository, node string, h plumbing.Hash) (branch.CommitHead, error) {
	c, err := repo.CommitObject(h)
	if err != nil {
		return branch.CommitHead{}, err
	}
	if head, ok := branch.ParseCommitMessage(c.Message, node); ok {
		return head, nil
	}
	var head struct {
		Generation uint64 `json:"generation"`
		Source     string `json:"source"`
	}
	if err := readJSON(repo, h, branch.DeclarationFile, &head); err != nil {
		return branch.CommitHead{}, err
	}
	return branch.CommitHead{Generation: head.Generation, Source: head.Source}, nil
}

func readJSON(repo *git.Repository, commit plumbing.Hash, file string, v any) error {
	c, err := repo.CommitObject(commit)
	if err != nil {
		return err
	}
	f, err := c.File(file)
	if errors.Is(err, object.ErrFileNotFound) {
		return fmt.Errorf("holds no %s", file)
	}
	if err != nil {
		return err
	}
	r, err := f.Reader()
	if err != nil {
		return err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}
