package schema

import (
	"net"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
)

// validate checks the whole repository, recording every problem.
func (l *loader) validate() {
	// What the decoder refused is not checked again: a value of the wrong
	// type, or a file that does not parse, would only echo as more problems.
	l.refused = map[string]map[string]bool{}
	for _, p := range l.probs.list {
		if l.refused[p.Pos.File] == nil {
			l.refused[p.Pos.File] = map[string]bool{}
		}
		l.refused[p.Pos.File][p.Field] = true
	}
	r := l.repo
	if r.Mesh.FieldPos != nil {
		l.checkMesh()
	}
	for _, name := range sortedKeys(r.Nodes) {
		l.checkNode(r.Nodes[name])
	}
	for _, name := range sortedKeys(r.Contracts) {
		l.checkContract(r.Contracts[name])
	}
	for _, name := range sortedKeys(r.Modules) {
		l.checkModule(r.Modules[name])
	}
	l.checkSeats()
	for _, a := range r.Assignments {
		l.checkAssignment(a)
	}
}

// sortedKeys returns a map's keys in order, so problems come out the same
// way every time.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// at reports problems in one file, placing each at the value its YAML path
// names, or at the nearest enclosing value that exists.
type at struct {
	file  string
	fp    map[string]Pos
	probs *problems
	// refused holds the fields the decoder refused in this file; "" means
	// the file did not parse.
	refused map[string]bool
}

// pos returns where the value at path stands.
func (a at) pos(p string) Pos {
	for {
		if pos, ok := a.fp[p]; ok {
			return pos
		}
		i := strings.LastIndexAny(p, ".[")
		if i <= 0 {
			return Pos{File: a.file, Line: 1, Col: 1}
		}
		p = p[:i]
	}
}

// has reports whether the file holds a value at path.
func (a at) has(p string) bool {
	_, ok := a.fp[p]
	return ok
}

// skip reports whether the field at path, or one holding it, was already
// refused by the decoder.
func (a at) skip(p string) bool {
	if a.refused == nil {
		return false
	}
	f := fieldName(p)
	for {
		if a.refused[f] {
			return true
		}
		if f == "" {
			return false
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			f = ""
		} else {
			f = f[:i]
		}
	}
}

// add records a problem at path; the message is prefixed with the field.
func (a at) add(p, hint, format string, args ...any) {
	if a.skip(p) {
		return
	}
	f := fieldName(p)
	if f != "" {
		format = f + ": " + format
	}
	a.probs.add(a.pos(p), f, hint, format, args...)
}

// addPlain records a problem at path whose message names its subject itself.
func (a at) addPlain(p, hint, format string, args ...any) {
	if a.skip(p) {
		return
	}
	a.probs.add(a.pos(p), fieldName(p), hint, format, args...)
}

// checkName records a problem when s, at path, is not a valid name.
func (a at) checkName(p, what, s string) bool {
	if s == "" {
		a.add(p, "give it a name", "%s is missing", what)
		return false
	}
	if !isName(s) {
		a.add(p, nameHint, "%s %q is not a valid name", what, s)
		return false
	}
	return true
}

// checkMesh checks mesh.yaml.
func (l *loader) checkMesh() {
	m := &l.repo.Mesh
	a := l.at(MeshFile, m.FieldPos)
	if m.Name == "" {
		a.add("$.name", "add `name: <mesh>` to mesh.yaml", "the mesh's name is missing")
	} else {
		a.checkName("$.name", "the mesh's name", m.Name)
	}
	if m.Defaults.Root != "" {
		checkHostRoot(a, "$.defaults.root", m.Defaults.Root)
	}
	if s := m.Defaults.PollInterval; s != "" || a.has("$.defaults.pollInterval") {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			a.add("$.defaults.pollInterval", "write a duration such as 30s, 5m or 1h", "%q is not a duration", s)
		case d <= 0:
			a.add("$.defaults.pollInterval", "write a positive duration such as 30s, 5m or 1h", "%q must be positive", s)
		}
	}
}

// checkHostRoot checks a node root: absolute, clean, no "..".
func checkHostRoot(a at, p, root string) {
	switch {
	case !strings.HasPrefix(root, "/"):
		a.add(p, "write an absolute path such as /var/lib/meshgen", "%q is not an absolute path", root)
	case hasDotDot(root):
		a.add(p, "write the path without ..", "%q escapes with ..", root)
	}
}

// checkNode checks nodes/<node>.yaml.
func (l *loader) checkNode(n *Node) {
	file := path.Join(NodesDir, n.Name+".yaml")
	a := l.at(file, n.FieldPos)
	if !isName(n.Name) {
		a.addPlain("$", "rename the file: "+nameHint, "node name %q (from the file name) is not a valid name", n.Name)
	}
	switch {
	case n.Recipient == "":
		a.add("$.recipient", "run `hostd init` on the node and copy the age recipient it prints", "the node's age recipient is missing")
	case !isAgeRecipient(n.Recipient):
		a.add("$.recipient", "an age recipient is \"age1\" followed by 58 characters; copy it from `hostd init` on the node", "%q is not an age recipient", n.Recipient)
	}
	if n.Root != "" {
		checkHostRoot(a, "$.root", n.Root)
	}
	if ad := n.Facts.Address; ad != "" && net.ParseIP(ad) == nil && !isHostname(ad) {
		a.add("$.facts.address", "write an IP address or a host name", "%q is neither an IP address nor a host name", ad)
	}
}

// isHostname reports whether s is a DNS host name.
func isHostname(s string) bool {
	if len(s) > 253 || s == "" {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// hasDotDot reports whether a slash path has a ".." element.
func hasDotDot(p string) bool {
	return slices.Contains(strings.Split(p, "/"), "..")
}

var (
	fieldTypes   = []FieldType{TypeString, TypeInt, TypeBool, TypePort, TypePath, TypeHost}
	alphabets    = []string{"alnum", "hex", "base64url"}
	formats      = []string{"mosquitto-pbkdf2", "bcrypt"}
	rotations    = []string{"two-party", "one-party"}
	restartModes = []string{"read-at-start", "applied"}
	modeRE       = regexp.MustCompile(`^0?[0-7]{3}$`)
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// FieldTypes returns the types a contract field may have.
func FieldTypes() []FieldType { return slices.Clone(fieldTypes) }

// ProviderKinds returns the four kinds of provider (design 27).
func ProviderKinds() []ProviderKind {
	return []ProviderKind{ProviderModule, ProviderHost, ProviderMesh, ProviderOperator}
}

// typeNames lists the field types for hints.
func typeNames() string {
	s := make([]string, len(fieldTypes))
	for i, t := range fieldTypes {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// checkContract checks catalog/contracts/<provision>.yaml.
func (l *loader) checkContract(c *Contract) {
	file := path.Join(ContractsDir, c.Name+".yaml")
	a := l.at(file, c.FieldPos)
	if !isName(c.Name) {
		a.addPlain("$", "rename the file: "+nameHint, "contract name %q (from the file name) is not a valid name", c.Name)
	}
	if _, builtin := BuiltinContract(c.Name); builtin {
		a.addPlain("$", "remove the file: the built-in contracts are "+strings.Join(BuiltinContracts(), ", "), "contract %q is built in and cannot be redefined", c.Name)
		return
	}
	if len(c.Fields) == 0 {
		a.add("$.fields", "list the fields the provision promises under `fields:`", "a contract needs at least one field")
	}
	for _, name := range sortedKeys(c.Fields) {
		checkField(a, "$.fields."+name, name, c.Fields[name])
	}
	if pcs := c.PerConsumerSecret; pcs != nil {
		p := "$.perConsumerSecret"
		f, ok := c.Fields[pcs.Field]
		switch {
		case pcs.Field == "":
			a.add(p+".field", "name the secret field the per-consumer secret fills", "the field is missing")
		case !ok:
			a.add(p+".field", "name one of the contract's fields: "+strings.Join(sortedKeys(c.Fields), ", "), "%q is not a field of contract %q", pcs.Field, c.Name)
		case !f.Secret:
			a.add(p+".field", "mark the field `secret: true`, or name a secret field", "field %q is not secret", pcs.Field)
		}
		if pcs.Rotation != "" && !slices.Contains(rotations, pcs.Rotation) {
			a.add(p+".rotation", "write two-party or one-party", "%q is not a rotation", pcs.Rotation)
		}
		checkSpec(a, p+".spec", pcs.Spec)
	}
}

// checkField checks one contract field.
func checkField(a at, p, name string, f Field) {
	if !isName(name) {
		a.addPlain(p, nameHint, "field name %q is not a valid name", name)
	}
	switch {
	case f.Type == "":
		a.add(p+".type", "give the field a type: "+typeNames(), "the field's type is missing")
	case !slices.Contains(fieldTypes, f.Type):
		a.add(p+".type", "use one of "+typeNames(), "%q is not a field type", f.Type)
	}
	if f.MinLength < 0 || f.MaxLength < 0 {
		a.add(p, "write lengths of 0 or more", "a length cannot be negative")
	}
	if f.MaxLength > 0 && f.MinLength > f.MaxLength {
		a.add(p+".minLength", "make minLength at most maxLength", "minLength %d is above maxLength %d", f.MinLength, f.MaxLength)
	}
	if a.has(p+".min") && a.has(p+".max") && f.Min > f.Max {
		a.add(p+".min", "make min at most max", "min %d is above max %d", f.Min, f.Max)
	}
}

// checkSpec checks how the vault makes a secret.
func checkSpec(a at, p string, s SecretSpec) {
	if s.Length < 0 {
		a.add(p+".length", "write a length of 1 or more", "length %d is negative", s.Length)
	}
	if s.Alphabet != "" && !slices.Contains(alphabets, s.Alphabet) {
		a.add(p+".alphabet", "use one of "+strings.Join(alphabets, ", "), "%q is not an alphabet", s.Alphabet)
	}
	if s.Format != "" && !slices.Contains(formats, s.Format) {
		a.add(p+".format", "use one of "+strings.Join(formats, ", "), "%q is not a secret format", s.Format)
	}
	if s.MaxAge != "" {
		if d, err := time.ParseDuration(s.MaxAge); err != nil || d <= 0 {
			a.add(p+".maxAge", "write a positive Go duration such as 720h", "%q is not a positive duration", s.MaxAge)
		}
	}
	if s.Operator && (s.Length != 0 || s.Alphabet != "" || s.MaxAge != "") {
		a.add(p+".operator", "drop length, alphabet and maxAge: an operator's value is delivered, never made or rotated by the vault",
			"an operator's value has no length, alphabet or maxAge")
	}
}

// at returns the reporter for one file.
func (l *loader) at(file string, fp map[string]Pos) at {
	return at{file: file, fp: fp, probs: &l.probs, refused: l.refused[file]}
}
