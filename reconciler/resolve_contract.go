package reconciler

import schema "github.com/meshgen/meshgen/catalog-schema"

// OperatorField is the one field of an operator requirement's contract:
// `${{ greeting.value }}` reads the value the assignment gives, else the
// default.
const OperatorField = "value"

// contract returns the contract named name: the repository's own, else a
// built-in one; nil when neither has it.
func (r *resolver) contract(name string) *schema.Contract {
	c, _ := r.repo.Contract(name)
	return c
}
