package reconciler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/meshgen/meshgen/internal/workers"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/hostd/declaration"
)

// SealedSecret is where vaultd put one sealed form of one secret version
// for one node.
type SealedSecret struct {
	// Version is the secret's version in the vault.
	Version uint64
	// SHA256 is the hex sha256 of the ciphertext.
	SHA256 string
	// Path is the ciphertext's path on the node's branch (see [SealedPath]
	// and [DerivedPath]).
	Path string
}

// Credential is one value of a secret a node holds.
type Credential struct {
	SealedSecret
	// Slot is the two-party credential slot ("a" or "b") the value belongs
	// to, or "" for a one-party secret. It names the login the value is
	// the password of (see [SlotLogin]).
	Slot string
	// Derived is the value's derived form (a hash the provider stores
	// instead of the value, asked for by the secret's format), sealed to
	// an applier beside the value; nil when there is none.
	Derived *SealedSecret
}

// Held is what one node holds of one secret in one role now (design 27,
// "Rotation"; ADR 0114).
type Held struct {
	// Current is the value in use: the one a reader reads, and the one an
	// applier's backend accepts now.
	Current Credential
	// Next is, for an applier during a rotation, the new value it ensures
	// beside Current before readers are given it; nil otherwise.
	Next *Credential
	// Retire is, for an applier of a two-party secret, the slot whose
	// credential it disables now (the old one once every reader moved, or
	// an abandoned new one), "" when there is none. Retiring a credential
	// never removes what it reached.
	Retire string
}

// SealedSecrets answers, for a secret, a node and the role the node takes
// it in, what the node holds. The reconcile loop fills it from what vaultd
// sealed; `plan`, which has no vault, uses [Unsealed]. [Render] calls Sealed
// from several goroutines at once.
type SealedSecrets interface {
	Sealed(name, node string, role Role) (Held, bool)
}

// SealedMap is a SealedSecrets held in memory, keyed by [SealedKey].
type SealedMap map[string]Held

// SealedKey is the key of what node holds of a secret in role, in a
// [SealedMap].
func SealedKey(name, node string, role Role) string {
	return name + "\x00" + node + "\x00" + string(role)
}

// Sealed implements [SealedSecrets].
func (m SealedMap) Sealed(name, node string, role Role) (Held, bool) {
	s, ok := m[SealedKey(name, node, role)]
	return s, ok
}

// Unsealed stands in for the vault where there is none (`meshgen plan`):
// every secret is at version 0, in slot "" with no rotation, at its
// [SealedPath], with a stand-in hash derived from its name and node. It
// renders deterministically and says nothing about any value.
type Unsealed struct{}

// Sealed implements [SealedSecrets].
func (Unsealed) Sealed(name, node string, _ Role) (Held, bool) {
	sum := sha256.Sum256([]byte("meshgen unsealed stand-in\x00" + name + "\x00" + node))
	return Held{Current: Credential{SealedSecret: SealedSecret{Version: 0, SHA256: hex.EncodeToString(sum[:]), Path: SealedPath(name, 0)}}}, true
}

// SealedPath is the path of the ciphertext of version of secret name on a
// node's branch: "secrets/<id>.<version>.age", where id is the name written
// in the characters a path on the branch allows, followed by a hash of the
// name so two names never share a file. A node holding two versions at
// once (an applier during a rotation) holds two files.
func SealedPath(name string, version uint64) string {
	return "secrets/" + sealedID(name) + "." + strconv.FormatUint(version, 10) + ".age"
}

// DerivedPath is the path of the ciphertext of the derived form of version
// of secret name: "secrets/<id>.<version>.derived.age".
func DerivedPath(name string, version uint64) string {
	return "secrets/" + sealedID(name) + "." + strconv.FormatUint(version, 10) + ".derived.age"
}

func sealedID(name string) string {
	b := make([]byte, 0, len(name)+16)
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' {
			b = append(b, c)
		} else {
			b = append(b, '_')
		}
	}
	sum := sha256.Sum256([]byte(name))
	return string(b) + "-" + hex.EncodeToString(sum[:])[:hashLen]
}

// Delivered is what a rendered declaration delivers of each secret, by
// name: the versions the node's assignments read, and every version it
// holds in any role. The reconcile loop reads it from the declaration a
// node applied to confirm rotation steps.
type Delivered struct {
	reads, holds map[string][]uint64
}

// DeliveredBy returns what d delivers. A file the mesh adds beside an
// assignment's own resources (its ID's resource part begins "mesh.": a
// provider's per-consumer files, a staged next value) is held by an
// applier; any other secret file is what an assignment reads, or applies
// in place.
func DeliveredBy(d *declaration.Declaration) *Delivered {
	h := &Delivered{reads: map[string][]uint64{}, holds: map[string][]uint64{}}
	for _, res := range d.Resources {
		if res.File == nil || res.File.Secret == nil {
			continue
		}
		s := res.File.Secret
		h.holds[s.Name] = append(h.holds[s.Name], s.Version)
		if _, name, _ := strings.Cut(res.ID, "/"); !strings.HasPrefix(name, meshPrefix) {
			h.reads[s.Name] = append(h.reads[s.Name], s.Version)
		}
	}
	return h
}

// Reads reports whether an assignment reads version of secret.
func (h *Delivered) Reads(secret string, version uint64) bool {
	return slices.Contains(h.reads[secret], version)
}

// Holds reports whether the node holds version of secret in any role.
func (h *Delivered) Holds(secret string, version uint64) bool {
	return slices.Contains(h.holds[secret], version)
}

// meshPrefix begins the name of every resource the mesh adds to an
// assignment's own; a definition's names cannot hold a '.'.
const meshPrefix = "mesh."

// ContainerName is the name of an assignment's container on its node:
// "mesh-<module>.<resource>". Module and resource names hold no '.', so two
// containers never share a name.
func ContainerName(module, resource string) string {
	return "mesh-" + module + "." + resource
}

// ConsumersMount is where a provider's run-once steps see the per-consumer
// files the mesh writes for them (design 27: "what the mesh writes for the
// module is the mesh's plumbing, placed where the mesh chooses and mounted
// in").
const ConsumersMount = "/run/meshgen/consumers"

// ErrRefused is returned by [Render] for a resolution that was refused.
var ErrRefused = errors.New("the resolution was refused: nothing may be rendered from it")

// Render returns one declaration per node of res: each assignment's
// resources in author order, assignments in res's order, every
// ${{ requirement.field }} filled, and every secret a [declaration.SecretRef]
// to the ciphertext sealed names, never a value.
//
// For a provider serving consumers a per-consumer secret, the mesh first writes, under
// <root>/<module>/.mesh/consumers, one JSON file per served requirement
// (the consumer's identity) and its per-consumer secret, mounts that
// directory read-only at [ConsumersMount] into the provider's run-once steps
// and names the files under their restartOn: a new consumer or a rotated
// secret runs the provisioner again, and restarts nothing else.
//
// A reader's restart is derived: a container that mounts a directory holding
// a secret file the assignment reads at start names that file under
// restartOn. A resource that reads a requirement still waiting for its
// provider is left out, with every resource that names it
// ([Resolved.Skipped]).
//
// Generation and Source are left for the caller ([Stamp]). The same res and
// sealed give the same declarations, and so the same bytes.
func Render(res *Resolution, sealed SealedSecrets) (map[string]*declaration.Declaration, error) {
	return renderNodes(res, sealed, res.Nodes)
}

// renderNodes renders the declarations of nodes (a subset of res.Nodes).
func renderNodes(res *Resolution, sealed SealedSecrets, nodes []string) (map[string]*declaration.Declaration, error) {
	if res.refused {
		return nil, ErrRefused
	}
	out := make(map[string]*declaration.Declaration, len(nodes))
	for _, n := range nodes {
		out[n] = &declaration.Declaration{Format: declaration.Version, Mesh: res.Mesh, Node: n, Resources: []declaration.Resource{}}
	}
	byNode := res.byNode()
	// Nodes are independent: render them on every core. Each node's
	// declaration and error depend only on its own assignments, so the
	// result does not depend on the schedule.
	errs := make([]error, len(nodes))
	workers.Each(len(nodes), 0, func(i int) {
		n := nodes[i]
		errs[i] = renderNode(out[n], byNode[n], sealed)
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// byNode returns each node's assignments, in order.
func (res *Resolution) byNode() map[string][]*Resolved {
	m := make(map[string][]*Resolved, len(res.Nodes))
	for _, a := range res.Assignments {
		m[a.Node] = append(m[a.Node], a)
	}
	return m
}

// renderNode appends the resources of a node's assignments to d, in their
// order, and checks the result as hostd will.
func renderNode(d *declaration.Declaration, as []*Resolved, sealed SealedSecrets) error {
	var errs []error
	for _, a := range as {
		rs, err := renderAssignment(a, sealed)
		if err != nil {
			errs = append(errs, fmt.Errorf("render %s: %w", a.ID, err))
			continue
		}
		d.Resources = append(d.Resources, rs...)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := checkContainerNames(d); err != nil {
		return err
	}
	if err := d.Validate(); err != nil {
		return fmt.Errorf("render node %q: %w", d.Node, err)
	}
	return nil
}

// Stamp sets what the loop decides on a rendered declaration: its generation
// and the commit on main it was rendered from.
func Stamp(d *declaration.Declaration, generation uint64, source string) {
	d.Generation = generation
	d.Source = source
}

func checkContainerNames(d *declaration.Declaration) error {
	seen := map[string]string{}
	for _, r := range d.Resources {
		if r.Container == nil {
			continue
		}
		if other, dup := seen[r.Container.Name]; dup {
			return fmt.Errorf("render node %q: containers %s and %s are both named %q", d.Node, other, r.ID, r.Container.Name)
		}
		seen[r.Container.Name] = r.ID
	}
	return nil
}

// renderer renders one assignment.
type renderer struct {
	a      *Resolved
	sealed SealedSecrets
	out    []declaration.Resource
	// secretFiles are the assignment's secret files a reader reads at start,
	// in author order.
	secretFiles []secretFile
	// consumerFiles are the per-consumer files' IDs, for the provider's steps.
	consumerFiles []string
	consumersDir  string
	// staged is the file holding the next value of an applied secret the
	// file just rendered holds, during a rotation; next maps that file's
	// ID to the staged file's, so a step restarted by one is by both.
	staged *declaration.Resource
	next   map[string]string
}

// secretFile is a secret file resource and where it is on the host.
type secretFile struct{ path, id string }

func renderAssignment(a *Resolved, sealed SealedSecrets) ([]declaration.Resource, error) {
	r := &renderer{a: a, sealed: sealed, out: make([]declaration.Resource, 0, len(a.Definition.Resources))}
	if err := r.consumers(); err != nil {
		return nil, err
	}
	var skipped map[string]bool
	if len(a.Skipped) > 0 {
		skipped = map[string]bool{}
		for _, s := range a.Skipped {
			skipped[s] = true
		}
	}
	var errs []error
	for i := range a.Definition.Resources {
		src := &a.Definition.Resources[i]
		if skipped[src.Name()] {
			continue
		}
		if err := r.resource(src); err != nil {
			errs = append(errs, fmt.Errorf("resource %q: %w", src.Name(), err))
		}
	}
	return r.out, errors.Join(errs...)
}

func (r *renderer) id(name string) string { return r.a.Module + "/" + name }

// consumers writes the per-consumer files a provider applies: for each
// consumer its JSON file, and a file for each value of its secret the
// provider holds now, with the value's derived form beside it when the
// secret has one.
func (r *renderer) consumers() error {
	var serves []Served
	for _, s := range r.a.Serves {
		if s.Secret != "" {
			serves = append(serves, s)
		}
	}
	if len(serves) == 0 {
		return nil
	}
	r.consumersDir = path.Join(r.a.Root, r.a.Module, ".mesh", "consumers")
	r.out = append(r.out, declaration.Resource{
		ID: r.id(meshPrefix + "consumers"), Kind: declaration.KindDirectory, Module: r.a.Module,
		Directory: &declaration.Directory{Path: r.consumersDir, Mode: "0700"},
	})
	for _, s := range serves {
		held, ok := r.sealed.Sealed(s.Secret, r.a.Node, Applier)
		if !ok {
			return notSealed(s.Secret, r.a.Node)
		}
		base := s.Identity.Login + "." + s.Requirement
		info := consumerInfo{Consumer: s.Consumer, Requirement: s.Requirement, Contract: s.Contract,
			Name: s.Identity.Name, Login: s.Identity.Login}
		var files []declaration.Resource
		for _, c := range providerHolds(held, s.TwoParty) {
			login := SlotLogin(s.Identity.Login, c.Slot)
			cred := credentialInfo{Login: login, SecretFile: login + "." + s.Requirement + "." + s.SecretField}
			files = append(files, r.consumerSecret(s.Secret, cred.SecretFile, c.SealedSecret))
			if c.Derived != nil && s.Format != "" {
				cred.DerivedFile = cred.SecretFile + "." + s.Format
				files = append(files, r.consumerSecret(s.Secret, cred.DerivedFile, *c.Derived))
			}
			info.Credentials = append(info.Credentials, cred)
		}
		if held.Retire != "" && s.TwoParty {
			retire := SlotLogin(s.Identity.Login, held.Retire)
			for _, c := range info.Credentials {
				if c.Login == retire {
					return fmt.Errorf("consumer %s: secret %q would retire login %s while it is in use: vaultd's rotation state is inconsistent; see `meshgen vault status`", s.Consumer, s.Secret, retire)
				}
			}
			info.Retire = append(info.Retire, retire)
		}
		id := r.id(meshPrefix + "consumer." + base + ".json")
		r.out = append(r.out, declaration.Resource{
			ID: id, Kind: declaration.KindFile, Module: r.a.Module,
			File: &declaration.File{Path: path.Join(r.consumersDir, base+".json"), Mode: "0600", Content: info.json()},
		})
		r.consumerFiles = append(r.consumerFiles, id)
		for _, f := range files {
			r.out = append(r.out, f)
			r.consumerFiles = append(r.consumerFiles, f.ID)
		}
	}
	return nil
}

// providerHolds returns the values of a per-consumer secret the provider
// ensures now. Over two credentials (two-party), every live one: the one in
// use and, during a rotation, the new one in the other slot, each the
// password of its own login. In place (one-party), the newest: the provider
// sets the consumer's one login to it, and readers follow once it confirmed.
func providerHolds(h Held, twoParty bool) []Credential {
	switch {
	case h.Next == nil:
		return []Credential{h.Current}
	case twoParty:
		return []Credential{h.Current, *h.Next}
	default:
		return []Credential{*h.Next}
	}
}

// consumerSecret is the file resource holding one sealed form of a
// consumer's secret in the provider's consumers directory.
func (r *renderer) consumerSecret(name, file string, s SealedSecret) declaration.Resource {
	return declaration.Resource{
		ID: r.id(meshPrefix + "consumer." + file), Kind: declaration.KindFile, Module: r.a.Module,
		File: &declaration.File{Path: path.Join(r.consumersDir, file), Mode: "0600", Secret: secretRef(name, s, "")},
	}
}

// consumerInfo is the non-secret part of what a provider is told about one
// consumer: who it is, every credential it ensures for the consumer now,
// and the credentials it disables.
//
// Login names the consumer's resource (a database, a topic tree); it never
// changes. Each credential is a login with the consumer's rights over that
// resource and the file holding its password: one, and during a two-party
// rotation two (design 27, "Rotation"). Retire lists the logins whose
// credential the provider disables now; retiring never removes the
// resource.
type consumerInfo struct {
	Consumer    string
	Requirement string
	Contract    string
	Name        string
	Login       string
	Credentials []credentialInfo
	Retire      []string
}

// credentialInfo is one credential a provider ensures for a consumer.
type credentialInfo struct {
	Login      string
	SecretFile string
	// DerivedFile holds the password's derived form, when the secret has
	// one.
	DerivedFile string
}

// json writes the consumer's file: indented JSON with one credential and
// one retired login a line, so a provisioner's shell reads it line by line:
//
//	{
//	  "consumer": "gitea@n2",
//	  ...
//	  "login": "gitea__n2",
//	  "credentials": [
//	    {"login": "gitea__n2", "secretFile": "gitea__n2.db.password"}
//	  ],
//	  "retire": [
//	    {"login": "gitea__n2__b"}
//	  ]
//	}
//
// Its strings are names (of assignments, requirements, contracts,
// identities, files), which resolution makes of plain characters; any other
// character is escaped by encoding/json.
func (c consumerInfo) json() string {
	var b strings.Builder
	b.WriteString("{\n")
	for _, f := range [][2]string{{"consumer", c.Consumer}, {"requirement", c.Requirement}, {"contract", c.Contract},
		{"name", c.Name}, {"login", c.Login}} {
		b.WriteString("  " + jsonString(f[0]) + ": " + jsonString(f[1]) + ",\n")
	}
	b.WriteString(`  "credentials": [`)
	for i, cr := range c.Credentials {
		b.WriteString(sep(i) + `    {"login": ` + jsonString(cr.Login) + `, "secretFile": ` + jsonString(cr.SecretFile))
		if cr.DerivedFile != "" {
			b.WriteString(`, "derivedFile": ` + jsonString(cr.DerivedFile))
		}
		b.WriteString("}")
	}
	b.WriteString(closer(len(c.Credentials)) + ",\n")
	b.WriteString(`  "retire": [`)
	for i, login := range c.Retire {
		b.WriteString(sep(i) + `    {"login": ` + jsonString(login) + "}")
	}
	b.WriteString(closer(len(c.Retire)) + "\n}\n")
	return b.String()
}

// sep is what comes before the i-th element of an array written one
// element a line.
func sep(i int) string {
	if i == 0 {
		return "\n"
	}
	return ",\n"
}

// closer ends an array of n elements written one element a line.
func closer(n int) string {
	if n == 0 {
		return "]"
	}
	return "\n  ]"
}

// jsonString writes s as a JSON string.
func jsonString(s string) string {
	if plainJSON(s) {
		return `"` + s + `"`
	}
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

// plainJSON reports whether s is written in JSON as it is, between quotes.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// secretRef refers a file to one sealed form of secret name.
func secretRef(name string, s SealedSecret, envVar string) *declaration.SecretRef {
	return &declaration.SecretRef{Name: name, Version: s.Version, Sealed: s.Path, SHA256: s.SHA256, EnvVar: envVar}
}

func notSealed(name, node string) error {
	return fmt.Errorf("secret %q is not sealed to node %q: ask the vault to seal it before rendering", name, node)
}

// text fills a value that must not carry a secret.
func (r *renderer) text(s string) (string, error) {
	if !strings.Contains(s, "${{") {
		return s, nil
	}
	return schema.Expand(s, func(ref schema.Ref) (string, error) {
		v, ok := r.a.Values[ref]
		if !ok {
			return "", fmt.Errorf("no resolved value (is %q a requirement of %q?)", ref.Requirement, r.a.Module)
		}
		if v.Secret != "" {
			return "", errors.New("a secret field reaches a process only as a file")
		}
		if v.Credential != "" {
			return r.login(v)
		}
		return v.Text, nil
	})
}

// login is a consumer's login for the credential it reads now: during a
// two-party rotation, once readers moved, the second login.
func (r *renderer) login(v Value) (string, error) {
	h, ok := r.sealed.Sealed(v.Credential, r.a.Node, Reader)
	if !ok {
		if h, ok = r.sealed.Sealed(v.Credential, r.a.Node, Applier); !ok {
			return "", notSealed(v.Credential, r.a.Node)
		}
	}
	return SlotLogin(v.Text, h.Current.Slot), nil
}

func (r *renderer) absPath(s string) (string, error) {
	p, err := r.text(s)
	if err != nil {
		return "", err
	}
	if !path.IsAbs(p) {
		return "", fmt.Errorf("path %q is not absolute: start it with a host-directory requirement such as ${{ data.path }}", p)
	}
	return path.Clean(p), nil
}

func (r *renderer) resource(src *schema.Resource) error {
	name := src.Name()
	out := declaration.Resource{ID: r.id(name), Module: r.a.Module}
	switch {
	case src.File != "":
		f, err := r.file(src)
		if err != nil {
			return err
		}
		out.Kind, out.File = declaration.KindFile, f
	case src.Directory != "":
		p, err := r.absPath(src.Path)
		if err != nil {
			return err
		}
		owner, err := r.text(src.Owner)
		if err != nil {
			return err
		}
		out.Kind = declaration.KindDirectory
		out.Directory = &declaration.Directory{Path: p, Mode: mode(src.Mode, "0755"), Owner: owner}
	default:
		c, err := r.container(src)
		if err != nil {
			return err
		}
		out.Kind, out.Container = declaration.KindContainer, c
	}
	r.out = append(r.out, out)
	if r.staged != nil {
		r.out = append(r.out, *r.staged)
		if r.next == nil {
			r.next = map[string]string{}
		}
		r.next[out.ID], r.staged = r.staged.ID, nil
	}
	return nil
}

func (r *renderer) file(src *schema.Resource) (*declaration.File, error) {
	p, err := r.absPath(src.Path)
	if err != nil {
		return nil, err
	}
	owner, err := r.text(src.Owner)
	if err != nil {
		return nil, err
	}
	f := &declaration.File{Path: p, Owner: owner, CreateOnce: src.CreateOnce}
	if src.Secret == "" {
		if f.Content, err = r.text(src.Content); err != nil {
			return nil, err
		}
		f.Mode = mode(src.Mode, "0644")
		return f, nil
	}
	refs, err := schema.Refs(src.Secret)
	if err != nil {
		return nil, err
	}
	if len(refs) != 1 || !isOnlyRef(src.Secret) {
		return nil, fmt.Errorf("secret %q must be one ${{ requirement.field }} naming a secret field", src.Secret)
	}
	v := r.a.Values[refs[0]]
	if v.Secret == "" {
		return nil, fmt.Errorf("secret %s names a field that is not secret", refs[0])
	}
	role := Reader
	if !r.readsAtStart(refs[0].Requirement) {
		role = Applier
	}
	held, ok := r.sealed.Sealed(v.Secret, r.a.Node, role)
	if !ok {
		return nil, notSealed(v.Secret, r.a.Node)
	}
	f.Secret = secretRef(v.Secret, held.Current.SealedSecret, src.EnvVar)
	f.Mode = mode(src.Mode, "0600")
	if role == Reader {
		r.secretFiles = append(r.secretFiles, secretFile{path: p, id: r.id(src.Name())})
	}
	if held.Next != nil {
		// One party, in place, staged (design 27, "Rotation"): the new
		// value is delivered beside the one in use, and the provisioner
		// changes the backend with the one in use; the new one becomes
		// the file's value once it confirmed.
		next := *f
		next.Path, next.CreateOnce = p+".next", false
		next.Secret = secretRef(v.Secret, held.Next.SealedSecret, src.EnvVar)
		r.staged = &declaration.Resource{ID: r.id(meshPrefix + "next." + src.Name()), Kind: declaration.KindFile, Module: r.a.Module, File: &next}
	}
	return f, nil
}

// isOnlyRef reports whether s is nothing but one reference, spaced any way.
func isOnlyRef(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "${{") && strings.HasSuffix(s, "}}") && strings.Count(s, "${{") == 1
}

// readsAtStart reports whether the assignment takes a new value of req's
// secret by being recreated (the default), rather than applying it.
func (r *renderer) readsAtStart(req string) bool {
	for i := range r.a.Definition.Requires {
		if q := &r.a.Definition.Requires[i]; q.Name == req {
			return q.Restart != "applied"
		}
	}
	return true
}

func (r *renderer) container(src *schema.Resource) (*declaration.Container, error) {
	c := &declaration.Container{Name: ContainerName(r.a.Module, src.Container), Image: src.Image, RunOnce: src.RunOnce}
	var err error
	for _, arg := range src.Command {
		v, err := r.text(arg)
		if err != nil {
			return nil, fmt.Errorf("command: %w", err)
		}
		c.Command = append(c.Command, v)
	}
	if len(src.Env) > 0 {
		c.Env = make(map[string]string, len(src.Env))
		for k, v := range src.Env {
			if c.Env[k], err = r.text(v); err != nil {
				return nil, fmt.Errorf("env %s: %w", k, err)
			}
		}
	}
	for _, ef := range src.EnvFiles {
		c.EnvFiles = append(c.EnvFiles, declaration.EnvFile{File: r.id(ef.File), Reason: ef.Reason})
	}
	for _, m := range src.Mounts {
		s, err := r.absPath(m.Source)
		if err != nil {
			return nil, fmt.Errorf("mount source: %w", err)
		}
		t, err := r.text(m.Target)
		if err != nil {
			return nil, fmt.Errorf("mount target: %w", err)
		}
		c.Mounts = append(c.Mounts, declaration.Mount{Source: s, Target: t, ReadOnly: m.ReadOnly})
	}
	for _, p := range src.Ports {
		h, err := r.text(p.Host)
		if err != nil {
			return nil, fmt.Errorf("port: %w", err)
		}
		n, err := strconv.Atoi(h)
		if err != nil {
			return nil, fmt.Errorf("port %q is not a number", h)
		}
		c.Ports = append(c.Ports, declaration.Port{Host: n, Container: p.Container, Protocol: p.Protocol})
	}
	seen := map[string]bool{}
	for _, x := range src.RestartOn {
		for _, id := range []string{r.id(x), r.next[r.id(x)]} {
			if id != "" && !seen[id] {
				seen[id] = true
				c.RestartOn = append(c.RestartOn, id)
			}
		}
	}
	// Derived restarts (design 27, "Rotation"): a secret file read at start
	// inside a directory this container mounts recreates it.
	for _, m := range c.Mounts {
		for _, f := range r.secretFiles {
			if strings.HasPrefix(f.path, m.Source+"/") && !seen[f.id] {
				seen[f.id] = true
				c.RestartOn = append(c.RestartOn, f.id)
			}
		}
	}
	if src.RunOnce && r.consumersDir != "" {
		c.Mounts = append(c.Mounts, declaration.Mount{Source: r.consumersDir, Target: ConsumersMount, ReadOnly: true})
		for _, id := range r.consumerFiles {
			if !seen[id] {
				seen[id] = true
				c.RestartOn = append(c.RestartOn, id)
			}
		}
	}
	if src.Answer != "" {
		a, err := r.text(src.Answer)
		if err != nil {
			return nil, fmt.Errorf("answer: %w", err)
		}
		c.Answer = hostPath(a, c.Mounts)
	}
	return c, nil
}

// hostPath turns a path inside the container into the host path a mount
// puts it at; a path under no mount target is returned as it is.
func hostPath(p string, mounts []declaration.Mount) string {
	p = path.Clean(p)
	best := -1
	for i, m := range mounts {
		t := path.Clean(m.Target)
		if (p == t || strings.HasPrefix(p, t+"/")) && (best < 0 || len(t) > len(path.Clean(mounts[best].Target))) {
			best = i
		}
	}
	if best < 0 {
		return p
	}
	return path.Join(mounts[best].Source, strings.TrimPrefix(p, path.Clean(mounts[best].Target)))
}

// mode returns a definition's mode as hostd takes it, four octal digits
// ("644" is written "0644"), or def when the definition gives none.
func mode(s, def string) string {
	switch {
	case s == "":
		return def
	case len(s) == 3:
		return "0" + s
	}
	return s
}
