package reconciler

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	schema "github.com/meshgen/meshgen/catalog-schema"
)

// ResolveOptions carries what resolution needs beyond the repository: what
// the last reconcile decided, and what running providers answered.
type ResolveOptions struct {
	// Previous is the State of the last resolution that was committed; nil
	// for the first. Ports in it never move, and a mesh-vault or mesh-broker
	// holder that differs from its Seats is a move (break-glass); with no
	// Seats (nil), moves are not checked.
	Previous *State
	// Answers are the providers' answers hostd reported on status/<node>.
	Answers Answers
	// Undelivered names the operator secrets (spec `operator: true`) the
	// vault has not been given yet (`meshgen vault put NAME`). A consumer
	// of one is waiting, as for a provider's answer: nothing that reads it
	// is rendered, and the secret is not asked of the vault.
	Undelivered map[string]bool
}

// Answers holds providers' answers as hostd reports them: node → resource ID
// of the provider's step ("<module>/<resource>") → contract field → value
// (declaration.Report.Answers, per node).
type Answers map[string]map[string]map[string]string

// State is what one resolution decided that the next must keep: the ports
// the host assigned, the holders of seats and of public names. The loop
// stores it beside the declarations and hands it back as
// [ResolveOptions.Previous].
type State struct {
	// Ports: assignment ID → requirement name → port.
	Ports map[string]map[string]int `json:"ports,omitempty"`
	// Seats: seat → holder assignment ID.
	Seats map[string]string `json:"seats,omitempty"`
	// Names: public name → holder assignment ID.
	Names map[string]string `json:"names,omitempty"`
}

// Resolution is every requirement of every assignment, answered: the values
// to fill, the secrets the vault must make and seal, and who is waiting.
type Resolution struct {
	// Mesh is the mesh's name.
	Mesh string
	// Nodes are every node of the mesh, sorted; each gets a declaration.
	Nodes []string
	// Assignments in a fixed order: by node, then by module.
	Assignments []*Resolved
	// Secrets the vault must make and seal, sorted by name.
	Secrets []SecretNeed
	// Waiting lists requirements whose provider has not answered yet, in
	// assignment order.
	Waiting []Waiting
	// State is what the next resolution must keep.
	State State

	// refused is set when resolution refused; Render then refuses too.
	refused bool
}

// Resolved is one assignment with every requirement answered.
type Resolved struct {
	// ID is "<module>@<node>".
	ID     string
	Node   string
	Module string
	// Root is the node's root directory.
	Root       string
	Assignment *schema.Assignment
	Definition *schema.Module
	// Identity is the assignment's mesh identity (design 27: the mesh).
	Identity Identity
	// Values holds every resolved ${{ requirement.field }}. A secret
	// field's value is a reference to a secret, never the secret.
	Values map[schema.Ref]Value
	// Providers: a module requirement's name → the provider's assignment ID.
	Providers map[string]string
	// Waiting: requirement name → what it waits for; nil when nothing is.
	Waiting map[string]Waiting
	// Serves lists the consumers this assignment provides for, in a fixed
	// order, with what each is delivered; the mesh writes a per-consumer
	// file for each on this assignment's node (see [Render]).
	Serves []Served
	// Skipped names the resources left out of the declaration because they
	// read a requirement still waiting for its provider, or name one that
	// does, in author order.
	Skipped []string

	// pending holds what providers delivered until every assignment is
	// resolved.
	pending map[schema.Ref]Value
}

// Value is one resolved field: plain text, or the name of a secret.
type Value struct {
	Text string `json:"text,omitempty"`
	// Secret names the secret whose sealed file carries the value.
	Secret string `json:"secret,omitempty"`
	// Credential, on a consumer's login, names the per-consumer secret the
	// login goes with: the login rendered is the one of the credential slot
	// the consumer reads now ([SlotLogin] of Text), so during a two-party
	// rotation login and password move together.
	Credential string `json:"credential,omitempty"`
}

// Role is how a recipient takes a secret (design 27, "Rotation").
type Role string

// The two roles of a secret's recipient.
const (
	// Applier: the recipient applies the secret through a provisioner (a
	// provider creating a login).
	Applier Role = "applier"
	// Reader: the recipient reads it at start; a new version recreates it.
	Reader Role = "reader"
)

// Recipient is a node a secret is sealed to, and why.
type Recipient struct {
	Node string `json:"node"`
	Role Role   `json:"role"`
	// Assignment is the assignment on that node that uses the secret.
	Assignment string `json:"assignment"`
}

// SecretNeed is one secret the vault must make (if it has not) and seal to
// its recipients. It carries no value.
type SecretNeed struct {
	// Name is the secret's name in the vault: "<module>@<node>.<requirement>"
	// for a module's own secret, "<provision>.<consumer>.<requirement>" for a
	// per-consumer secret.
	Name string            `json:"name"`
	Spec schema.SecretSpec `json:"spec"`
	// Rotation is "two-party" or "one-party".
	Rotation string `json:"rotation,omitempty"`
	// Recipients in a fixed order: by node, then role.
	Recipients []Recipient `json:"recipients"`
}

// Nodes returns the distinct nodes the secret is sealed to, sorted.
func (s SecretNeed) Nodes() []string {
	var out []string
	for _, r := range s.Recipients {
		if len(out) == 0 || out[len(out)-1] != r.Node {
			out = append(out, r.Node)
		}
	}
	return out
}

// Waiting is a requirement whose provider has not answered yet. It is a
// state, not a failure: nothing that depends on it is rendered.
type Waiting struct {
	Assignment  string `json:"assignment"`
	Requirement string `json:"requirement"`
	// Provider is the provider's assignment ID.
	Provider string `json:"provider"`
	// Answer is the provider's step that will answer, "<module>/<resource>".
	Answer string `json:"answer"`
	// Fields are the contract fields still unanswered, sorted.
	Fields []string `json:"fields"`
	// Hint says what would end the wait when an operator must act, such
	// as `meshgen vault put NAME` for an operator secret not delivered
	// yet; empty when the provider answers by itself.
	Hint string `json:"hint,omitempty"`
}

// Served is one consumer's requirement a provider serves.
type Served struct {
	// Consumer is the consumer's assignment ID.
	Consumer    string
	Requirement string
	// Contract is the provision's name.
	Contract string
	// Identity is the consumer's mesh identity, which the provider uses to
	// name the login and the resource it makes for the consumer.
	Identity Identity
	// Secret is the per-consumer secret the provider applies, if the
	// contract has one; SecretField is the field it fills.
	Secret      string
	SecretField string
	// Format is the secret's derived form ("mosquitto-pbkdf2", "bcrypt"),
	// delivered to the provider beside each value; "" when none.
	Format string
	// TwoParty is set when the secret rotates over two credentials, the
	// second a second login ([SlotLogin]).
	TwoParty bool
}

// Resolve answers every requirement of every assignment of repo (design 27).
//
// When any requirement cannot be answered, it returns the partial Resolution
// and a *[Refusal] holding every reason across the whole mesh; the caller
// must render nothing then. A requirement whose provider has not answered
// yet is not a refusal: it is listed in [Resolution.Waiting].
//
// The result depends only on repo's content and opts, never on the order of
// repo.Assignments or of map iteration.
func Resolve(repo *schema.Repo, opts ResolveOptions) (*Resolution, error) {
	r := newResolver(repo, opts)
	r.index()
	r.checkSeats()
	r.allocatePorts()
	// Each phase answers assignments independently (what they share is
	// locked, and finish sorts it), so it runs on every core.
	as := r.res.Assignments
	inChunks(len(as), func(i int) { r.resolveLocal(as[i]) })
	r.checkNames()
	r.checkDirectories()
	inChunks(len(as), func(i int) { r.resolveModules(as[i]) })
	inChunks(len(as), func(i int) { as[i].mergeDelivered() })
	r.finish()
	if len(r.reasons) > 0 {
		sortReasons(r.reasons)
		r.res.refused = true
		return r.res, &Refusal{Reasons: r.reasons}
	}
	return r.res, nil
}

// resolver holds one resolution's indexes and the reasons collected so far.
type resolver struct {
	repo *schema.Repo
	opts ResolveOptions
	res  *Resolution

	byID map[string]*Resolved
	// providers: contract → assignments whose module provides it, in
	// assignment order.
	providers map[string][]*Resolved
	// local: contract + "\x00" + node → the providers of it on that node.
	local map[string][]*Resolved
	// holders: seat → holding assignments, in assignment order.
	holders map[string][]*Resolved
	secrets map[string]*SecretNeed
	reasons []Reason
	// once holds the keys of reasons refused with refuseOnce.
	once map[string]bool
	// mu guards reasons, once, secrets and every Resolved's Serves while
	// assignments are resolved in parallel.
	mu sync.Mutex
	// machines is the host-facts "machines" field: every node, sorted.
	machines string
}

func newResolver(repo *schema.Repo, opts ResolveOptions) *resolver {
	return &resolver{
		repo:      repo,
		opts:      opts,
		res:       &Resolution{Mesh: repo.Mesh.Name},
		byID:      map[string]*Resolved{},
		providers: map[string][]*Resolved{},
		local:     map[string][]*Resolved{},
		holders:   map[string][]*Resolved{},
		secrets:   map[string]*SecretNeed{},
	}
}

func (r *resolver) refuse(x Reason) {
	r.mu.Lock()
	r.reasons = append(r.reasons, x)
	r.mu.Unlock()
}

// index orders the assignments, refuses a module assigned twice to a node,
// and indexes providers and seat holders.
func (r *resolver) index() {
	for name := range r.repo.Nodes {
		r.res.Nodes = append(r.res.Nodes, name)
	}
	sort.Strings(r.res.Nodes)
	r.machines = strings.Join(r.res.Nodes, ",")

	as := make([]*schema.Assignment, 0, len(r.repo.Assignments))
	for _, a := range r.repo.Assignments {
		if a != nil {
			as = append(as, a)
		}
	}
	sort.SliceStable(as, func(i, j int) bool {
		if as[i].Node != as[j].Node {
			return as[i].Node < as[j].Node
		}
		if as[i].Module != as[j].Module {
			return as[i].Module < as[j].Module
		}
		return as[i].Pos.File < as[j].Pos.File
	})
	r.res.Assignments = make([]*Resolved, 0, len(as))
	for _, a := range as {
		id := a.ID()
		if first, dup := r.byID[id]; dup {
			r.refuse(Reason{
				Kind: AssignedTwice, Assignment: id, Pos: a.Pos,
				Message: fmt.Sprintf("module %q is assigned twice to node %q (also %s)", a.Module, a.Node, posString(first.Assignment.Pos)),
				Hint:    fmt.Sprintf("a module is assigned at most once to a node: remove one of the two assignments of %s", id),
			})
			continue
		}
		m := r.repo.Modules[a.Module]
		if m == nil {
			r.refuse(Reason{Kind: Unanswerable, Assignment: id, Pos: a.Pos,
				Message: fmt.Sprintf("module %q is not in the catalog", a.Module),
				Hint:    fmt.Sprintf("add catalog/modules/%s/module.yaml or remove the assignment", a.Module)})
			continue
		}
		if r.repo.Nodes[a.Node] == nil {
			r.refuse(Reason{Kind: Unanswerable, Assignment: id, Pos: a.Pos,
				Message: fmt.Sprintf("node %q does not exist", a.Node),
				Hint:    fmt.Sprintf("add nodes/%s.yaml or remove the assignment", a.Node)})
			continue
		}
		ra := &Resolved{
			ID: id, Node: a.Node, Module: a.Module,
			Root:       r.nodeRoot(a.Node),
			Assignment: a, Definition: m,
			Identity:  DeriveIdentity(a.Module, a.Node),
			Values:    make(map[schema.Ref]Value, 2*len(m.Requires)),
			Providers: map[string]string{},
		}
		r.byID[id] = ra
		r.res.Assignments = append(r.res.Assignments, ra)
		for _, p := range m.Provides {
			r.providers[p.Contract] = append(r.providers[p.Contract], ra)
			k := p.Contract + "\x00" + a.Node
			r.local[k] = append(r.local[k], ra)
		}
		for _, s := range a.Seats {
			r.holders[s] = append(r.holders[s], ra)
		}
	}
}

func (r *resolver) nodeRoot(node string) string {
	if n := r.repo.Nodes[node]; n != nil && n.Root != "" {
		return n.Root
	}
	if r.repo.Mesh.Defaults.Root != "" {
		return r.repo.Mesh.Defaults.Root
	}
	return schema.DefaultRoot
}

// checkSeats refuses a seat held by two assignments, a seat the module
// cannot hold, and an ordinary assignment moving or raising mesh-vault or
// mesh-broker (design 27: "Raising the vault or the broker again is a genesis
// act").
func (r *resolver) checkSeats() {
	seats := make([]string, 0, len(r.holders))
	for s := range r.holders {
		seats = append(seats, s)
	}
	sort.Strings(seats)
	r.res.State.Seats = map[string]string{}
	for _, seat := range seats {
		hs := r.holders[seat]
		for _, h := range hs {
			if !contains(h.Definition.Seats, seat) {
				r.refuse(Reason{Kind: BadSeat, Assignment: h.ID, Pos: seatPos(h.Assignment, seat),
					Message: fmt.Sprintf("module %q cannot hold seat %q (it can hold: %s)", h.Module, seat, listOrNone(h.Definition.Seats)),
					Hint:    fmt.Sprintf("remove %q from seats, or hold it with a module that declares it", seat)})
			}
		}
		if len(hs) > 1 {
			ids := make([]string, len(hs))
			for i, h := range hs {
				ids[i] = h.ID
			}
			for _, h := range hs[1:] {
				r.refuse(Reason{Kind: SeatHeldTwice, Assignment: h.ID, Pos: seatPos(h.Assignment, seat),
					Message:    fmt.Sprintf("seat %q is already held by %s", seat, hs[0].ID),
					Hint:       fmt.Sprintf("a seat is held by one assignment: remove %q from the seats of all but one of %s", seat, strings.Join(ids, ", ")),
					Candidates: ids})
			}
		}
		r.res.State.Seats[seat] = hs[0].ID
		if seat != schema.SeatVault && seat != schema.SeatBroker || r.opts.Previous == nil || r.opts.Previous.Seats == nil {
			continue
		}
		prev := r.opts.Previous.Seats[seat]
		h := hs[0]
		if prev == h.ID || h.Assignment.BreakGlass != "" {
			continue
		}
		msg := fmt.Sprintf("holding %q raises it again (no assignment held it in the last resolution)", seat)
		if prev != "" {
			msg = fmt.Sprintf("holding %q moves it from %s", seat, prev)
		}
		r.refuse(Reason{Kind: BreakGlass, Assignment: h.ID, Pos: seatPos(h.Assignment, seat),
			Message: msg + ", which is a genesis act, not an ordinary assignment",
			Hint:    fmt.Sprintf("follow the break-glass procedure (it delivers the values %s needs the way genesis did) and record it on the assignment as `breakGlass: <procedure>`", seat)})
	}
}

// finish sorts what resolution collected into its fixed order.
func (r *resolver) finish() {
	names := make([]string, 0, len(r.secrets))
	for n := range r.secrets {
		names = append(names, n)
	}
	sort.Strings(names)
	r.res.Secrets = make([]SecretNeed, 0, len(names))
	for _, n := range names {
		s := r.secrets[n]
		sort.Slice(s.Recipients, func(i, j int) bool {
			a, b := s.Recipients[i], s.Recipients[j]
			if a.Node != b.Node {
				return a.Node < b.Node
			}
			if a.Role != b.Role {
				return a.Role < b.Role
			}
			return a.Assignment < b.Assignment
		})
		r.res.Secrets = append(r.res.Secrets, *s)
	}
	for _, a := range r.res.Assignments {
		for _, q := range a.Definition.Requires {
			if w, ok := a.Waiting[q.Name]; ok {
				r.res.Waiting = append(r.res.Waiting, w)
			}
		}
		if len(a.Waiting) > 0 {
			a.Skipped = skipped(a)
		}
		sort.Slice(a.Serves, func(i, j int) bool {
			if a.Serves[i].Consumer != a.Serves[j].Consumer {
				return a.Serves[i].Consumer < a.Serves[j].Consumer
			}
			return a.Serves[i].Requirement < a.Serves[j].Requirement
		})
	}
}

// need records that secret name must be sealed to a recipient.
func (r *resolver) need(name string, spec schema.SecretSpec, rotation string, to Recipient) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.secrets[name]
	if s == nil {
		s = &SecretNeed{Name: name, Spec: spec, Rotation: rotation}
		r.secrets[name] = s
	}
	for _, x := range s.Recipients {
		if x == to {
			return
		}
	}
	s.Recipients = append(s.Recipients, to)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func listOrNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

func posString(p schema.Pos) string {
	if p.File == "" {
		return "unknown position"
	}
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// fieldPos returns where a field of an assignment stands, else the
// assignment's own position.
func fieldPos(a *schema.Assignment, path string) schema.Pos {
	if p, ok := a.FieldPos[path]; ok {
		return p
	}
	return a.Pos
}

// reqPos returns where a requirement stands in its module's definition.
func reqPos(m *schema.Module, q *schema.Requirement) schema.Pos {
	if q.Pos.File != "" {
		return q.Pos
	}
	return m.Pos
}

// seatPos returns where an assignment lists seat.
func seatPos(a *schema.Assignment, seat string) schema.Pos {
	for i, s := range a.Seats {
		if s == seat {
			return fieldPos(a, fmt.Sprintf("$.seats[%d]", i))
		}
	}
	return a.Pos
}
