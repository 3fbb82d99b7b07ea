// Package loop is the reconciler's loop (issue 6): on each push to main it
// observes the repository, resolves and renders every node's declaration,
// asks vaultd to seal every secret to its recipients, signs, and writes the
// node branches that changed, then records what it did in one structured log
// line. It reads as Flux's kustomize-controller does: observe, compare, act,
// record.
//
// [Reconciler.Once] runs one reconcile; [Reconciler.Watch] runs one on every
// push, reacting to a local bare repository's refs with fsnotify (and to
// packed-refs), or polling a remote on an interval, and coalescing a burst of
// pushes into one reconcile.
//
// A node removed from the mesh (its nodes/<n>.yaml gone) whose branch
// node/<n> remains gets, once, a final signed declaration with no resources
// (branch.Node.Removed), so its hostd removes the containers it ran (keeping
// their data) and the branch holds none of its secrets any more. The branch
// is kept, not deleted: hostd refuses a generation lower than the one it
// applied, so a node enrolled again continues from there. The outcome names
// these nodes (Outcome.Removed); later reconciles find the branch already
// empty and write nothing for it.
//
// A refused mesh commits nothing: every branch stays as it was, and the
// returned error (a *reconciler.Refusal or schema.Problems) lists every
// reason. Providers' answers reported by hostd on status/<node> are handed to
// resolution, so a consumer waits until its provider has answered and then
// receives the answer (design 27). An operator secret (spec `operator:
// true`) vaultd has not been given yet is the same state: its consumers
// wait, nothing that reads it is rendered, everything else is written, and
// the outcome and the log line name it with the hint `meshgen vault put
// NAME`; the reconcile after the delivery delivers it. Both kinds of wait
// are recorded on meshgen/state ([status.WaitsFile]), where `meshgen
// status` reads them without asking vaultd. The same reports drive vaultd's
// rotations to the end (driveRotations, ADR 0114). What a resolution decided
// that the next must keep (ports, seat holders, public names) is recorded on
// branch meshgen/state and handed back as the previous state.
//
// Beside it, a successful reconcile records a fingerprint of every input it
// read ([InputsFile]): main's commit, every status/<node> branch, vaultd's
// generation (a change token), every node branch as it left them, the signing key, the recorded
// state and this build ([FormatVersion]). A reconcile that observes the same
// inputs, in this process or a new one, does nothing and says so
// (Outcome.InputsUnchanged, one log line "unchanged"); any change runs the
// full path.
package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/reconciler"
	"github.com/meshgen/meshgen/reconciler/branch"
	"github.com/meshgen/meshgen/reconciler/status"
	"github.com/meshgen/meshgen/vaultd/client"
)

// Vault is what the loop asks of vaultd; *client.Client is one.
type Vault interface {
	Seal(ctx context.Context, req client.SealRequest) (*client.SealResponse, error)
}

// Options configure a [Reconciler].
type Options struct {
	// Repo is the mesh repository: a local directory (bare or a work tree's)
	// or a URL of a git server.
	Repo string
	// CacheDir is where a remote repository is cached; required for a URL.
	CacheDir string
	// Vault seals secrets.
	Vault Vault
	// Signer signs declarations.
	Signer branch.Signer
	// Logger receives one line per reconcile; nil means slog.Default().
	Logger *slog.Logger
	// SealWorkers bounds concurrent seal calls; default 8.
	SealWorkers int
}

// Reconciler reconciles one mesh repository.
type Reconciler struct {
	opts   Options
	repo   *branch.Repository
	remote *branch.Remote
	dir    string // where main and status/* are read
	log    *slog.Logger
	cache  sealCache
	build  string // buildID(FormatVersion)
	signer string // signerID(opts.Signer)
}

// IsRemote reports whether repo names a git server rather than a directory.
func IsRemote(repo string) bool {
	return strings.Contains(repo, "://") || (strings.Contains(repo, ":") && !filepath.IsAbs(repo) && !strings.HasPrefix(repo, "."))
}

// New opens the repository. Close releases a remote's cache.
func New(opts Options) (*Reconciler, error) {
	if opts.Vault == nil || opts.Signer == nil {
		return nil, errors.New("reconciler: a vault and a signer are required")
	}
	r := &Reconciler{opts: opts, log: opts.Logger, build: buildID(FormatVersion), signer: signerID(opts.Signer)}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.opts.SealWorkers <= 0 {
		r.opts.SealWorkers = 8
	}
	if IsRemote(opts.Repo) {
		if opts.CacheDir == "" {
			return nil, fmt.Errorf("repository %s is remote: give a cache directory", opts.Repo)
		}
		rem, err := branch.OpenRemote(opts.Repo, branch.RemoteOptions{CacheDir: opts.CacheDir})
		if err != nil {
			return nil, err
		}
		r.remote, r.repo, r.dir = rem, &rem.Repository, rem.CacheDir()
		return r, nil
	}
	repo, err := branch.OpenLocal(opts.Repo)
	if err != nil {
		return nil, err
	}
	r.repo, r.dir = repo, opts.Repo
	return r, nil
}

// Close releases the remote cache, if any.
func (r *Reconciler) Close() error {
	if r.remote != nil {
		return r.remote.Close()
	}
	return nil
}

// Outcome is what one reconcile did.
type Outcome struct {
	// Source is the commit of main reconciled.
	Source string
	// Refused is set when the mesh did not load or resolve; nothing was
	// written.
	Refused bool
	// Written, Unchanged and Superseded name nodes by what happened to
	// their branch.
	Written, Unchanged, Superseded []string
	// Removed names the nodes removed from the mesh whose branch this
	// reconcile emptied: it committed their final declaration, with no
	// resources. A removed node whose branch already holds it is
	// Unchanged.
	Removed []string
	// Waiting lists requirements waiting for a provider's answer, or for
	// an operator secret not delivered yet (with the hint to deliver it).
	Waiting []reconciler.Waiting
	// Confirmed lists the rotation steps confirmed to vaultd.
	Confirmed []Confirmation
	// Sealed is how many secrets were sealed.
	Sealed int
	// Objects is how many git objects were written.
	Objects int
	// Duration is how long the reconcile took, and Phases how long each
	// of its steps did.
	Duration time.Duration
	Phases   Phases
	// InputsUnchanged is set when every input (main, every status/<node>
	// branch, vaultd's generation, every node branch, the signing key and
	// this build) was what the last successful reconcile recorded: nothing
	// was resolved, rendered, sealed or written, Unchanged lists every node
	// and Waiting is what that reconcile found waiting.
	InputsUnchanged bool
}

// Phases is how long each step of a reconcile took; a step not run is
// zero. The log line of a reconcile states them.
type Phases struct {
	// Resolve is resolving every requirement (twice when an operator
	// secret is not delivered yet).
	Resolve time.Duration
	// Seal is asking vaultd for every secret.
	Seal time.Duration
	// Render is rendering every node's declaration.
	Render time.Duration
	// Write is writing the branches that changed and recording the state.
	Write time.Duration
}

// since adds the time since start to *d.
func since(d *time.Duration, start time.Time) { *d += time.Since(start) }

// Once runs one reconcile of main. On a refusal it writes nothing and
// returns the Outcome with Refused set and an error holding every reason.
//
// It first compares every input with the fingerprint the last successful
// reconcile recorded on meshgen/state ([InputsFile]); when all are equal it
// does nothing more and says so (Outcome.InputsUnchanged): a fresh process
// then costs a read of the refs and one generation call to vaultd instead
// of a resolution and a render.
func (r *Reconciler) Once(ctx context.Context) (out *Outcome, err error) {
	start := time.Now()
	out = &Outcome{}
	defer func() { r.record(out, start, err) }() // one line per reconcile, whatever happened

	// Observe.
	if r.remote != nil {
		if err := r.remote.Fetch(ctx, branch.MainRef, branch.StatusRefs+"*", "refs/heads/meshgen/*", branch.NodeRefs+"*"); err != nil {
			return out, err
		}
	}
	obs, err := r.observe(ctx)
	if err != nil {
		return out, err
	}
	if r.unchanged(obs) {
		out.Source, out.InputsUnchanged = obs.main, true
		out.Unchanged, out.Waiting = sortedKeys(obs.prev.Nodes), obs.prev.Waiting
		return out, nil
	}
	repo, err := loadMain(ctx, r.dir)
	if err != nil {
		var probs schema.Problems
		if errors.As(err, &probs) {
			out.Refused = true
		}
		return out, fmt.Errorf("read main: %w", err)
	}
	out.Source = repo.Source
	reports, err := status.Read(r.dir, status.ReadOptions{ReportsOnly: true})
	if err != nil {
		return out, err
	}
	// Confirm the rotation steps the reports show done before sealing, so
	// this reconcile renders the phase they open.
	var st *client.Status
	out.Confirmed, st, err = r.driveRotations(ctx, repo, reports, obs.vault)
	if err != nil {
		return out, err
	}
	return out, r.reconcile(ctx, repo, answers(reports), st, out, obs)
}

// Reconcile resolves, seals, renders, signs and writes repo (read from main
// at repo.Source) with the providers' answers given: [Reconciler.Once]
// without the observing. Benchmarks and callers holding a repository in
// memory use it. The outcome is logged as by Once.
func (r *Reconciler) Reconcile(ctx context.Context, repo *schema.Repo, ans reconciler.Answers) (out *Outcome, err error) {
	start := time.Now()
	out = &Outcome{Source: repo.Source}
	defer func() { r.record(out, start, err) }()
	return out, r.reconcile(ctx, repo, ans, nil, out, nil)
}

// reconcile compares and acts; st is vaultd's status when the caller has a
// current one, else it is read here. obs is what Once observed, from which
// the inputs are recorded; nil records none.
func (r *Reconciler) reconcile(ctx context.Context, repo *schema.Repo, ans reconciler.Answers, st *client.Status, out *Outcome, obs *observed) error {
	// Compare: resolve and render what every node must hold, keeping what
	// the last committed resolution decided (ports, seats, public names).
	prev, err := r.previous()
	if err != nil {
		return err
	}
	// resolve answers every requirement; a refusal is stated on out.
	resolve := func(undelivered map[string]bool) (*reconciler.Resolution, error) {
		defer since(&out.Phases.Resolve, time.Now())
		res, err := reconciler.Resolve(repo, reconciler.ResolveOptions{Answers: ans, Previous: prev, Undelivered: undelivered})
		var ref *reconciler.Refusal
		if errors.As(err, &ref) {
			out.Refused = true
		}
		return res, err
	}
	res, err := resolve(nil)
	if err != nil {
		return err
	}
	out.Waiting = res.Waiting
	if rot, ok := r.opts.Vault.(Rotator); ok && st == nil {
		if st, err = rot.Status(ctx); err != nil {
			return fmt.Errorf("vault status: %w", err)
		}
	}
	sealStart := time.Now()
	sealed, err := r.seal(ctx, repo, res, st)
	since(&out.Phases.Seal, sealStart)
	if err != nil {
		return err
	}
	if len(sealed.undelivered) > 0 {
		// An operator has not delivered a secret yet: its consumers wait
		// and the rest is reconciled (design 27, "Refusing"). Resolution
		// is deterministic, so resolving again with those secrets
		// undelivered changes only their consumers; every other secret
		// was sealed already.
		if res, err = resolve(sealed.undelivered); err != nil {
			return err
		}
		out.Waiting = res.Waiting
	}
	out.Sealed = len(res.Secrets)
	renderStart := time.Now()
	decls, err := reconciler.Render(res, sealed.index)
	since(&out.Phases.Render, renderStart)
	if err != nil {
		return fmt.Errorf("render: %w", err)
	}
	nodes, err := sealed.nodes(decls)
	if err != nil {
		return err
	}
	removed, err := r.removedNodes(repo, obs)
	if err != nil {
		return err
	}
	for _, n := range removed {
		nodes[n] = emptied(res.Mesh, n)
	}

	// Act: write the branches that changed, then record the state they
	// were rendered with.
	defer since(&out.Phases.Write, time.Now())
	wopts := branch.WriteOptions{Source: repo.Source, Signer: r.opts.Signer}
	wr, err := r.repo.Write(ctx, nodes, wopts)
	if wr != nil {
		out.Objects = wr.Objects
		for _, n := range wr.Nodes {
			switch n.Outcome {
			case branch.Written:
				if nodes[n.Node].Removed {
					out.Removed = append(out.Removed, n.Node)
				} else {
					out.Written = append(out.Written, n.Node)
				}
			case branch.Unchanged:
				out.Unchanged = append(out.Unchanged, n.Node)
			case branch.Superseded:
				out.Superseded = append(out.Superseded, n.Node)
			}
		}
	}
	if err != nil {
		return err
	}
	state, err := json.Marshal(res.State)
	if err != nil {
		return fmt.Errorf("record state: %w", err)
	}
	waits, err := waitsOf(repo.Source, out.Waiting).Marshal()
	if err != nil {
		return err
	}
	files := map[string][]byte{branch.StateFile: state, status.WaitsFile: waits}
	if rec := r.inputsOf(obs, repo, st, wr, out); rec != nil {
		rec.State = digest(state)
		// The seals may have changed vaultd (a secret made, its
		// recipients recorded): record the status after them when they
		// explain every difference, so the next reconcile need not run in
		// full only to see its own seals.
		if d := r.vaultAfterSeals(ctx, obs, st, sealed.asked); d != "" {
			rec.Vault = d
		}
		b, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("record inputs: %w", err)
		}
		files[InputsFile] = b
	}
	if _, err := r.repo.WriteStateFiles(ctx, files, wopts); err != nil {
		return fmt.Errorf("record state: %w", err)
	}
	if out.Objects > 0 {
		// Each write adds a packfile; keep their number bounded. A failure
		// costs speed, not correctness: say so and carry on.
		if _, err := r.repo.Maintain(ctx); err != nil {
			r.log.Warn("repack", "error", err.Error())
		}
	}
	return nil
}

// removedNodes lists, sorted, the nodes that have a branch but are no
// longer nodes of the mesh. The branches are the ones Once observed, or,
// without an observation, read now (a read of the refs, no object).
func (r *Reconciler) removedNodes(repo *schema.Repo, obs *observed) ([]string, error) {
	var names []string
	if obs != nil {
		names = slices.Collect(maps.Keys(obs.nodes))
	} else {
		refs, err := branch.ListRefs(r.dir, branch.NodeRefs)
		if err != nil {
			return nil, err
		}
		for ref := range refs {
			n, _ := branch.NodeOfRef(ref)
			names = append(names, n)
		}
	}
	var out []string
	for _, n := range names {
		if _, ok := repo.Nodes[n]; !ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// emptied is the final declaration of node, removed from mesh: nothing in
// it, so hostd removes every container it made for the node (never their
// data, ADR 0030) and the branch holds no sealed file.
func emptied(mesh, node string) *branch.Node {
	return &branch.Node{Declaration: &declaration.Declaration{Format: declaration.Version, Mesh: mesh, Node: node,
		Resources: []declaration.Resource{}}, Removed: true}
}

// inputsOf is the record of the inputs of a reconcile that succeeded, or
// nil when the next must not be skipped on its account: nothing was
// observed, the vault or the signer cannot be fingerprinted, a rotation
// step was confirmed (vaultd's status moved since it was observed, and the
// next reconcile may confirm the next step), or a newer render superseded a
// branch.
func (r *Reconciler) inputsOf(obs *observed, repo *schema.Repo, st *client.Status, wr *branch.Result, out *Outcome) *inputs {
	if obs == nil || obs.digest == "" || st == nil || obs.vault != nil && st != obs.vault || r.signer == "" || wr == nil ||
		len(out.Confirmed) > 0 || len(out.Superseded) > 0 {
		return nil
	}
	rec := &inputs{Build: r.build, Signer: r.signer, Main: repo.Source, Status: obs.status,
		Vault: obs.digest, Nodes: make(map[string]string, len(wr.Nodes)), Waiting: out.Waiting}
	for _, n := range wr.Nodes {
		rec.Nodes[n.Node] = n.Commit
	}
	return rec
}

// previous reads the state the last reconcile recorded, or nil.
func (r *Reconciler) previous() (*reconciler.State, error) {
	b, err := branch.ReadState(r.dir)
	if err != nil || b == nil {
		return nil, err
	}
	var st reconciler.State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("read %s: %w: repair or delete the branch", branch.StateRef, err)
	}
	return &st, nil
}

// record logs one structured line for a reconcile.
func (r *Reconciler) record(out *Outcome, start time.Time, err error) {
	out.Duration = time.Since(start)
	attrs := []any{
		"source", out.Source,
		"written", out.Written,
		"unchanged", len(out.Unchanged),
		"superseded", out.Superseded,
		"removed", out.Removed,
		"waiting", len(out.Waiting),
		"sealed", out.Sealed,
		"confirmed", len(out.Confirmed),
		"objects", out.Objects,
		"duration", out.Duration.Round(time.Millisecond).String(),
	}
	if out.Phases != (Phases{}) {
		ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
		attrs = append(attrs, slog.Group("phases", "resolve", ms(out.Phases.Resolve), "seal", ms(out.Phases.Seal),
			"render", ms(out.Phases.Render), "write", ms(out.Phases.Write)))
	}
	if hints := waitingHints(out.Waiting); len(hints) > 0 {
		attrs = append(attrs, "undelivered", hints)
	}
	switch {
	case out.InputsUnchanged:
		un := []any{"source", out.Source, "nodes", len(out.Unchanged), "waiting", len(out.Waiting),
			"duration", out.Duration.Round(time.Millisecond).String()}
		if hints := waitingHints(out.Waiting); len(hints) > 0 {
			un = append(un, "undelivered", hints)
		}
		r.log.Info("unchanged", un...)
	case out.Refused:
		r.log.Error("reconcile refused: nothing written", append(attrs, "error", err.Error())...)
	case err != nil:
		r.log.Error("reconcile failed", append(attrs, "error", err.Error())...)
	default:
		r.log.Info("reconciled", attrs...)
	}
}

// waitsOf is the record of what waited at a reconcile of source, for
// `meshgen status` ([status.WaitsFile]).
func waitsOf(source string, ws []reconciler.Waiting) *status.Waits {
	out := &status.Waits{Source: source, Waiting: make([]status.Waiting, len(ws))}
	for i, w := range ws {
		out.Waiting[i] = status.Waiting(w)
	}
	return out
}

// waitingHints lists the waiting requirements an operator must act on, as
// "<assignment>/<requirement>: <hint>", e.g. "gitea@n2/api-key: meshgen
// vault put gitea@n2.api-key".
func waitingHints(ws []reconciler.Waiting) []string {
	var out []string
	for _, w := range ws {
		if w.Hint != "" {
			out = append(out, w.Assignment+"/"+w.Requirement+": "+w.Hint)
		}
	}
	return out
}

// answers turns hostd's reports into resolution's providers' answers.
func answers(reports []status.Node) reconciler.Answers {
	out := reconciler.Answers{}
	for _, n := range reports {
		if n.Report != nil && len(n.Report.Answers) > 0 {
			out[n.Name] = n.Report.Answers
		}
	}
	return out
}

// loadMain reads main. A read that fails for another reason than the
// repository's content is tried again: schema.LoadRef opens the repository
// with go-git's PlainOpen, which can miss every pack while another writer
// (a racing reconciler, git receive-pack) renames a temporary pack into
// place (see branch.OpenGit).
func loadMain(ctx context.Context, dir string) (*schema.Repo, error) {
	var err error
	for attempt := range 4 {
		var repo *schema.Repo
		repo, err = schema.LoadRef(dir, branch.MainRef)
		var probs schema.Problems
		if err == nil || errors.As(err, &probs) {
			return repo, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(10<<attempt) * time.Millisecond):
		}
	}
	return nil, err
}
