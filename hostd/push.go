package hostd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/meshgen/meshgen/hostd/declaration"
)

const pushedFile = "pushed"

// publish writes the textfile and pushes the report when it says something
// new (its time aside).
func (h *Host) publish(ctx context.Context, rep declaration.Report) error {
	var errs []error
	if h.cfg.Textfile != "" {
		errs = append(errs, WriteTextfile(h.cfg.Textfile, rep))
	}
	if h.cfg.PushURL == "" {
		return errors.Join(errs...)
	}
	noTime := rep
	noTime.Time = time.Time{}
	b, _ := json.Marshal(noTime)
	sum := sha256.Sum256(b)
	key := hex.EncodeToString(sum[:])
	if last, err := os.ReadFile(h.statePath(pushedFile)); err == nil && string(last) == key {
		return errors.Join(errs...)
	}
	if err := h.PushReport(ctx, rep); err != nil {
		return errors.Join(append(errs, err)...)
	}
	return errors.Join(append(errs, writeFileAtomic(h.statePath(pushedFile), []byte(key)))...)
}

func writeFileAtomic(path string, data []byte) error {
	return writeAtomic(path, data, 0o600, -1, -1)
}

// PushReport commits rep as report.json on branch status/<node> of the push
// URL. The update is a compare-and-swap: it names the commit the branch held
// when it was read, and the server refuses it when the branch moved since, so
// it never clobbers; the next apply pushes again.
func (h *Host) PushReport(ctx context.Context, rep declaration.Report) error {
	// The commit is built in memory: it has no parent, and nothing of it is
	// needed once pushed.
	repo, err := git.Init(memory.NewStorage(), nil)
	if err != nil {
		return fmt.Errorf("push report: %w", err)
	}
	auth, err := h.auth(h.cfg.PushURL)
	if err != nil {
		return err
	}
	branch := StatusBranch(h.cfg.Node)
	remote := git.NewRemote(repo.Storer, &config.RemoteConfig{Name: "status", URLs: []string{h.cfg.PushURL}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth})
	if err != nil && !errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return fmt.Errorf("push report: list refs of %s: %w", redact(h.cfg.PushURL), err)
	}
	var old plumbing.Hash
	for _, r := range refs {
		if r.Name() == branch {
			old = r.Hash()
		}
	}
	body, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("push report: encode: %w", err)
	}
	commit, err := commitFiles(repo, map[string][]byte{
		declaration.ReportFile: append(body, '\n'),
		"report.txt":           []byte(FormatText(rep)),
	}, fmt.Sprintf("status of %s: generation %d", h.cfg.Node, rep.Generation), rep.Time)
	if err != nil {
		return fmt.Errorf("push report: %w", err)
	}
	// go-git checks a lease against refs/remotes/<remote>/<branch>: record
	// there what the branch held when it was read. The server then applies
	// the update only if the branch still holds it (compare-and-swap).
	lease := plumbing.ReferenceName("refs/remotes/status/" + branch.Short())
	if err := repo.Storer.SetReference(plumbing.NewHashReference(lease, old)); err != nil {
		return fmt.Errorf("push report: %w", err)
	}
	if err := repo.Storer.SetReference(plumbing.NewHashReference(branch, commit)); err != nil {
		return fmt.Errorf("push report: %w", err)
	}
	err = remote.PushContext(ctx, &git.PushOptions{
		RemoteName:     "status",
		RefSpecs:       []config.RefSpec{config.RefSpec("+" + branch.String() + ":" + branch.String())},
		Auth:           auth,
		ForceWithLease: &git.ForceWithLease{RefName: branch, Hash: old},
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fmt.Errorf("push report to %s %s: %w", redact(h.cfg.PushURL), branch.Short(), err)
	}
	return nil
}

// commitFiles stores a commit holding files (one flat tree) with no parent:
// a status branch holds the newest report, replaced by compare-and-swap.
func commitFiles(repo *git.Repository, files map[string][]byte, msg string, when time.Time) (plumbing.Hash, error) {
	s := repo.Storer
	tree := &object.Tree{}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		obj := s.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)
		w, err := obj.Writer()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if _, err := w.Write(files[n]); err != nil {
			return plumbing.ZeroHash, err
		}
		w.Close()
		h, err := s.SetEncodedObject(obj)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		tree.Entries = append(tree.Entries, object.TreeEntry{Name: n, Mode: filemode.Regular, Hash: h})
	}
	tobj := s.NewEncodedObject()
	if err := tree.Encode(tobj); err != nil {
		return plumbing.ZeroHash, err
	}
	th, err := s.SetEncodedObject(tobj)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if when.IsZero() {
		when = time.Now()
	}
	sig := object.Signature{Name: "hostd", Email: "hostd@localhost", When: when}
	c := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: th}
	cobj := s.NewEncodedObject()
	if err := c.Encode(cobj); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(cobj)
}
