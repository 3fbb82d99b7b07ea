package schema

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// OperatorField is the one field of an operator requirement's contract: a
// definition reads an operator value as ${{ <requirement>.value }}.
const OperatorField = "value"

// RequirementFields returns the fields a requirement's contract promises, or
// false when its contract is unknown. An operator requirement has one field,
// [OperatorField], of its type.
func (r *Repo) RequirementFields(req *Requirement) (map[string]Field, bool) {
	if req.Provider == ProviderOperator {
		return map[string]Field{OperatorField: {Type: req.Type}}, true
	}
	c, ok := r.Contract(req.Contract)
	if !ok {
		return nil, false
	}
	return c.Fields, true
}

// moduleCheck holds what checking one module needs.
type moduleCheck struct {
	at
	repo *Repo
	m    *Module
	// fields of each requirement, by requirement name; nil when unknown.
	fields map[string]map[string]Field
	reqs   map[string]*Requirement
}

// checkModule checks catalog/modules/<module>/module.yaml.
func (l *loader) checkModule(m *Module) {
	file := path.Join(ModulesDir, m.Name, ModuleFile)
	c := &moduleCheck{
		at:     l.at(file, m.FieldPos),
		repo:   l.repo,
		m:      m,
		fields: map[string]map[string]Field{},
		reqs:   map[string]*Requirement{},
	}
	if !isName(m.Name) {
		c.addPlain("$", "rename the directory: "+nameHint, "module name %q (from the directory name) is not a valid name", m.Name)
	}
	seen := map[string]bool{}
	for i, s := range m.Seats {
		p := fmt.Sprintf("$.seats[%d]", i)
		if c.checkName(p, "seat", s) && seen[s] {
			c.add(p, "list each seat once", "seat %q is listed twice", s)
		}
		seen[s] = true
	}
	for i := range m.Requires {
		c.requirement(i)
	}
	for i := range m.Provides {
		c.provision(i)
	}
	for i := range m.Resources {
		c.resource(i)
	}
	c.namesNoNodeOrMesh()
}

// requirement checks requires[i].
func (c *moduleCheck) requirement(i int) {
	req := &c.m.Requires[i]
	p := fmt.Sprintf("$.requires[%d]", i)
	dup := false
	if c.checkName(p+".name", "the requirement's name", req.Name) {
		if _, dup = c.reqs[req.Name]; dup {
			c.add(p+".name", "give each requirement its own name", "requirement %q is declared twice", req.Name)
		} else {
			c.reqs[req.Name] = req
		}
	}
	only := func(field, hint string, set bool) {
		if set {
			c.add(p+"."+field, hint, "%s does not apply to a requirement of provider %s", field, req.Provider)
		}
	}
	switch req.Provider {
	case "":
		c.add(p+".provider", "set provider: module, host, mesh or operator", "the requirement's provider is missing")
		return
	case ProviderModule:
		c.moduleRequirement(p, req)
	case ProviderHost:
		switch {
		case req.Contract == "":
			c.add(p+".contract", "use one of "+strings.Join(hostContracts, ", "), "a host requirement needs a contract")
		case !slices.Contains(hostContracts, req.Contract):
			c.add(p+".contract", "use one of "+strings.Join(hostContracts, ", ")+", or set provider: module", "the host answers only host contracts, not %q", req.Contract)
		}
		only("seat", "remove it: the host is always the module's own node", req.Seat != "")
	case ProviderMesh:
		if req.Contract != ContractMeshIdentity {
			c.add(p+".contract", "use contract: "+ContractMeshIdentity, "the mesh answers only %s, not %q", ContractMeshIdentity, req.Contract)
		}
		only("seat", "remove it", req.Seat != "")
	case ProviderOperator:
		switch {
		case req.Type == "":
			c.add(p+".type", "give the operator value a type: "+typeNames(), "an operator requirement needs a type")
		case !slices.Contains(fieldTypes, req.Type):
			c.add(p+".type", "use one of "+typeNames(), "%q is not a field type", req.Type)
		default:
			if req.Default != nil {
				if err := checkValue(req.Type, *req.Default); err != "" {
					c.add(p+".default", "write a default of type "+string(req.Type), "%s", err)
				}
			}
		}
		only("contract", "remove it: an operator requirement's contract is its type and default", req.Contract != "")
		only("seat", "remove it", req.Seat != "")
	default:
		c.add(p+".provider", "use one of module, host, mesh, operator: the set is closed (design 27), a fifth kind is a decision", "%q is not a provider kind", req.Provider)
		return
	}
	if req.Provider != ProviderOperator {
		only("type", "remove it: a requirement's types come from its contract", req.Type != "")
		only("default", "remove it: only an operator requirement has a default", req.Default != nil)
	}
	if req.Spec != nil && req.Contract != ContractSecret {
		c.add(p+".spec", "remove it: only a secret requirement says how the vault makes it", "spec applies only to a requirement of contract secret")
	}
	if req.Spec != nil {
		checkSpec(c.at, p+".spec", *req.Spec)
	}
	if req.Restart != "" && !slices.Contains(restartModes, req.Restart) {
		c.add(p+".restart", "use read-at-start or applied", "%q is not a restart mode", req.Restart)
	}
	if fields, ok := c.repo.RequirementFields(req); ok && req.Name != "" {
		if !dup {
			c.fields[req.Name] = fields
		}
		c.narrowing(p, req, fields)
	} else if len(req.Narrow) > 0 {
		c.add(p+".narrow", "narrow a known contract", "cannot narrow the unknown contract %q", req.Contract)
	}
}

// moduleRequirement checks a requirement of provider module.
func (c *moduleCheck) moduleRequirement(p string, req *Requirement) {
	switch {
	case req.Contract == "":
		c.add(p+".contract", "name the contract the provider answers", "a module requirement needs a contract")
	case req.Contract == ContractSecret:
		if req.Seat != SeatVault {
			c.add(p+".seat", "add `seat: mesh-vault`: only the vault provides secret (design 27)", "a secret requirement must name seat %s", SeatVault)
		}
	case slices.Contains(hostContracts, req.Contract):
		c.add(p+".provider", "set provider: host", "contract %q is answered by the host, not a module", req.Contract)
	case req.Contract == ContractMeshIdentity:
		c.add(p+".provider", "set provider: mesh", "contract %q is answered by the mesh, not a module", req.Contract)
	default:
		if _, ok := c.repo.Contracts[req.Contract]; !ok {
			c.add(p+".contract", "add catalog/contracts/"+req.Contract+".yaml, or name one of: "+strings.Join(sortedKeys(c.repo.Contracts), ", "), "contract %q does not exist", req.Contract)
		}
	}
}

// narrowing checks that a requirement's narrowing only tightens its contract.
func (c *moduleCheck) narrowing(p string, req *Requirement, fields map[string]Field) {
	for _, name := range sortedKeys(req.Narrow) {
		np := p + ".narrow." + name
		n := req.Narrow[name]
		f, ok := fields[name]
		if !ok {
			c.add(np, "narrow one of the contract's fields: "+strings.Join(sortedKeys(fields), ", "), "%q is not a field of contract %q", name, req.Contract)
			continue
		}
		widen := func(key, format string, args ...any) {
			c.add(np+"."+key, "a module may narrow a contract, never widen it: tighten the bound or remove it", format, args...)
		}
		if c.has(np+".type") && n.Type != f.Type {
			widen("type", "changes the type of %q from %s to %s", name, f.Type, n.Type)
		}
		if c.has(np+".secret") && f.Secret && !n.Secret {
			widen("secret", "makes the secret field %q not secret", name)
		}
		if c.has(np+".minLength") && n.MinLength < f.MinLength {
			widen("minLength", "%d is below the contract's minLength %d", n.MinLength, f.MinLength)
		}
		if c.has(np+".maxLength") && f.MaxLength > 0 && n.MaxLength > f.MaxLength {
			widen("maxLength", "%d is above the contract's maxLength %d", n.MaxLength, f.MaxLength)
		}
		if c.has(np+".min") && f.Min != 0 && n.Min < f.Min {
			widen("min", "%d is below the contract's min %d", n.Min, f.Min)
		}
		if c.has(np+".max") && f.Max != 0 && n.Max > f.Max {
			widen("max", "%d is above the contract's max %d", n.Max, f.Max)
		}
	}
}

// provision checks provides[i].
func (c *moduleCheck) provision(i int) {
	pr := &c.m.Provides[i]
	p := fmt.Sprintf("$.provides[%d]", i)
	for j := 0; j < i; j++ {
		if pr.Contract != "" && c.m.Provides[j].Contract == pr.Contract {
			c.add(p+".contract", "provide each contract once", "provision %q is declared twice", pr.Contract)
		}
	}
	var fields map[string]Field
	switch {
	case pr.Contract == "":
		c.add(p+".contract", "name the contract this provision answers", "the provision's contract is missing")
	case pr.Contract == ContractSecret:
		if !slices.Contains(c.m.Seats, SeatVault) || pr.Seat != SeatVault {
			c.add(p+".contract", "only a module holding seat mesh-vault provides secret (design 27): remove this provision", "module %q may not provide secret", c.m.Name)
		}
		fields = builtinFields[ContractSecret]
	case builtinFields[pr.Contract] != nil:
		c.add(p+".contract", "remove it: the host and the mesh answer the built-in contracts", "contract %q is built in; no module provides it", pr.Contract)
	default:
		ct, ok := c.repo.Contracts[pr.Contract]
		if !ok {
			c.add(p+".contract", "add catalog/contracts/"+pr.Contract+".yaml", "contract %q does not exist", pr.Contract)
		} else {
			fields = ct.Fields
		}
	}
	if pr.Seat != "" && !slices.Contains(c.m.Seats, pr.Seat) {
		c.add(p+".seat", "add it to the module's seats, or remove it", "the module cannot hold seat %q", pr.Seat)
	}
	if pr.Answer != "" {
		k := slices.IndexFunc(c.m.Resources, func(r Resource) bool { return r.Name() == pr.Answer })
		switch {
		case k < 0:
			c.add(p+".answer", "name a run-once container of this module", "resource %q does not exist", pr.Answer)
		case c.m.Resources[k].Container == "" || !c.m.Resources[k].RunOnce || c.m.Resources[k].Answer == "":
			c.add(p+".answer", "name a run-once container that declares `answer:`", "resource %q is not a run-once step that writes an answer", pr.Answer)
		}
	}
	for _, k := range sortedKeys(pr.Values) {
		vp := p + ".values." + k
		if fields != nil {
			f, ok := fields[k]
			if !ok {
				c.add(vp, "answer one of the contract's fields: "+strings.Join(sortedKeys(fields), ", "), "%q is not a field of contract %q", k, pr.Contract)
			} else if f.Secret {
				c.add(vp, "the vault makes secret fields; a provider never answers one as a value", "field %q is secret", k)
			}
		}
		c.refs(vp, pr.Values[k], refPlain)
	}
}

// refUse says where a placeholder stands, which decides whether a secret
// field may be read there.
type refUse int

const (
	refPlain      refUse = iota // any non-secret text
	refEnv                      // a container's environment value
	refCommand                  // a container's command argument
	refSecretFile               // a file resource's secret: only secret fields
)

// refs checks every placeholder in s: well formed, naming a requirement of
// the module and a field of its contract, and no secret field outside a
// file's secret.
func (c *moduleCheck) refs(p, s string, use refUse) []Ref {
	refs, err := Refs(s)
	if err != nil {
		c.add(p, "write ${{ requirement.field }}", "%v", err)
		return nil
	}
	for _, r := range refs {
		req, ok := c.reqs[r.Requirement]
		if !ok {
			names := sortedKeys(c.reqs)
			hint := "declare it under requires:"
			if len(names) > 0 {
				hint = "name one of the module's requirements: " + strings.Join(names, ", ")
			}
			c.add(p, hint, "%s names requirement %q, which the module does not have", r, r.Requirement)
			continue
		}
		fields, known := c.fields[r.Requirement]
		if !known {
			continue // its contract is already refused
		}
		f, ok := fields[r.Field]
		if !ok {
			c.add(p, "name one of its fields: "+strings.Join(sortedKeys(fields), ", "), "%s names field %q, which contract %q does not have", r, r.Field, contractName(req))
			continue
		}
		switch {
		case f.Secret && use == refCommand:
			c.add(p, "pass it as a file: a file resource with `secret: "+r.String()+"` mounted into the container, and an argument naming that file", "secret field %s cannot be a command argument", r)
		case f.Secret && use == refEnv:
			c.add(p, "pass it as a file: a file resource with `secret: "+r.String()+"` mounted into the container, or an envFiles entry with its reason (ADR 0086)", "secret field %s cannot be a plain environment value", r)
		case f.Secret && use == refPlain:
			c.add(p, "read it with a file resource's `secret: "+r.String()+"`", "secret field %s may only be read by a file's secret", r)
		case !f.Secret && use == refSecretFile:
			c.add(p, "write non-secret fields with `content:`", "field %s is not secret", r)
		}
	}
	return refs
}

// contractName names a requirement's contract for messages.
func contractName(req *Requirement) string {
	if req.Provider == ProviderOperator {
		return "operator " + string(req.Type)
	}
	return req.Contract
}
