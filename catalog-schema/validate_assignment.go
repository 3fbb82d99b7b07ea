package schema

import (
	"fmt"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

var reflectResource = reflect.TypeFor[Resource]()

// checkValue checks an operator value against its type, returning a
// message or "".
func checkValue(t FieldType, v string) string {
	switch t {
	case TypeInt:
		if _, err := strconv.Atoi(v); err != nil {
			return fmt.Sprintf("%q is not an integer", v)
		}
	case TypeBool:
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Sprintf("%q is not a boolean", v)
		}
	case TypePort:
		if n, err := strconv.Atoi(v); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("%q is not a port (1 to 65535)", v)
		}
	case TypePath:
		if !strings.HasPrefix(v, "/") || hasDotDot(v) {
			return fmt.Sprintf("%q is not an absolute path without ..", v)
		}
	case TypeHost:
		if !isHostname(v) {
			return fmt.Sprintf("%q is not a host name", v)
		}
	}
	return ""
}

// checkSeats checks what needs every module at once: a requirement naming a
// seat must name one that some module can hold and that delivers its
// contract; a foundation seat delivers nothing and cannot be named.
func (l *loader) checkSeats() {
	holders := map[string][]string{}         // seat → modules that can hold it
	delivers := map[string]map[string]bool{} // seat → contracts its holder delivers
	for _, name := range sortedKeys(l.repo.Modules) {
		m := l.repo.Modules[name]
		for _, s := range m.Seats {
			holders[s] = append(holders[s], name)
		}
		for _, pr := range m.Provides {
			if pr.Seat != "" {
				if delivers[pr.Seat] == nil {
					delivers[pr.Seat] = map[string]bool{}
				}
				delivers[pr.Seat][pr.Contract] = true
			}
		}
	}
	for _, name := range sortedKeys(l.repo.Modules) {
		m := l.repo.Modules[name]
		a := l.at(path.Join(ModulesDir, name, ModuleFile), m.FieldPos)
		for i, req := range m.Requires {
			if req.Seat == "" || req.Provider != ProviderModule || !isName(req.Seat) || req.Contract == ContractSecret && req.Seat != SeatVault {
				continue
			}
			p := fmt.Sprintf("$.requires[%d].seat", i)
			switch {
			case len(holders[req.Seat]) == 0 && req.Seat != SeatVault:
				a.add(p, "name a seat a module lists under seats:, or remove seat to take a provider by pin, node or uniqueness", "no module can hold seat %q", req.Seat)
			case len(delivers[req.Seat]) == 0 && req.Seat != SeatVault:
				a.add(p, "remove seat: a foundation seat delivers no provision (design 27); the provider is then chosen by pin, node or uniqueness", "seat %q is a foundation seat and delivers no provision", req.Seat)
			case req.Seat == SeatVault && req.Contract != ContractSecret:
				a.add(p, "the vault's seat delivers only secret", "seat %s does not deliver contract %q", SeatVault, req.Contract)
			case req.Seat != SeatVault && req.Contract != "" && !delivers[req.Seat][req.Contract]:
				a.add(p, "name the seat that delivers "+req.Contract+", or remove seat", "seat %q does not deliver contract %q", req.Seat, req.Contract)
			}
		}
	}
}

// checkAssignment checks assignments/<node>/<module>.yaml.
func (l *loader) checkAssignment(as *Assignment) {
	file := path.Join(AssignmentsDir, as.Node, as.Module+".yaml")
	a := l.at(file, as.FieldPos)
	if _, ok := l.repo.Nodes[as.Node]; !ok {
		a.addPlain("$", "add nodes/"+as.Node+".yaml, or move the assignment under an existing node: "+strings.Join(sortedKeys(l.repo.Nodes), ", "), "node %q does not exist", as.Node)
	}
	m, ok := l.repo.Modules[as.Module]
	if !ok {
		a.addPlain("$", "add catalog/modules/"+as.Module+"/module.yaml, or rename the file after an existing module", "module %q does not exist", as.Module)
		return
	}
	reqs := map[string]*Requirement{}
	for i := range m.Requires {
		reqs[m.Requires[i].Name] = &m.Requires[i]
	}
	find := func(p, kind, name string, want func(*Requirement) string) *Requirement {
		req, ok := reqs[name]
		if !ok {
			names := sortedKeys(reqs)
			a.add(p, "name one of module "+as.Module+"'s requirements: "+strings.Join(names, ", "), "module %q has no requirement %q", as.Module, name)
			return nil
		}
		if msg := want(req); msg != "" {
			a.add(p, msg, "requirement %q cannot take a %s", name, kind)
			return nil
		}
		return req
	}
	seen := map[string]bool{}
	for i, s := range as.Seats {
		p := fmt.Sprintf("$.seats[%d]", i)
		switch {
		case !slices.Contains(m.Seats, s):
			hint := "module " + as.Module + " can hold no seat"
			if len(m.Seats) > 0 {
				hint = "module " + as.Module + " can hold " + strings.Join(m.Seats, ", ")
			}
			a.add(p, hint, "module %q cannot hold seat %q", as.Module, s)
		case seen[s]:
			a.add(p, "list each seat once", "seat %q is listed twice", s)
		}
		seen[s] = true
	}
	for _, k := range sortedKeys(as.Values) {
		p := "$.values." + k
		req := find(p, "value", k, func(r *Requirement) string {
			if r.Provider != ProviderOperator {
				return "only an operator requirement takes a value; this one is answered by its " + string(r.Provider) + " provider"
			}
			return ""
		})
		if req != nil && req.Type != "" {
			if msg := checkValue(req.Type, as.Values[k]); msg != "" {
				a.add(p, "write a value of type "+string(req.Type), "%s", msg)
			}
		}
	}
	for _, k := range sortedKeys(as.Pins) {
		p := "$.pins." + k
		req := find(p, "pin", k, func(r *Requirement) string {
			switch {
			case r.Provider != ProviderModule:
				return "only a module requirement takes a pin"
			case r.Contract == ContractSecret:
				return "only the vault provides secret: remove the pin (design 27)"
			}
			return ""
		})
		if req == nil {
			continue
		}
		mod, node, ok := strings.Cut(as.Pins[k], "@")
		if !ok || !isName(mod) || !isName(node) {
			a.add(p, "write <module>@<node>, such as postgres@n1", "%q is not a provider", as.Pins[k])
			continue
		}
		pm, ok := l.repo.Modules[mod]
		if !ok {
			a.add(p, "pin an existing module", "module %q does not exist", mod)
			continue
		}
		if !slices.ContainsFunc(pm.Provides, func(pr Provision) bool { return pr.Contract == req.Contract }) {
			a.add(p, "pin a module that provides "+req.Contract, "module %q does not provide %q", mod, req.Contract)
			continue
		}
		if !slices.ContainsFunc(l.repo.Assignments, func(x *Assignment) bool { return x.Module == mod && x.Node == node }) {
			a.add(p, "assign "+mod+" to "+node+" (assignments/"+node+"/"+mod+".yaml), or pin an assigned provider", "%s is not assigned", as.Pins[k])
		}
	}
	for _, k := range sortedKeys(as.Placements) {
		p := "$.placements." + k
		if find(p, "placement", k, func(r *Requirement) string {
			if r.Provider != ProviderHost || r.Contract != ContractHostDir {
				return "only a host-directory requirement takes a placement"
			}
			return ""
		}) == nil {
			continue
		}
		v := as.Placements[k]
		switch {
		case !strings.HasPrefix(v, "/"):
			a.add(p, "write an absolute path on the node, such as /srv/data", "%q is not an absolute path", v)
		case hasDotDot(v):
			a.add(p, "write the path without ..", "%q escapes with ..", v)
		}
	}
}
