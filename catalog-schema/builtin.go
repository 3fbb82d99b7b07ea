package schema

import "slices"

// builtinFields are the fields of the contracts the host and the mesh
// answer. They are fixed here; a repository may not redefine them.
var builtinFields = map[string]map[string]Field{
	ContractSecret:       {"value": {Type: TypeString, Secret: true}},
	ContractHostDir:      {"path": {Type: TypePath}},
	ContractHostPort:     {"port": {Type: TypePort}},
	ContractHostFacts:    {"address": {Type: TypeHost}, "machines": {Type: TypeString}},
	ContractMeshIdentity: {"name": {Type: TypeString}, "login": {Type: TypeString}},
}

// builtinDescriptions say what each built-in contract is.
var builtinDescriptions = map[string]string{
	ContractSecret:       "a shared secret, made by the vault (the holder of mesh-vault)",
	ContractHostDir:      "a directory on the module's own node, at <root>/<module>/<requirement> unless placed",
	ContractHostPort:     "a port on the module's own node",
	ContractHostFacts:    "facts about the module's own node: its private address and the mesh's machines",
	ContractMeshIdentity: "the module's identity in the mesh: its name and login",
}

// BuiltinContract returns a fresh copy of the built-in contract name
// (secret, host-directory, host-port, host-facts, mesh-identity), and false
// when name is not one.
func BuiltinContract(name string) (*Contract, bool) {
	fields, ok := builtinFields[name]
	if !ok {
		return nil, false
	}
	c := &Contract{Name: name, Description: builtinDescriptions[name], Fields: make(map[string]Field, len(fields))}
	for k, f := range fields {
		c.Fields[k] = f
	}
	return c, true
}

// BuiltinContracts returns the names of the built-in contracts, sorted.
func BuiltinContracts() []string {
	names := make([]string, 0, len(builtinFields))
	for n := range builtinFields {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Contract returns the contract name: the repository's own, or a built-in
// one. It returns false when neither exists.
func (r *Repo) Contract(name string) (*Contract, bool) {
	if c, ok := r.Contracts[name]; ok {
		return c, true
	}
	return BuiltinContract(name)
}

// hostContracts are the contracts a requirement of provider host may use.
var hostContracts = []string{ContractHostDir, ContractHostPort, ContractHostFacts}
