package reconciler

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"

	"github.com/meshgen/meshgen/internal/workers"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/hostd/declaration"
)

// PlanOptions are the two states of a repository a plan compares.
type PlanOptions struct {
	// Base is the repository before the change (a pull request's base); nil
	// plans from nothing, so every resource is added.
	Base *schema.Repo
	// Notes are shown at the top of the plan: why there is no base (it did
	// not load), or why answers are missing.
	Notes []string
	// Head is the repository after the change.
	Head *schema.Repo
	// Previous is what the reconcile before Base decided (ports, seats,
	// names), when known; Base's own resolution decides it otherwise.
	Previous *State
	// Answers are providers' answers as last reported, when known. Without
	// them every consumer of an answer is shown waiting.
	Answers Answers
}

// Plan is what a change to the repository would do, node by node, for
// review before it is merged. It needs no vault and no node: secrets are
// named, never valued ([Unsealed]).
type Plan struct {
	Mesh string `json:"mesh"`
	// Resolves is false when Head is refused; Refused then lists why, and
	// nothing would be delivered.
	Resolves bool     `json:"resolves"`
	Refused  []Reason `json:"refused,omitempty"`
	// Notes say what the plan could not take into account: a base that
	// does not load or resolve (the plan then starts from nothing), answers
	// that could not be read.
	Notes []string `json:"notes,omitempty"`
	// Waiting lists requirements waiting for a provider's answer.
	Waiting []PlanWaiting `json:"waiting,omitempty"`
	// Secrets that would be made, sealed to other nodes, or no longer used.
	Secrets []SecretChange `json:"secrets,omitempty"`
	// Nodes holds one entry per node of Base or Head, sorted.
	Nodes []NodePlan `json:"nodes"`
}

// PlanWaiting is a waiting requirement and what is left out until the
// answer arrives.
type PlanWaiting struct {
	Waiting
	// Skipped are the resource IDs not rendered for the consumer.
	Skipped []string `json:"skipped,omitempty"`
}

// SecretChange is a secret whose making or sealing changes.
type SecretChange struct {
	Name string `json:"name"`
	// Change is "made" (new to the mesh: the vault makes it), "resealed"
	// (sealed to other recipients) or "retired" (no longer required).
	Change     string      `json:"change"`
	Recipients []Recipient `json:"recipients,omitempty"`
}

// NodePlan is what would change on one node.
type NodePlan struct {
	Node string `json:"node"`
	// RemovedFromMesh says the node is a node of Base but not of Head: the
	// reconciler would commit its final declaration, with no resources, so
	// its hostd removes the containers it ran and keeps their data.
	RemovedFromMesh bool `json:"removedFromMesh,omitempty"`
	// Added, Changed and Removed hold resource IDs in declared order (Removed
	// in the old order).
	Added   []ResourceChange `json:"added,omitempty"`
	Changed []ResourceChange `json:"changed,omitempty"`
	Removed []ResourceChange `json:"removed,omitempty"`
	// Recreated are long-running containers hostd would replace, and why.
	Recreated []Rerun `json:"recreated,omitempty"`
	// Reruns are run-once steps hostd would run again, and why.
	Reruns []Rerun `json:"reruns,omitempty"`
}

// ResourceChange is one resource added, changed or removed.
type ResourceChange struct {
	ID   string           `json:"id"`
	Kind declaration.Kind `json:"kind"`
	// Fields that changed, for a changed resource ("content", "image", ...).
	Fields []string `json:"fields,omitempty"`
}

// Rerun is a container recreated or a step run again, with every reason.
type Rerun struct {
	ID        string   `json:"id"`
	Container string   `json:"container"`
	Reasons   []string `json:"reasons"`
}

// Changed reports whether the plan changes anything on any node or secret.
func (p *Plan) Changed() bool {
	if len(p.Secrets) > 0 {
		return true
	}
	for _, n := range p.Nodes {
		if n.changes() {
			return true
		}
	}
	return false
}

// changes reports whether the node's branch would change: a resource added,
// changed or removed, or the node removed from the mesh.
func (n *NodePlan) changes() bool {
	return n.RemovedFromMesh || len(n.Added)+len(n.Changed)+len(n.Removed) > 0
}

// MakePlan resolves and renders both states and compares them. A refused
// Head is not an error: the plan says why ([Plan.Resolves]). A refused Base
// plans from nothing. The error is for what should not happen: a resolution
// that renders a declaration hostd would refuse.
func MakePlan(opts PlanOptions) (*Plan, error) {
	p := &Plan{Mesh: opts.Head.Mesh.Name, Notes: opts.Notes, Nodes: []NodePlan{}}
	// The base's resolution decides the head's ports and seats, so it comes
	// first.
	var base *Resolution
	prev := opts.Previous
	if opts.Base != nil {
		res, err := Resolve(opts.Base, ResolveOptions{Previous: opts.Previous, Answers: opts.Answers})
		switch {
		case err == nil:
			base = res
			prev = &res.State
		case errors.As(err, new(*Refusal)):
			p.Notes = append(p.Notes, "the base does not resolve; the plan starts from nothing")
		default:
			return nil, fmt.Errorf("resolve base: %w", err)
		}
	}
	head, err := Resolve(opts.Head, ResolveOptions{Previous: prev, Answers: opts.Answers})
	var ref *Refusal
	if errors.As(err, &ref) {
		p.Refused = ref.Reasons
		return p, nil
	} else if err != nil {
		return nil, fmt.Errorf("resolve head: %w", err)
	}
	p.Resolves = true

	// Only nodes whose resolved assignments differ are rendered: the same
	// inputs render the same declaration, so the others do not change.
	var changed, baseNodes []string
	baseDecls := map[string]*declaration.Declaration{}
	if base != nil {
		same := sameNodes(base, head, opts.Base, opts.Head)
		for _, n := range head.Nodes {
			if !same[n] {
				changed = append(changed, n)
			}
		}
		for _, n := range base.Nodes {
			if !same[n] {
				baseNodes = append(baseNodes, n)
			}
		}
		if baseDecls, err = renderNodes(base, Unsealed{}, baseNodes); err != nil {
			return nil, fmt.Errorf("render base: %w", err)
		}
	} else {
		changed = head.Nodes
	}
	headDecls, err := renderNodes(head, Unsealed{}, changed)
	if err != nil {
		return nil, fmt.Errorf("render head: %w", err)
	}
	for _, a := range head.Assignments {
		for _, q := range a.Definition.Requires {
			if w, ok := a.Waiting[q.Name]; ok {
				pw := PlanWaiting{Waiting: w}
				for _, s := range a.Skipped {
					pw.Skipped = append(pw.Skipped, a.Module+"/"+s)
				}
				p.Waiting = append(p.Waiting, pw)
			}
		}
	}
	p.Secrets = secretChanges(base, head)
	nodes := map[string]bool{}
	for _, n := range head.Nodes {
		nodes[n] = true
	}
	if base != nil {
		for _, n := range base.Nodes {
			nodes[n] = true
		}
	}
	// A node of the base that the head no longer has is removed from the
	// mesh, whether or not the base resolved.
	gone := map[string]bool{}
	if opts.Base != nil {
		for n := range opts.Base.Nodes {
			if _, ok := opts.Head.Nodes[n]; !ok {
				gone[n], nodes[n] = true, true
			}
		}
	}
	declared := declaredRestarts(head)
	names := sortedKeys(nodes)
	p.Nodes = make([]NodePlan, len(names))
	workers.Each(len(names), 0, func(i int) {
		n := names[i]
		p.Nodes[i] = diffNode(n, baseDecls[n], headDecls[n], declared)
		p.Nodes[i].RemovedFromMesh = gone[n]
	})
	return p, nil
}

// declaredRestarts returns, per container ID, the resources its definition
// names under restartOn; any other it names was derived by Render.
func declaredRestarts(res *Resolution) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, a := range res.Assignments {
		for _, r := range a.Definition.Resources {
			if r.Container == "" {
				continue
			}
			m := map[string]bool{}
			for _, x := range r.RestartOn {
				m[a.Module+"/"+x] = true
			}
			out[a.Node+"\x00"+a.Module+"/"+r.Container] = m
		}
	}
	return out
}

func secretChanges(base, head *Resolution) []SecretChange {
	old := map[string]SecretNeed{}
	if base != nil {
		for _, s := range base.Secrets {
			old[s.Name] = s
		}
	}
	var out []SecretChange
	seen := map[string]bool{}
	for _, s := range head.Secrets {
		seen[s.Name] = true
		o, ok := old[s.Name]
		switch {
		case !ok:
			out = append(out, SecretChange{Name: s.Name, Change: "made", Recipients: s.Recipients})
		case !reflect.DeepEqual(o.Nodes(), s.Nodes()):
			out = append(out, SecretChange{Name: s.Name, Change: "resealed", Recipients: s.Recipients})
		}
	}
	for _, name := range sortedKeys(old) {
		if !seen[name] {
			out = append(out, SecretChange{Name: name, Change: "retired"})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// diffNode compares one node's declarations; either may be nil.
func diffNode(node string, old, cur *declaration.Declaration, declared map[string]map[string]bool) NodePlan {
	np := NodePlan{Node: node}
	if old == nil {
		old = &declaration.Declaration{}
	}
	if cur == nil {
		cur = &declaration.Declaration{}
	}
	if reflect.DeepEqual(old.Resources, cur.Resources) {
		return np // most nodes, in most changes: skip the digests
	}
	oldByID := map[string]*declaration.Resource{}
	for i := range old.Resources {
		oldByID[old.Resources[i].ID] = &old.Resources[i]
	}
	oldDig, curDig := old.Digests(), cur.Digests()
	changedIDs := map[string]bool{}
	curIDs := map[string]bool{}
	filesByPath := map[string]string{}
	for i := range cur.Resources {
		r := &cur.Resources[i]
		curIDs[r.ID] = true
		o := oldByID[r.ID]
		switch {
		case o == nil:
			np.Added = append(np.Added, ResourceChange{ID: r.ID, Kind: r.Kind})
			changedIDs[r.ID] = true
			if r.Container != nil && r.Container.RunOnce {
				np.Reruns = append(np.Reruns, Rerun{ID: r.ID, Container: r.Container.Name, Reasons: []string{"new step: runs for the first time"}})
			}
		case oldDig[r.ID] != curDig[r.ID]:
			fields := changedFields(o, r)
			if len(fields) > 0 {
				np.Changed = append(np.Changed, ResourceChange{ID: r.ID, Kind: r.Kind, Fields: fields})
			}
			changedIDs[r.ID] = true
			if r.Container != nil {
				reasons := rerunReasons(node, r, fields, filesByPath, changedIDs, declared)
				rr := Rerun{ID: r.ID, Container: r.Container.Name, Reasons: reasons}
				if r.Container.RunOnce {
					np.Reruns = append(np.Reruns, rr)
				} else {
					np.Recreated = append(np.Recreated, rr)
				}
			}
		}
		if r.File != nil {
			filesByPath[r.File.Path] = r.ID
		}
	}
	for _, r := range old.Resources {
		if !curIDs[r.ID] {
			np.Removed = append(np.Removed, ResourceChange{ID: r.ID, Kind: r.Kind})
		}
	}
	return np
}

// changedFields names the top-level fields of a resource's body that differ.
func changedFields(o, r *declaration.Resource) []string {
	if o.Kind != r.Kind {
		return []string{"kind"}
	}
	var a, b map[string]json.RawMessage
	ja, _ := json.Marshal(body(o))
	jb, _ := json.Marshal(body(r))
	_ = json.Unmarshal(ja, &a)
	_ = json.Unmarshal(jb, &b)
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var out []string
	for _, k := range sortedKeys(keys) {
		if string(a[k]) != string(b[k]) {
			out = append(out, k)
		}
	}
	return out
}

func body(r *declaration.Resource) any {
	switch {
	case r.File != nil:
		return r.File
	case r.Directory != nil:
		return r.Directory
	default:
		return r.Container
	}
}

// rerunReasons says why a container's digest moved: its own fields, and
// each resource it reads that changed, saying when reading it was derived
// rather than declared.
func rerunReasons(node string, r *declaration.Resource, fields []string, filesByPath map[string]string, changed map[string]bool, declared map[string]map[string]bool) []string {
	var reasons []string
	for _, f := range fields {
		reasons = append(reasons, f+" changed")
	}
	decl := declared[node+"\x00"+r.ID]
	mountedFile := map[string]bool{}
	for _, m := range r.Container.Mounts {
		if id := filesByPath[m.Source]; id != "" {
			mountedFile[id] = true
		}
	}
	envFile := map[string]bool{}
	for _, ef := range r.Container.EnvFiles {
		envFile[ef.File] = true
	}
	for _, id := range r.Container.Reads(filesByPath) {
		if !changed[id] {
			continue
		}
		how := "declared under restartOn"
		switch {
		case envFile[id]:
			how = "derived: an env-file it reads"
		case mountedFile[id]:
			how = "derived: a file mounted into it"
		case !decl[id]:
			how = "derived: a secret or consumer file it reads"
		}
		reasons = append(reasons, fmt.Sprintf("%s changed (%s)", id, how))
	}
	if len(reasons) == 0 {
		reasons = append(reasons, "its declaration changed")
	}
	return reasons
}

// inChunks calls fn(0) … fn(n-1) on every core, handing out consecutive
// indexes in chunks so that small calls do not pay for a hand-off each.
func inChunks(n int, fn func(i int)) {
	const chunk = 64
	workers.Each((n+chunk-1)/chunk, 0, func(c int) {
		for i := c * chunk; i < min(n, (c+1)*chunk); i++ {
			fn(i)
		}
	})
}

// sameNodes returns the nodes whose declarations base and head render alike,
// judged from what rendering reads: the mesh's name, and per assignment in
// order its identity, root, assignment file, module definition, resolved
// values, served consumers and skipped resources. A module definition that
// changed at all (even its positions) counts as different.
func sameNodes(base, head *Resolution, baseRepo, headRepo *schema.Repo) map[string]bool {
	out := map[string]bool{}
	if base.Mesh != head.Mesh {
		return out
	}
	modSame := map[string]bool{}
	for name, m := range headRepo.Modules {
		modSame[name] = reflect.DeepEqual(m, baseRepo.Modules[name])
	}
	b, h := base.byNode(), head.byNode()
	for _, n := range head.Nodes {
		bs, hs := b[n], h[n]
		if len(bs) != len(hs) {
			continue
		}
		if _, ok := baseRepo.Nodes[n]; !ok {
			continue
		}
		same := true
		for i := range hs {
			if !sameAssignment(bs[i], hs[i], modSame) {
				same = false
				break
			}
		}
		out[n] = same
	}
	return out
}

func sameAssignment(b, h *Resolved, modSame map[string]bool) bool {
	ba, ha := b.Assignment, h.Assignment
	return b.ID == h.ID && b.Root == h.Root && b.Identity == h.Identity &&
		modSame[h.Module] &&
		reflect.DeepEqual(ba.Seats, ha.Seats) && reflect.DeepEqual(ba.Values, ha.Values) &&
		reflect.DeepEqual(ba.Pins, ha.Pins) && reflect.DeepEqual(ba.Placements, ha.Placements) &&
		ba.BreakGlass == ha.BreakGlass &&
		reflect.DeepEqual(b.Values, h.Values) && reflect.DeepEqual(b.Serves, h.Serves) &&
		reflect.DeepEqual(b.Skipped, h.Skipped)
}
