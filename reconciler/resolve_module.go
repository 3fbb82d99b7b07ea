package reconciler

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	schema "github.com/meshgen/meshgen/catalog-schema"
)

// resolveModules answers the assignment's module requirements (other than
// its own secrets, answered by resolveLocal): it chooses the provider and
// delivers the provision's fields. What it delivers is kept apart until every
// assignment is resolved (see [Resolved.delivered]), because providers' own
// values are read meanwhile.
func (r *resolver) resolveModules(a *Resolved) {
	m := a.Definition
	for i := range m.Requires {
		q := &m.Requires[i]
		if q.Provider != schema.ProviderModule || q.Contract == schema.ContractSecret {
			continue
		}
		c := r.contract(q.Contract)
		if c == nil {
			r.refuse(Reason{Kind: Unanswerable, Assignment: a.ID, Requirement: q.Name, Pos: reqPos(m, q),
				Message: fmt.Sprintf("contract %q is not in the catalog", q.Contract),
				Hint:    fmt.Sprintf("add catalog/contracts/%s.yaml", q.Contract)})
			continue
		}
		p := r.chooseProvider(a, q)
		if p == nil {
			continue
		}
		a.Providers[q.Name] = p.ID
		r.deliver(a, q, c, p)
	}
}

// contract returns the contract named name: the repository's own, else a
// built-in one; nil when neither has it.
func (r *resolver) contract(name string) *schema.Contract {
	c, _ := r.repo.Contract(name)
	return c
}

// chooseProvider picks which assignment answers q (design 27, "A module
// provider"): the holder of the seat it names; else the assignment's pin;
// else the provider on the consumer's own node; else the only provider.
// Otherwise it refuses, listing the candidates with the holder of a seat that
// delivers the provision first. Nothing is ever guessed.
func (r *resolver) chooseProvider(a *Resolved, q *schema.Requirement) *Resolved {
	m := a.Definition
	pin, pinned := a.Assignment.Pins[q.Name]
	pinPos := fieldPos(a.Assignment, "$.pins."+q.Name)
	if q.Seat != "" {
		hs := r.holders[q.Seat]
		if len(hs) == 0 {
			r.refuse(r.unheldSeat(a, q, q.Seat))
			return nil
		}
		h := hs[0]
		if provisionOf(h.Definition, q.Contract) == nil {
			r.refuse(Reason{Kind: NoProvider, Assignment: a.ID, Requirement: q.Name, Pos: reqPos(m, q),
				Message: fmt.Sprintf("seat %q is held by %s, whose module does not provide %q", q.Seat, h.ID, q.Contract),
				Hint:    fmt.Sprintf("only a seat that delivers a provision can be named: hold %q with a module that provides %q, or name no seat", q.Seat, q.Contract)})
			return nil
		}
		if pinned && pin != h.ID {
			r.refuse(Reason{Kind: BadPin, Assignment: a.ID, Requirement: q.Name, Pos: pinPos,
				Message: fmt.Sprintf("the requirement asks for the holder of seat %q (%s); the pin %s cannot choose another", q.Seat, h.ID, pin),
				Hint:    "remove the pin"})
			return nil
		}
		return h
	}
	if pinned {
		p := r.byID[pin]
		switch {
		case p == nil:
			r.refuse(Reason{Kind: BadPin, Assignment: a.ID, Requirement: q.Name, Pos: pinPos,
				Message: fmt.Sprintf("pin %q names no assignment", pin),
				Hint:    "pin one of: " + listOrNone(idsOf(r.candidates(a, q.Contract)))})
			return nil
		case provisionOf(p.Definition, q.Contract) == nil:
			r.refuse(Reason{Kind: BadPin, Assignment: a.ID, Requirement: q.Name, Pos: pinPos,
				Message: fmt.Sprintf("pinned %s does not provide %q", pin, q.Contract),
				Hint:    "pin one of: " + listOrNone(idsOf(r.candidates(a, q.Contract)))})
			return nil
		}
		return p
	}
	local := r.local[q.Contract+"\x00"+a.Node]
	if len(local) == 1 && local[0] != a {
		return local[0]
	}
	all := r.providers[q.Contract]
	if len(all) == 1 && all[0] != a {
		return all[0]
	}
	cands := r.candidates(a, q.Contract)
	var localCands []*Resolved
	for _, c := range cands {
		if c.Node == a.Node {
			localCands = append(localCands, c)
		}
	}
	switch {
	case len(localCands) == 1:
		return localCands[0]
	case len(cands) == 1:
		return cands[0]
	case len(cands) == 0:
		mods := r.modulesProviding(q.Contract)
		hint := fmt.Sprintf("no module in the catalog provides %q: add one to catalog/modules/", q.Contract)
		if len(mods) > 0 {
			hint = fmt.Sprintf("assign one of these modules: %s", strings.Join(mods, ", "))
		}
		r.refuse(Reason{Kind: NoProvider, Assignment: a.ID, Requirement: q.Name, Pos: reqPos(m, q),
			Message:    fmt.Sprintf("no assignment provides %q", q.Contract),
			Hint:       hint,
			Candidates: mods})
		return nil
	}
	if len(localCands) > 1 {
		cands = localCands
	}
	ids := idsOf(cands)
	r.refuse(Reason{Kind: SeveralCandidates, Assignment: a.ID, Requirement: q.Name, Pos: a.Assignment.Pos,
		Message:    fmt.Sprintf("%q has several candidates and no pin chooses one: %s", q.Contract, strings.Join(ids, ", ")),
		Hint:       fmt.Sprintf("pin one with `pins: {%s: %s}`", q.Name, ids[0]),
		Candidates: ids})
	return nil
}

// candidates returns the assignments providing contract, other than a
// itself: the holders of a seat that delivers it first, then the rest, each
// group in assignment order.
func (r *resolver) candidates(a *Resolved, contract string) []*Resolved {
	var seated, rest []*Resolved
	for _, p := range r.providers[contract] {
		if p == a {
			continue
		}
		if pv := provisionOf(p.Definition, contract); pv != nil && pv.Seat != "" && contains(p.Assignment.Seats, pv.Seat) {
			seated = append(seated, p)
		} else {
			rest = append(rest, p)
		}
	}
	return append(seated, rest...)
}

// modulesProviding lists the catalog's modules that provide contract, sorted.
func (r *resolver) modulesProviding(contract string) []string {
	var out []string
	for name, m := range r.repo.Modules {
		if provisionOf(m, contract) != nil {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func (r *resolver) unheldSeat(a *Resolved, q *schema.Requirement, seat string) Reason {
	var mods []string
	for name, m := range r.repo.Modules {
		if contains(m.Seats, seat) {
			mods = append(mods, name)
		}
	}
	sort.Strings(mods)
	hint := fmt.Sprintf("no module in the catalog can hold %q", seat)
	if len(mods) > 0 {
		hint = fmt.Sprintf("hold it on an assignment of %s: `seats: [%s]`", strings.Join(mods, " or "), seat)
	}
	return Reason{Kind: UnheldSeat, Assignment: a.ID, Requirement: q.Name, Pos: reqPos(a.Definition, q),
		Message:    fmt.Sprintf("seat %q is held by no assignment", seat),
		Hint:       hint,
		Candidates: mods}
}

func provisionOf(m *schema.Module, contract string) *schema.Provision {
	for i := range m.Provides {
		if m.Provides[i].Contract == contract {
			return &m.Provides[i]
		}
	}
	return nil
}

func idsOf(rs []*Resolved) []string {
	out := make([]string, len(rs))
	for i, x := range rs {
		out[i] = x.ID
	}
	return out
}

// deliver fills the consumer a's requirement q from provider p, field by
// field: a per-consumer secret the vault makes and seals to both; a value the
// provision states, expanded on the provider's side; in a contract with a
// per-consumer secret, a string field the provision does not state is the
// consumer's identity, its login (the mesh answers who a consumer is, so
// every party agrees by construction); else the provider's answer, checked
// against the contract, or waiting for it.
func (r *resolver) deliver(a *Resolved, q *schema.Requirement, c *schema.Contract, p *Resolved) {
	pv := provisionOf(p.Definition, q.Contract)
	served := Served{Consumer: a.ID, Requirement: q.Name, Contract: q.Contract, Identity: a.Identity}
	// perConsumer is the name of the consumer's own secret, when the
	// contract has one.
	perConsumer := ""
	if c.PerConsumerSecret != nil {
		perConsumer = q.Contract + "." + a.ID + "." + q.Name
	}
	var answered []string
	for _, f := range sortedKeys(c.Fields) {
		fd := c.Fields[f]
		switch {
		case fd.Secret && c.PerConsumerSecret != nil && c.PerConsumerSecret.Field == f:
			name := perConsumer
			spec, rot := secretSpec(c.PerConsumerSecret.Spec, fd, q.Narrow[f]), c.PerConsumerSecret.Rotation
			if rot == "" {
				rot = "two-party"
			}
			r.need(name, spec, rot, Recipient{Node: p.Node, Role: Applier, Assignment: p.ID})
			r.need(name, spec, rot, Recipient{Node: a.Node, Role: roleOf(q), Assignment: a.ID})
			a.delivered(q.Name, f, Value{Secret: name})
			served.Secret, served.SecretField = name, f
			served.Format, served.TwoParty = spec.Format, rot == "two-party"
		case fd.Secret:
			// A secret the provider holds and shares with each consumer:
			// made by the vault, applied by the provider, read by consumers.
			name := p.ID + "." + q.Contract + "." + f
			r.need(name, schema.SecretSpec{}, "one-party", Recipient{Node: p.Node, Role: Applier, Assignment: p.ID})
			r.need(name, schema.SecretSpec{}, "one-party", Recipient{Node: a.Node, Role: roleOf(q), Assignment: a.ID})
			a.delivered(q.Name, f, Value{Secret: name})
		case pv.Values[f] != "":
			v, err := provisionValue(p, pv.Values[f])
			if err != nil {
				r.refuseOnce(p.ID+"\x00"+q.Contract+"\x00"+f, Reason{Kind: Unanswerable, Assignment: p.ID, Pos: pv.Pos,
					Message: fmt.Sprintf("provision %q field %q: %v", q.Contract, f, err),
					Hint:    "a provision's value may read the provider's host, mesh and operator requirements"})
				continue
			}
			a.delivered(q.Name, f, Value{Text: v})
		case c.PerConsumerSecret != nil && fd.Type == schema.TypeString:
			// The consumer's identity: the login the provider makes for it
			// and the resource named after it (design 27, "The mesh").
			a.delivered(q.Name, f, Value{Text: a.Identity.Login, Credential: perConsumer})
		default:
			answered = append(answered, f)
		}
	}
	r.mu.Lock()
	p.Serves = append(p.Serves, served)
	r.mu.Unlock()
	if len(answered) == 0 {
		return
	}
	if pv.Answer == "" {
		r.refuseOnce(p.ID+"\x00"+q.Contract, Reason{Kind: Unanswerable, Assignment: p.ID, Pos: pv.Pos,
			Message: fmt.Sprintf("provision %q answers no value for %s", q.Contract, strings.Join(answered, ", ")),
			Hint:    "give them under the provision's `values:`, or name the step that answers them with `answer:`"})
		return
	}
	step := p.Module + "/" + pv.Answer
	ans, ok := r.opts.Answers[p.Node][step]
	if !ok {
		if a.Waiting == nil {
			a.Waiting = map[string]Waiting{}
		}
		a.Waiting[q.Name] = Waiting{Assignment: a.ID, Requirement: q.Name, Provider: p.ID, Answer: step, Fields: answered}
		return
	}
	if err := checkAnswer(c, answered, ans); err != nil {
		r.refuseOnce(p.ID+"\x00"+step, Reason{Kind: AnswerOutsideContract, Assignment: p.ID, Pos: pv.Pos,
			Message: fmt.Sprintf("the answer of %s on node %q is not delivered: %v", step, p.Node, err),
			Hint:    fmt.Sprintf("make the step write exactly the fields %s of contract %q", strings.Join(answered, ", "), q.Contract)})
		return
	}
	for _, f := range answered {
		a.delivered(q.Name, f, Value{Text: ans[f]})
	}
}

// refuseOnce refuses x unless a reason with the same key was refused already:
// one provider's defect is reported once, not once per consumer.
func (r *resolver) refuseOnce(key string, x Reason) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.once == nil {
		r.once = map[string]bool{}
	}
	if r.once[key] {
		return
	}
	r.once[key] = true
	r.reasons = append(r.reasons, x)
}

// checkAnswer refuses an answer that carries a field the contract does not
// name (or a secret one: a secret never travels in an answer), misses one it
// must carry, or holds a value of the wrong type.
func checkAnswer(c *schema.Contract, want []string, ans map[string]string) error {
	var extra, missing, bad []string
	for f := range ans {
		fd, ok := c.Fields[f]
		if !ok || fd.Secret {
			extra = append(extra, f)
		}
	}
	for _, f := range want {
		v, ok := ans[f]
		if !ok {
			missing = append(missing, f)
			continue
		}
		if err := checkType(c.Fields[f], v); err != nil {
			bad = append(bad, fmt.Sprintf("%s (%v)", f, err))
		}
	}
	sort.Strings(extra)
	var parts []string
	if len(extra) > 0 {
		parts = append(parts, "it carries fields the contract does not name: "+strings.Join(extra, ", "))
	}
	if len(missing) > 0 {
		parts = append(parts, "it misses fields the contract names: "+strings.Join(missing, ", "))
	}
	if len(bad) > 0 {
		parts = append(parts, "wrong type: "+strings.Join(bad, ", "))
	}
	if len(parts) > 0 {
		return errors.New(strings.Join(parts, "; "))
	}
	return nil
}

func checkType(f schema.Field, v string) error {
	switch f.Type {
	case schema.TypeInt, schema.TypePort:
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not a number", v)
		}
		if f.Type == schema.TypePort && (n < 1 || n > 65535) {
			return fmt.Errorf("%d is not a port", n)
		}
	case schema.TypeBool:
		if v != "true" && v != "false" {
			return fmt.Errorf("%q is not true or false", v)
		}
	}
	if f.MaxLength > 0 && len(v) > f.MaxLength {
		return fmt.Errorf("longer than %d", f.MaxLength)
	}
	if f.MinLength > 0 && len(v) < f.MinLength {
		return fmt.Errorf("shorter than %d", f.MinLength)
	}
	return nil
}

// provisionValue expands a provision's stated value on the provider's side,
// from its own host, mesh and operator requirements.
func provisionValue(p *Resolved, s string) (string, error) {
	return schema.Expand(s, func(ref schema.Ref) (string, error) {
		v, ok := p.Values[ref]
		if !ok || !isLocal(p.Definition, ref.Requirement) {
			return "", fmt.Errorf("it is not a host, mesh or operator value of %s", p.ID)
		}
		if v.Secret != "" {
			return "", errors.New("a secret cannot be a provision's value")
		}
		return v.Text, nil
	})
}

// isLocal reports whether req is one of m's host, mesh or operator
// requirements: those are answered before any module requirement, so reading
// them does not depend on the order assignments are resolved in.
func isLocal(m *schema.Module, req string) bool {
	for i := range m.Requires {
		if q := &m.Requires[i]; q.Name == req {
			return q.Provider == schema.ProviderHost || q.Provider == schema.ProviderMesh || q.Provider == schema.ProviderOperator
		}
	}
	return false
}

// secretSpec is how the vault makes a per-consumer secret: the contract's
// spec, long enough for the contract's field and for the consumer's
// narrowing of it (a module may ask a longer password than the contract
// does, never a shorter one).
func secretSpec(spec schema.SecretSpec, contract, narrow schema.Field) schema.SecretSpec {
	spec.Length = max(spec.Length, contract.MinLength, narrow.MinLength)
	return spec
}

// delivered records a field a provider delivered to a. It is kept apart from
// a.Values while other assignments may read a.Values as a provider, and
// merged by mergeDelivered.
func (a *Resolved) delivered(req, field string, v Value) {
	if a.pending == nil {
		a.pending = map[schema.Ref]Value{}
	}
	a.pending[schema.Ref{Requirement: req, Field: field}] = v
}

// mergeDelivered moves what providers delivered into a.Values.
func (a *Resolved) mergeDelivered() {
	for k, v := range a.pending {
		a.Values[k] = v
	}
	a.pending = nil
}
