package reconciler

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	schema "github.com/meshgen/meshgen/catalog-schema"
)

// PlanSource names the two states of a mesh repository a review compares.
type PlanSource struct {
	// Repo is the repository: a git work tree, or a bare repository.
	Repo string
	// Base is the git ref before the change; empty plans from nothing.
	Base string
	// Head is the git ref after the change; empty reads the work tree as it
	// is on disk (HEAD, for a bare repository).
	Head string
	// Answers are the providers' answers as hostd last reported them (the
	// status/<node> branches); without them consumers of answers wait.
	Answers Answers
	// Notes are shown at the top of the plan (answers that could not be
	// read, for example).
	Notes []string
}

// PlanRepository reads both states of src side by side and plans the change
// ([MakePlan]). Nothing else is contacted: no vault, no node.
//
// A head that does not load is an error (a [schema.Problems] listing every
// mistake). A base that does not load does not stop a review: the plan notes
// it and starts from nothing.
func PlanRepository(src PlanSource) (*Plan, error) {
	opts := PlanOptions{Answers: src.Answers, Notes: src.Notes}
	var baseErr error
	var wg sync.WaitGroup
	if src.Base != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			opts.Base, baseErr = schema.LoadRef(src.Repo, src.Base)
		}()
	}
	head := src.Head
	if head == "" && isBare(src.Repo) {
		head = "HEAD" // a bare repository has no directory to read
	}
	var err error
	if head != "" {
		opts.Head, err = schema.LoadRef(src.Repo, head)
	} else {
		opts.Head, err = schema.LoadDir(src.Repo)
	}
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("read the head of %s: %w", src.Repo, err)
	}
	var probs schema.Problems
	switch {
	case errors.As(baseErr, &probs):
		opts.Base = nil
		opts.Notes = append(opts.Notes, fmt.Sprintf("the base %s does not load (%d %s); the plan starts from nothing",
			src.Base, len(probs), plural(len(probs), "problem", "problems")))
	case baseErr != nil:
		return nil, fmt.Errorf("read base %s of %s: %w", src.Base, src.Repo, baseErr)
	}
	return MakePlan(opts)
}

// isBare reports whether dir is a bare git repository: no mesh.yaml and no
// .git, but git's objects and HEAD.
func isBare(dir string) bool {
	for _, name := range []string{"mesh.yaml", ".git"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return false
		}
	}
	_, objects := os.Stat(filepath.Join(dir, "objects"))
	_, head := os.Stat(filepath.Join(dir, "HEAD"))
	return objects == nil && head == nil
}
