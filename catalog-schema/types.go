// Package schema owns the operator-facing formats of a mesh repository:
// mesh.yaml, nodes/<node>.yaml, catalog/contracts/<provision>.yaml,
// catalog/modules/<module>/module.yaml and assignments/<node>/<module>.yaml
// (DESIGN.md, design 27).
//
// The types below are the model every other role reads. Parsing and every
// refusal a parser makes live in this package, and every refusal names the
// file, line, column and field, and what would fix it.
package schema

// Repo is a whole mesh repository, as read from main.
type Repo struct {
	Mesh      Mesh
	Nodes     map[string]*Node     // by node name (file name without .yaml)
	Contracts map[string]*Contract // by provision name (file name without .yaml)
	Modules   map[string]*Module   // by module name (directory name)
	// Assignments in a fixed order: by node, then by module.
	Assignments []*Assignment
	// Source is the commit the repository was read from, as a full hash;
	// empty when it was read from a directory.
	Source string
}

// Pos is where a value stands in a file of the repository.
type Pos struct {
	File string `yaml:"-" json:"file"` // slash-separated, relative to the repository root
	Line int    `yaml:"-" json:"line"`
	Col  int    `yaml:"-" json:"col"`
}

// Mesh is mesh.yaml: the mesh's name and defaults.
type Mesh struct {
	Name     string       `yaml:"name" json:"name"`
	Defaults MeshDefaults `yaml:"defaults,omitempty" json:"defaults,omitempty"`
	Pos      Pos          `yaml:"-" json:"-"`
	// FieldPos holds where each value stands, keyed by its YAML path.
	FieldPos map[string]Pos `yaml:"-" json:"-"`
}

// MeshDefaults are the settings a node takes unless it states its own.
type MeshDefaults struct {
	// Root is where a node keeps its assignments' data; default DefaultRoot.
	Root string `yaml:"root,omitempty" json:"root,omitempty"`
	// PollInterval is how often hostd polls its branch, as a Go duration.
	PollInterval string `yaml:"pollInterval,omitempty" json:"pollInterval,omitempty"`
}

// DefaultRoot is a node's root when neither the node nor the mesh names one
// (design 27: "the default under /var/lib").
const DefaultRoot = "/var/lib/meshgen"

// Node is nodes/<node>.yaml: a machine of the mesh.
type Node struct {
	Name string `yaml:"-" json:"-"`
	// Recipient is the node's age recipient, made on the node by `hostd init`.
	Recipient string `yaml:"recipient" json:"recipient"`
	// Root overrides the mesh's default root; fixed at installation.
	Root string `yaml:"root,omitempty" json:"root,omitempty"`
	// Facts are what the host answers host-fact requirements with.
	Facts NodeFacts `yaml:"facts,omitempty" json:"facts,omitempty"`
	Pos   Pos       `yaml:"-" json:"-"`
	// FieldPos holds where each value stands, keyed by its YAML path.
	FieldPos map[string]Pos `yaml:"-" json:"-"`
}

// NodeFacts are facts about a machine a module may require.
type NodeFacts struct {
	// Address is the node's private address.
	Address string `yaml:"address,omitempty" json:"address,omitempty"`
}

// FieldType is the type of a contract field.
type FieldType string

// The field types a contract may use.
const (
	TypeString FieldType = "string"
	TypeInt    FieldType = "int"
	TypeBool   FieldType = "bool"
	TypePort   FieldType = "port"
	TypePath   FieldType = "path"
	TypeHost   FieldType = "hostname"
)

// Contract is catalog/contracts/<provision>.yaml: the fields a provision
// promises. A contract is shared: a database's contract is the database's,
// whoever requires it (design 27).
type Contract struct {
	Name        string           `yaml:"-" json:"-"`
	Description string           `yaml:"description,omitempty" json:"description,omitempty"`
	Fields      map[string]Field `yaml:"fields" json:"fields"`
	// PerConsumerSecret, when set, makes resolution expand a secret
	// requirement for each consumer, named for it, filling this field and
	// delivered to both the provider and the consumer (design 27).
	PerConsumerSecret *PerConsumerSecret `yaml:"perConsumerSecret,omitempty" json:"perConsumerSecret,omitempty"`
	Pos               Pos                `yaml:"-" json:"-"`
	// FieldPos holds where each value stands, keyed by its YAML path
	// such as "$.fields.password.type".
	FieldPos map[string]Pos `yaml:"-" json:"-"`
}

// Field is one field of a contract and what it promises.
type Field struct {
	Type   FieldType `yaml:"type" json:"type"`
	Secret bool      `yaml:"secret,omitempty" json:"secret,omitempty"`
	// Bounds a provider must honour; a module may narrow them, never widen.
	MinLength int `yaml:"minLength,omitempty" json:"minLength,omitempty"`
	MaxLength int `yaml:"maxLength,omitempty" json:"maxLength,omitempty"`
	Min       int `yaml:"min,omitempty" json:"min,omitempty"`
	Max       int `yaml:"max,omitempty" json:"max,omitempty"`
	Pos       Pos `yaml:"-" json:"-"`
}

// PerConsumerSecret is a contract's "for each consumer, one secret".
type PerConsumerSecret struct {
	// Field is the contract's secret field the per-consumer secret fills.
	Field string     `yaml:"field" json:"field"`
	Spec  SecretSpec `yaml:"spec,omitempty" json:"spec,omitempty"`
	// Rotation says how many parties hold it: "two-party" or "one-party".
	Rotation string `yaml:"rotation,omitempty" json:"rotation,omitempty"`
}

// SecretSpec says how the vault makes a secret's value.
type SecretSpec struct {
	Length   int    `yaml:"length,omitempty" json:"length,omitempty"`
	Alphabet string `yaml:"alphabet,omitempty" json:"alphabet,omitempty"` // "alnum", "hex", "base64url"
	// Format asks for a derived form beside the value: "mosquitto-pbkdf2", "bcrypt".
	Format string `yaml:"format,omitempty" json:"format,omitempty"`
	// NotRotatable marks a secret a service takes only at first
	// initialisation; rotating it is refused with Reason (design 27).
	NotRotatable string `yaml:"notRotatable,omitempty" json:"notRotatable,omitempty"`
	// Operator marks a value a person chooses, such as an external API key:
	// the operator hands it to the vault (`meshgen vault put NAME`), the
	// vault never makes or replaces it, and the reconcile waits for it
	// (design 27, "A secret operator value").
	Operator bool `yaml:"operator,omitempty" json:"operator,omitempty"`
	// MaxAge, a Go duration such as 2160h, makes the vault rotate the
	// secret by itself once its value is older (design 27, "Rotation").
	MaxAge string `yaml:"maxAge,omitempty" json:"maxAge,omitempty"`
}

// Built-in contracts answered by the host and the mesh. Their fields are fixed
// here; a repository may not redefine them.
const (
	ContractSecret       = "secret"         // fields: value (secret)
	ContractHostDir      = "host-directory" // fields: path
	ContractHostPort     = "host-port"      // fields: port
	ContractHostFacts    = "host-facts"     // fields: address, machines
	ContractMeshIdentity = "mesh-identity"  // fields: name, login
)

// ProviderKind is one of the four kinds of provider (design 27). The set is
// closed: a fifth kind is a decision.
type ProviderKind string

// The four provider kinds.
const (
	ProviderModule   ProviderKind = "module"
	ProviderHost     ProviderKind = "host"
	ProviderMesh     ProviderKind = "mesh"
	ProviderOperator ProviderKind = "operator"
)

// Seats a module can hold. Foundation seats deliver no provision and cannot
// be named by a requirement; mesh-vault delivers the reserved provision
// "secret".
const (
	SeatVault  = "mesh-vault"
	SeatBroker = "mesh-broker"
	SeatStore  = "mesh-store"
	SeatCA     = "mesh-ca"
)

// Module is catalog/modules/<module>/module.yaml: a module definition. It
// names no node, mesh or host path (design 27, ADR 0112).
type Module struct {
	Name        string `yaml:"-" json:"-"`
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Seats this module can hold; an assignment says which it does.
	Seats []string `yaml:"seats,omitempty" json:"seats,omitempty"`
	// Provides lists the provisions this module answers, each by contract.
	Provides []Provision `yaml:"provides,omitempty" json:"provides,omitempty"`
	// Requires lists everything the module needs.
	Requires []Requirement `yaml:"requires,omitempty" json:"requires,omitempty"`
	// Resources in author order; rendered in this order (ADR 0052).
	Resources []Resource `yaml:"resources,omitempty" json:"resources,omitempty"`
	Pos       Pos        `yaml:"-" json:"-"`
	// FieldPos holds where each value and list item stands, keyed by its
	// YAML path such as "$.requires[1].seat" or "$.resources[0].env.HOME".
	FieldPos map[string]Pos `yaml:"-" json:"-"`
}

// Provision is one provision a module provides.
type Provision struct {
	// Contract is the provision's name and the contract it answers.
	Contract string `yaml:"contract" json:"contract"`
	// Seat, when set, is the seat whose holder delivers this provision.
	Seat string `yaml:"seat,omitempty" json:"seat,omitempty"`
	// Answer names the resource (a run-once step) whose answer file carries
	// the fields only the running provider knows (design 27).
	Answer string `yaml:"answer,omitempty" json:"answer,omitempty"`
	// Values are the contract fields the provider answers at resolution,
	// written with the one form (for example host: "${{ facts.address }}").
	Values map[string]string `yaml:"values,omitempty" json:"values,omitempty"`
	Pos    Pos               `yaml:"-" json:"-"`
}

// Requirement is one thing a module needs (design 27): a name, a contract
// and one of the four provider kinds.
type Requirement struct {
	Name     string       `yaml:"name" json:"name"`
	Contract string       `yaml:"contract,omitempty" json:"contract,omitempty"`
	Provider ProviderKind `yaml:"provider" json:"provider"`
	// Seat asks for the holder of this seat (module providers only).
	Seat string `yaml:"seat,omitempty" json:"seat,omitempty"`
	// Type and Default are an operator requirement's whole contract.
	Type    FieldType `yaml:"type,omitempty" json:"type,omitempty"`
	Default *string   `yaml:"default,omitempty" json:"default,omitempty"`
	// Spec says how the vault makes the value of a requirement of contract
	// secret (a module's own secret). A secret an operator chooses is such a
	// requirement too: the operator hands its value to the vault.
	Spec *SecretSpec `yaml:"spec,omitempty" json:"spec,omitempty"`
	// Narrow tightens the contract's fields for this module; it never widens.
	Narrow map[string]Field `yaml:"narrow,omitempty" json:"narrow,omitempty"`
	// Restart says how the module takes a new secret value: "read-at-start"
	// (the default, recreated by derivation) or "applied" (by a step).
	Restart string `yaml:"restart,omitempty" json:"restart,omitempty"`
	Pos     Pos    `yaml:"-" json:"-"`
}

// Resource is one thing a module declares, in author order. Exactly one of
// File, Directory and Container is set; the YAML key names the resource:
//
//   - file: config
//     path: ${{ data.path }}/app.ini
type Resource struct {
	File      string `yaml:"file,omitempty" json:"file,omitempty"`
	Directory string `yaml:"directory,omitempty" json:"directory,omitempty"`
	Container string `yaml:"container,omitempty" json:"container,omitempty"`

	// file and directory
	Path  string `yaml:"path,omitempty" json:"path,omitempty"`
	Mode  string `yaml:"mode,omitempty" json:"mode,omitempty"`
	Owner string `yaml:"owner,omitempty" json:"owner,omitempty"`
	// file: Content may use the one form for non-secret fields; Secret is a
	// single ${{ requirement.field }} naming a secret field.
	Content    string `yaml:"content,omitempty" json:"content,omitempty"`
	Secret     string `yaml:"secret,omitempty" json:"secret,omitempty"`
	EnvVar     string `yaml:"envVar,omitempty" json:"envVar,omitempty"`
	CreateOnce bool   `yaml:"createOnce,omitempty" json:"createOnce,omitempty"`

	// container
	Image     string            `yaml:"image,omitempty" json:"image,omitempty"`
	Command   []string          `yaml:"command,omitempty" json:"command,omitempty"`
	Env       map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	EnvFiles  []EnvFile         `yaml:"envFiles,omitempty" json:"envFiles,omitempty"`
	Mounts    []Mount           `yaml:"mounts,omitempty" json:"mounts,omitempty"`
	Ports     []Port            `yaml:"ports,omitempty" json:"ports,omitempty"`
	RunOnce   bool              `yaml:"runOnce,omitempty" json:"runOnce,omitempty"`
	RestartOn []string          `yaml:"restartOn,omitempty" json:"restartOn,omitempty"`
	// Answer is the path, inside a mounted directory, where a provider's step
	// writes its answer as a JSON object of contract fields.
	Answer string `yaml:"answer,omitempty" json:"answer,omitempty"`

	Pos Pos `yaml:"-" json:"-"`
}

// Name returns the resource's name, whichever kind it is.
func (r *Resource) Name() string {
	switch {
	case r.File != "":
		return r.File
	case r.Directory != "":
		return r.Directory
	default:
		return r.Container
	}
}

// EnvFile passes a file resource of the module to a container with
// --env-file. Reason is required: a secret reaches a process as a file unless
// a reason says why it cannot (ADR 0086).
type EnvFile struct {
	File   string `yaml:"file" json:"file"`
	Reason string `yaml:"reason" json:"reason"`
}

// Mount binds a path into a container; Source uses the one form.
type Mount struct {
	Source   string `yaml:"source" json:"source"`
	Target   string `yaml:"target" json:"target"`
	ReadOnly bool   `yaml:"readOnly,omitempty" json:"readOnly,omitempty"`
}

// Port publishes a container port; Host uses the one form (a host-port
// requirement), Container is the port inside.
type Port struct {
	Host      string `yaml:"host" json:"host"`
	Container int    `yaml:"container" json:"container"`
	Protocol  string `yaml:"protocol,omitempty" json:"protocol,omitempty"`
}

// Assignment is assignments/<node>/<module>.yaml: module X on node Y.
// A module is assigned at most once to a node; that pair is its identity.
type Assignment struct {
	Node   string `yaml:"-" json:"-"`
	Module string `yaml:"-" json:"-"`
	// Seats this assignment holds, of those its module can.
	Seats []string `yaml:"seats,omitempty" json:"seats,omitempty"`
	// Values answer operator requirements by name.
	Values map[string]string `yaml:"values,omitempty" json:"values,omitempty"`
	// Pins choose a module provider: requirement name → "<module>@<node>".
	Pins map[string]string `yaml:"pins,omitempty" json:"pins,omitempty"`
	// Placements put a host-directory requirement at an absolute path on the
	// node instead of <root>/<module>/<name>.
	Placements map[string]string `yaml:"placements,omitempty" json:"placements,omitempty"`
	// BreakGlass marks a genesis act: moving or raising mesh-vault or
	// mesh-broker (design 27). Its value names the procedure followed.
	BreakGlass string `yaml:"breakGlass,omitempty" json:"breakGlass,omitempty"`
	Pos        Pos    `yaml:"-" json:"-"`
	// FieldPos holds where each map entry or list item stands, keyed by its
	// YAML path such as "$.pins.db" or "$.values.greeting", for errors.
	FieldPos map[string]Pos `yaml:"-" json:"-"`
}

// ID returns the assignment's identity, "<module>@<node>".
func (a *Assignment) ID() string { return a.Module + "@" + a.Node }
