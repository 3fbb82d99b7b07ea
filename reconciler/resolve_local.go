package reconciler

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"path"
	"sort"
	"strconv"

	schema "github.com/meshgen/meshgen/catalog-schema"
)

// The range the host assigns ports from: below Linux's ephemeral range
// (32768-60999), above the well-known and most registered service ports.
const (
	PortBase = 20000
	PortSpan = 10000
)

// allocatePorts answers every host-port requirement, node by node: a port
// the last resolution assigned is kept; a new one starts at a hash of
// "<assignment>/<requirement>" and probes upward, in assignment and
// requirement order, to the first port free on that node (ADR 0038: the
// mesh assigns the port). So a port never moves once assigned, and no two on
// a node are alike.
func (r *resolver) allocatePorts() {
	type want struct {
		a *Resolved
		q string
	}
	byNode := map[string][]want{}
	for _, a := range r.res.Assignments {
		for _, q := range a.Definition.Requires {
			if q.Provider == schema.ProviderHost && q.Contract == schema.ContractHostPort {
				byNode[a.Node] = append(byNode[a.Node], want{a, q.Name})
			}
		}
	}
	r.res.State.Ports = map[string]map[string]int{}
	set := func(w want, port int) {
		if r.res.State.Ports[w.a.ID] == nil {
			r.res.State.Ports[w.a.ID] = map[string]int{}
		}
		r.res.State.Ports[w.a.ID][w.q] = port
		r.value(w.a, w.q, "port", Value{Text: strconv.Itoa(port)})
	}
	for _, node := range r.res.Nodes {
		wants := byNode[node]
		taken := make(map[int]bool, len(wants))
		var fresh []want
		for _, w := range wants {
			if p, ok := r.previousPort(w.a.ID, w.q); ok && !taken[p] {
				taken[p] = true
				set(w, p)
				continue
			}
			fresh = append(fresh, w)
		}
		for _, w := range fresh {
			sum := sha256.Sum256([]byte(w.a.ID + "/" + w.q))
			off := int(binary.BigEndian.Uint32(sum[:4]) % PortSpan)
			for i := 0; i < PortSpan; i++ {
				p := PortBase + (off+i)%PortSpan
				if !taken[p] {
					taken[p] = true
					set(w, p)
					break
				}
			}
		}
	}
}

func (r *resolver) previousPort(id, req string) (int, bool) {
	if r.opts.Previous == nil {
		return 0, false
	}
	p, ok := r.opts.Previous.Ports[id][req]
	return p, ok && p >= 1 && p <= 65535
}

// value records one resolved field.
func (r *resolver) value(a *Resolved, req, field string, v Value) {
	a.Values[schema.Ref{Requirement: req, Field: field}] = v
}

// resolveLocal answers the requirements the assignment's own node and the
// mesh answer: host directories, facts, identities, operator values and own
// secrets. Ports were answered by allocatePorts.
func (r *resolver) resolveLocal(a *Resolved) {
	m := a.Definition
	r.checkPlacementsAndPins(a)
	for i := range m.Requires {
		q := &m.Requires[i]
		switch q.Provider {
		case schema.ProviderHost:
			r.resolveHost(a, q)
		case schema.ProviderMesh:
			r.resolveMesh(a, q)
		case schema.ProviderOperator:
			r.resolveOperator(a, q)
		case schema.ProviderModule:
			if q.Contract == schema.ContractSecret {
				r.resolveOwnSecret(a, q)
			}
		default:
			r.refuse(Reason{Kind: Unanswerable, Assignment: a.ID, Requirement: q.Name, Pos: reqPos(m, q),
				Message: fmt.Sprintf("provider kind %q is not one of module, host, mesh, operator", q.Provider),
				Hint:    "the four kinds of provider are a closed set (design 27)"})
		}
	}
}

// checkPlacementsAndPins refuses a placement that is not an absolute clean
// path or that names no host directory, and a pin on a requirement no pin
// may choose: a host requirement is answered on its own node.
func (r *resolver) checkPlacementsAndPins(a *Resolved) {
	if len(a.Assignment.Placements) == 0 && len(a.Assignment.Pins) == 0 {
		return
	}
	reqs := map[string]*schema.Requirement{}
	for i := range a.Definition.Requires {
		reqs[a.Definition.Requires[i].Name] = &a.Definition.Requires[i]
	}
	for _, name := range sortedKeys(a.Assignment.Placements) {
		p := a.Assignment.Placements[name]
		pos := fieldPos(a.Assignment, "$.placements."+name)
		q := reqs[name]
		switch {
		case q == nil || q.Provider != schema.ProviderHost || q.Contract != schema.ContractHostDir:
			r.refuse(Reason{Kind: BadPlacement, Assignment: a.ID, Requirement: name, Pos: pos,
				Message: fmt.Sprintf("placement names no host-directory requirement of module %q", a.Module),
				Hint:    "a placement puts one host directory elsewhere: name a requirement with provider host and contract host-directory"})
		case !path.IsAbs(p) || path.Clean(p) != p:
			r.refuse(Reason{Kind: BadPlacement, Assignment: a.ID, Requirement: name, Pos: pos,
				Message: fmt.Sprintf("placement %q is not an absolute, clean path", p),
				Hint:    fmt.Sprintf("write it as %q", cleanAbs(p))})
		}
	}
	for _, name := range sortedKeys(a.Assignment.Pins) {
		q := reqs[name]
		pos := fieldPos(a.Assignment, "$.pins."+name)
		pin := a.Assignment.Pins[name]
		switch {
		case q == nil:
			r.refuse(Reason{Kind: BadPin, Assignment: a.ID, Requirement: name, Pos: pos,
				Message: fmt.Sprintf("pin names no requirement of module %q", a.Module),
				Hint:    "remove the pin, or name one of the module's module requirements"})
		case q.Provider == schema.ProviderHost:
			r.refuse(Reason{Kind: HostElsewhere, Assignment: a.ID, Requirement: name, Pos: pos,
				Message: fmt.Sprintf("a host requirement is answered by the module's own node %q, not by %s", a.Node, pin),
				Hint:    "remove the pin; to put a directory elsewhere on this node, use `placements:`"})
		case q.Provider != schema.ProviderModule:
			r.refuse(Reason{Kind: BadPin, Assignment: a.ID, Requirement: name, Pos: pos,
				Message: fmt.Sprintf("a %s requirement has no provider to pin", q.Provider),
				Hint:    "remove the pin"})
		case q.Contract == schema.ContractSecret:
			r.refuse(Reason{Kind: BadPin, Assignment: a.ID, Requirement: name, Pos: pos,
				Message: fmt.Sprintf("a secret is provided only by the holder of %q; a pin cannot choose another provider", schema.SeatVault),
				Hint:    "remove the pin"})
		}
	}
}

func (r *resolver) resolveHost(a *Resolved, q *schema.Requirement) {
	switch q.Contract {
	case schema.ContractHostDir:
		p := path.Join(a.Root, a.Module, q.Name)
		if pl, ok := a.Assignment.Placements[q.Name]; ok {
			p = pl
		}
		r.value(a, q.Name, "path", Value{Text: p})
	case schema.ContractHostPort:
		// answered by allocatePorts
	case schema.ContractHostFacts:
		node := r.repo.Nodes[a.Node]
		if node.Facts.Address == "" {
			r.refuse(Reason{Kind: Unanswerable, Assignment: a.ID, Requirement: q.Name, Pos: reqPos(a.Definition, q),
				Message: fmt.Sprintf("node %q states no address fact", a.Node),
				Hint:    fmt.Sprintf("add `facts: {address: ...}` to nodes/%s.yaml", a.Node)})
		}
		r.value(a, q.Name, "address", Value{Text: node.Facts.Address})
		r.value(a, q.Name, "machines", Value{Text: r.machines})
	default:
		r.refuse(Reason{Kind: Unanswerable, Assignment: a.ID, Requirement: q.Name, Pos: reqPos(a.Definition, q),
			Message: fmt.Sprintf("the host answers no contract %q", q.Contract),
			Hint:    "a host requirement's contract is host-directory, host-port or host-facts"})
	}
}

func (r *resolver) resolveMesh(a *Resolved, q *schema.Requirement) {
	if q.Contract != "" && q.Contract != schema.ContractMeshIdentity {
		r.refuse(Reason{Kind: Unanswerable, Assignment: a.ID, Requirement: q.Name, Pos: reqPos(a.Definition, q),
			Message: fmt.Sprintf("the mesh answers no contract %q", q.Contract),
			Hint:    "a mesh requirement's contract is mesh-identity"})
		return
	}
	r.value(a, q.Name, "name", Value{Text: a.Identity.Name})
	r.value(a, q.Name, "login", Value{Text: a.Identity.Login})
}

func (r *resolver) resolveOperator(a *Resolved, q *schema.Requirement) {
	v, ok := a.Assignment.Values[q.Name]
	if !ok && q.Default != nil {
		v, ok = *q.Default, true
	}
	if !ok {
		r.refuse(Reason{Kind: NoValue, Assignment: a.ID, Requirement: q.Name, Pos: a.Assignment.Pos,
			Message: fmt.Sprintf("operator value %q has no value and no default", q.Name),
			Hint:    fmt.Sprintf("give it on the assignment: `values: {%s: ...}` in %s", q.Name, a.Assignment.Pos.File)})
		return
	}
	r.value(a, q.Name, schema.OperatorField, Value{Text: v})
}

// resolveOwnSecret answers a module's own secret: made by the vault, the
// holder of mesh-vault, and sealed to the assignment's node.
func (r *resolver) resolveOwnSecret(a *Resolved, q *schema.Requirement) {
	if q.Seat != "" && q.Seat != schema.SeatVault {
		r.refuse(Reason{Kind: BadSeat, Assignment: a.ID, Requirement: q.Name, Pos: reqPos(a.Definition, q),
			Message: fmt.Sprintf("a secret is provided by the holder of %q, not of %q", schema.SeatVault, q.Seat),
			Hint:    fmt.Sprintf("write `seat: %s` or leave the seat out", schema.SeatVault)})
		return
	}
	vault := r.holders[schema.SeatVault]
	if len(vault) == 0 {
		r.refuse(r.unheldSeat(a, q, schema.SeatVault))
		return
	}
	a.Providers[q.Name] = vault[0].ID
	name := a.ID + "." + q.Name
	var spec schema.SecretSpec
	if q.Spec != nil {
		spec = *q.Spec
	}
	if spec.Operator && r.opts.Undelivered[name] {
		// The operator has not delivered it yet: a state, not a failure
		// (design 27, "Refusing").
		if a.Waiting == nil {
			a.Waiting = map[string]Waiting{}
		}
		a.Waiting[q.Name] = Waiting{Assignment: a.ID, Requirement: q.Name, Provider: vault[0].ID,
			Fields: []string{"value"}, Hint: "meshgen vault put " + name}
		return
	}
	r.need(name, spec, "one-party", Recipient{Node: a.Node, Role: roleOf(q), Assignment: a.ID})
	r.value(a, q.Name, "value", Value{Secret: name})
}

func roleOf(q *schema.Requirement) Role {
	if q.Restart == "applied" {
		return Applier
	}
	return Reader
}

// checkNames refuses a public name already held by another assignment. The
// rule (design 27, "An endpoint"): an operator value of type hostname is a
// public name, and a public name is held by one assignment in the whole mesh.
// Its holder is the one that held it in the last resolution, else the first
// in assignment order; every other is refused, naming the holder.
func (r *resolver) checkNames() {
	type claim struct {
		a *Resolved
		q string
	}
	claims := map[string][]claim{}
	for _, a := range r.res.Assignments {
		for _, q := range a.Definition.Requires {
			if q.Provider != schema.ProviderOperator || q.Type != schema.TypeHost {
				continue
			}
			v, ok := a.Values[schema.Ref{Requirement: q.Name, Field: schema.OperatorField}]
			if !ok || v.Text == "" {
				continue
			}
			claims[v.Text] = append(claims[v.Text], claim{a, q.Name})
		}
	}
	r.res.State.Names = map[string]string{}
	for _, name := range sortedKeys(claims) {
		cs := claims[name]
		holder := 0
		if r.opts.Previous != nil {
			for i, c := range cs {
				if c.a.ID == r.opts.Previous.Names[name] {
					holder = i
				}
			}
		}
		r.res.State.Names[name] = cs[holder].a.ID
		for i, c := range cs {
			if i == holder || c.a.ID == cs[holder].a.ID {
				continue
			}
			r.refuse(Reason{Kind: NameHeld, Assignment: c.a.ID, Requirement: c.q,
				Pos:        fieldPos(c.a.Assignment, "$.values."+c.q),
				Message:    fmt.Sprintf("public name %q is already held by %s", name, cs[holder].a.ID),
				Hint:       "choose another name, or release it from " + cs[holder].a.ID + " first",
				Candidates: []string{cs[holder].a.ID}})
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func cleanAbs(p string) string {
	return path.Clean("/" + p)
}

// checkDirectories refuses two host directories at one path on one node (a
// placement onto another assignment's directory): both would write there,
// and each would see the other's files.
func (r *resolver) checkDirectories() {
	type use struct {
		a *Resolved
		q string
	}
	seen := map[string]use{}
	for _, a := range r.res.Assignments {
		for _, q := range a.Definition.Requires {
			if q.Provider != schema.ProviderHost || q.Contract != schema.ContractHostDir {
				continue
			}
			p := a.Values[schema.Ref{Requirement: q.Name, Field: "path"}].Text
			key := a.Node + "\x00" + p
			if first, dup := seen[key]; dup {
				r.refuse(Reason{Kind: BadPlacement, Assignment: a.ID, Requirement: q.Name,
					Pos:     fieldPos(a.Assignment, "$.placements."+q.Name),
					Message: fmt.Sprintf("directory %s is also %s's %q on node %q", p, first.a.ID, first.q, a.Node),
					Hint:    "place one of them elsewhere: each host directory belongs to one requirement"})
				continue
			}
			seen[key] = use{a, q.Name}
		}
	}
}
