// Package synth generates synthetic meshes for benchmarks and property
// tests: N nodes × M assignments over a catalog (the example catalog, or any
// other), every one of which resolves.
//
// Use [Mesh] with a repository whose catalog (contracts and modules) is the
// one to spread; its nodes and assignments are ignored.
package synth

import (
	"fmt"
	"sort"
	"strings"

	schema "github.com/meshgen/meshgen/catalog-schema"
)

// Options say how big a mesh to make.
type Options struct {
	// Nodes is how many nodes the mesh has (at least 1).
	Nodes int
	// PerNode is how many assignments each node holds (at least the number
	// of providing modules the catalog has).
	PerNode int
}

// Result is a synthetic mesh and the answers its providers would report.
type Result struct {
	Repo *schema.Repo
	// Answers are, per node, per provider step ("<module>/<resource>"), the
	// contract fields it answers: the shape of reconciler.Answers.
	Answers map[string]map[string]map[string]string
}

// Mesh spreads catalog's modules over opts.Nodes nodes:
//
//   - a module holding mesh-vault or mesh-broker is assigned once, on the
//     first node, holding the seat;
//   - every other module that provides a contract is assigned on every node
//     (so every consumer has a provider on its own node), the first node's
//     assignment holding the module's seats;
//   - the remaining slots of each node are filled with copies of the
//     modules that provide nothing, named "<module>-v<k>".
//
// Operator values without a default are given, and every public name (an
// operator value of type hostname) is made unique. The result depends only
// on catalog and opts.
func Mesh(catalog *schema.Repo, opts Options) (*Result, error) {
	if opts.Nodes < 1 {
		return nil, fmt.Errorf("synth: %d nodes: want at least 1", opts.Nodes)
	}
	repo := &schema.Repo{
		Mesh:      schema.Mesh{Name: "synth", Defaults: catalog.Mesh.Defaults},
		Nodes:     map[string]*schema.Node{},
		Contracts: catalog.Contracts,
		Modules:   map[string]*schema.Module{},
	}
	names := make([]string, 0, len(catalog.Modules))
	for n := range catalog.Modules {
		names = append(names, n)
	}
	sort.Strings(names)
	var foundation, providers, consumers []string
	for _, n := range names {
		m := catalog.Modules[n]
		repo.Modules[n] = m
		switch {
		case holdsFoundation(m):
			foundation = append(foundation, n)
		case len(m.Provides) > 0:
			providers = append(providers, n)
		default:
			consumers = append(consumers, n)
		}
	}
	slots := opts.PerNode - len(providers)
	if slots < 0 {
		return nil, fmt.Errorf("synth: %d assignments per node: want at least %d, one per providing module", opts.PerNode, len(providers))
	}
	if slots > 0 && len(consumers) == 0 {
		return nil, fmt.Errorf("synth: the catalog has no module that only consumes, to fill %d slots per node", slots)
	}
	// Copies of consumer modules, enough for the slots of one node.
	var fill []string
	for k := 0; len(fill) < slots; k++ {
		for _, c := range consumers {
			if len(fill) == slots {
				break
			}
			name := fmt.Sprintf("%s-v%d", c, k)
			if k == 0 {
				name = c
			}
			if _, ok := repo.Modules[name]; !ok {
				repo.Modules[name] = catalog.Modules[c]
			}
			fill = append(fill, name)
		}
	}
	res := &Result{Repo: repo, Answers: map[string]map[string]map[string]string{}}
	width := len(fmt.Sprint(opts.Nodes - 1))
	for i := 0; i < opts.Nodes; i++ {
		node := fmt.Sprintf("n%0*d", width, i)
		repo.Nodes[node] = &schema.Node{
			Name:      node,
			Recipient: "age1synthetic",
			Facts:     schema.NodeFacts{Address: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)},
		}
		var mods []string
		if i == 0 {
			mods = append(mods, foundation...)
		}
		mods = append(mods, providers...)
		mods = append(mods, fill...)
		for _, mod := range mods {
			a := assign(repo.Modules[mod], mod, node, i == 0)
			repo.Assignments = append(repo.Assignments, a)
			answer(res, repo, a)
		}
	}
	sort.Slice(repo.Assignments, func(i, j int) bool {
		x, y := repo.Assignments[i], repo.Assignments[j]
		if x.Node != y.Node {
			return x.Node < y.Node
		}
		return x.Module < y.Module
	})
	return res, nil
}

func holdsFoundation(m *schema.Module) bool {
	for _, s := range m.Seats {
		if s == schema.SeatVault || s == schema.SeatBroker {
			return true
		}
	}
	return false
}

// assign makes module mod's assignment to node, holding its seats on the
// first node and giving every operator value it needs.
func assign(m *schema.Module, mod, node string, first bool) *schema.Assignment {
	a := &schema.Assignment{
		Node: node, Module: mod,
		Pos: schema.Pos{File: "assignments/" + node + "/" + mod + ".yaml", Line: 1, Col: 1},
	}
	if first {
		a.Seats = append(a.Seats, m.Seats...)
	}
	for _, q := range m.Requires {
		if q.Provider != schema.ProviderOperator {
			continue
		}
		switch {
		case q.Type == schema.TypeHost:
			set(a, q.Name, strings.ReplaceAll(mod+"."+node, "_", "-")+".synth.example")
		case q.Default != nil:
		case q.Type == schema.TypeInt || q.Type == schema.TypePort:
			set(a, q.Name, "1")
		case q.Type == schema.TypeBool:
			set(a, q.Name, "true")
		case q.Type == schema.TypePath:
			set(a, q.Name, "/srv/"+mod)
		default:
			set(a, q.Name, "synthetic")
		}
	}
	return a
}

func set(a *schema.Assignment, k, v string) {
	if a.Values == nil {
		a.Values = map[string]string{}
	}
	a.Values[k] = v
}

// answer records what a's provider steps would answer: every field of the
// provision's contract it does not state and that is not secret.
func answer(res *Result, repo *schema.Repo, a *schema.Assignment) {
	m := repo.Modules[a.Module]
	for _, p := range m.Provides {
		if p.Answer == "" {
			continue
		}
		c, ok := repo.Contract(p.Contract)
		if !ok {
			continue
		}
		fields := map[string]string{}
		for f, fd := range c.Fields {
			if _, stated := p.Values[f]; stated || fd.Secret {
				continue
			}
			fields[f] = synthValue(fd.Type)
		}
		if res.Answers[a.Node] == nil {
			res.Answers[a.Node] = map[string]map[string]string{}
		}
		res.Answers[a.Node][a.Module+"/"+p.Answer] = fields
	}
}

func synthValue(t schema.FieldType) string {
	switch t {
	case schema.TypeInt, schema.TypePort:
		return "1"
	case schema.TypeBool:
		return "true"
	case schema.TypePath:
		return "/synthetic"
	case schema.TypeHost:
		return "synthetic.example"
	}
	return "synthetic"
}
