package hostd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/hostd/podman"
)

// ApplyTarget applies the newest declaration that verified (see
// [Host.Adopt] and [Host.Once]). The declaration is verified again from the
// state directory before anything is touched.
func (h *Host) ApplyTarget(ctx context.Context) (declaration.Report, error) {
	t, err := h.loadTarget()
	if errors.Is(err, fs.ErrNotExist) {
		rep := declaration.Report{Mesh: h.cfg.Mesh, Node: h.cfg.Node, Time: time.Now().UTC()}
		return rep, fmt.Errorf("no declaration for node %q has verified yet: nothing to apply (has the reconciler written node/%s?)", h.cfg.Node, h.cfg.Node)
	}
	if err != nil {
		return declaration.Report{}, err
	}
	d, err := Verify(h.pub, h.cfg.Node, h.cfg.Mesh, h.roots, Last{}, t.Branch)
	if err != nil {
		return declaration.Report{}, fmt.Errorf("the recorded target no longer verifies: %w", err)
	}
	return h.Apply(ctx, d, t.Branch)
}

// applier is the state of one apply.
type applier struct {
	h        *Host
	d        *declaration.Declaration
	br       Branch
	st       *state
	prev     map[string]string // st.Applied as it was when the apply began
	digests  map[string]string
	observed map[string]podman.Observed
	byID     map[string]*declaration.Resource
	byPath   map[string]string // file path -> resource ID, of files seen so far
	// changed maps the ID of every resource this apply changed to what
	// happened ("changed", "ran"): a container or step that reads it reacts.
	changed map[string]string
	// dirty says st changed beyond what record compares (a container's ID).
	dirty bool
}

// Apply applies d, whose sealed files are in br, in declared order, never
// sorted: observe (one query of the runtime), then per resource compare, act
// and record. The first failure halts the apply; what follows is reported
// gated and is not touched (ADR 0052). What worked is recorded as it works, so
// a crash at any point leaves a state the next apply converges from. Only
// when every resource applied does what the declaration no longer names go:
// containers hostd made and files it wrote from a secret (remove.go).
//
// d must have passed [Verify]; Apply does not check the signature again.
func (h *Host) Apply(ctx context.Context, d *declaration.Declaration, br Branch) (rep declaration.Report, err error) {
	rep = declaration.Report{Mesh: d.Mesh, Node: d.Node, Attempted: d.Generation, Source: d.Source}
	st, err := h.loadState()
	if err != nil {
		return rep, err
	}
	a := &applier{
		h: h, d: d, br: br, st: st, digests: d.Digests(),
		prev:    make(map[string]string, len(st.Applied)),
		byID:    make(map[string]*declaration.Resource, len(d.Resources)),
		byPath:  map[string]string{},
		changed: map[string]string{},
	}
	for k, v := range st.Applied {
		a.prev[k] = v
	}
	before, _ := json.Marshal(st)
	defer func() {
		rep.Time = time.Now().UTC()
		if err == nil {
			st.Generation = d.Generation
		}
		rep.Generation = st.Generation
		if after, _ := json.Marshal(st); !bytes.Equal(before, after) {
			err = errors.Join(err, h.saveState(st))
		}
		err = errors.Join(err, writeJSON(h.statePath(reportFile), &rep))
	}()

	a.observed, err = a.observe(ctx)
	if err != nil {
		for _, r := range d.Resources {
			rep.Resources = append(rep.Resources, declaration.Result{ID: r.ID, Kind: r.Kind, Outcome: declaration.Gated,
				Reason: "containers could not be observed", Digest: a.digests[r.ID]})
		}
		rep.LeftFiles = a.heldSecretFiles()
		return rep, fmt.Errorf("observe containers: %w", err)
	}

	var failed error
	for i := range d.Resources {
		r := &d.Resources[i]
		a.byID[r.ID] = r
		res := declaration.Result{ID: r.ID, Kind: r.Kind, Digest: a.digests[r.ID]}
		if failed != nil {
			res.Outcome, res.Reason = declaration.Gated, "an earlier resource failed"
			rep.Resources = append(rep.Resources, res)
			continue
		}
		var aerr error
		res.Outcome, res.Reason, aerr = a.apply(ctx, r)
		if aerr != nil {
			res.Outcome, res.Reason = declaration.Failed, aerr.Error()
			failed = fmt.Errorf("apply %q: %w", r.ID, aerr)
		} else if rerr := a.record(r, res.Outcome); rerr != nil {
			res.Outcome, res.Reason = declaration.Failed, rerr.Error()
			failed = fmt.Errorf("record %q: %w", r.ID, rerr)
		}
		if r.File != nil {
			a.byPath[r.File.Path] = r.ID
		}
		rep.Resources = append(rep.Resources, res)
	}
	rep.Answers = a.answers(rep.Resources)
	if failed != nil {
		// Nothing is removed after a failure (remove.go says why); the
		// secret files waiting are reported.
		rep.LeftFiles = a.heldSecretFiles()
		return rep, failed
	}
	var cerr, ferr error
	rep.Removed, cerr = a.removeUndeclared(ctx)
	rep.RemovedFiles, rep.LeftFiles, ferr = a.removeSecretFiles()
	return rep, errors.Join(cerr, ferr)
}

// observe lists the mesh's containers (one query) and inspects, in one more
// query, those of the declaration whose ID is not the one hostd recorded:
// made or replaced outside hostd, or made just before a crash.
func (a *applier) observe(ctx context.Context) (map[string]podman.Observed, error) {
	obs, err := a.h.rt.List(ctx, a.d.Mesh)
	if err != nil {
		return nil, err
	}
	var unknown []string
	for _, r := range a.d.Resources {
		c := r.Container
		if c == nil || c.RunOnce {
			continue
		}
		if o, ok := obs[c.Name]; ok && o.ID != a.st.Containers[c.Name] {
			unknown = append(unknown, c.Name)
		}
	}
	full, err := a.h.rt.Inspect(ctx, unknown)
	if err != nil {
		return nil, err
	}
	for name, o := range full {
		obs[name] = o
	}
	return obs, nil
}

func (a *applier) apply(ctx context.Context, r *declaration.Resource) (declaration.Outcome, string, error) {
	switch {
	case r.File != nil:
		return a.file(r)
	case r.Directory != nil:
		return a.directory(r)
	case r.Container != nil && r.Container.RunOnce:
		return a.step(ctx, r)
	case r.Container != nil:
		return a.container(ctx, r)
	}
	return "", "", fmt.Errorf("resource %q has no body", r.ID)
}

// record writes what worked (ADR 0018); an unchanged resource whose record
// already holds costs nothing.
func (a *applier) record(r *declaration.Resource, o declaration.Outcome) error {
	dg := a.digests[r.ID]
	dirty := a.dirty || a.st.Applied[r.ID] != dg
	a.st.Applied[r.ID] = dg
	if r.Container != nil && r.Container.RunOnce && o == declaration.Ran {
		// The marker is written only after the step exited 0 (ADR 0052).
		dirty = dirty || a.st.Markers[r.ID] != dg
		a.st.Markers[r.ID] = dg
	}
	if f := r.File; f != nil && (f.Secret == nil || f.CreateOnce) {
		// Another kind of file now holds the path: no longer a secret
		// hostd removes.
		if _, ok := a.st.SecretFiles[f.Path]; ok {
			delete(a.st.SecretFiles, f.Path)
			dirty = true
		}
	}
	if !dirty {
		return nil
	}
	a.dirty = false
	return a.h.saveState(a.st)
}
