package reconciler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/hostd/declaration"
)

// SealedSecret is where vaultd put one secret's ciphertext for one node.
type SealedSecret struct {
	// Version is the secret's version in the vault.
	Version uint64
	// SHA256 is the hex sha256 of the ciphertext.
	SHA256 string
	// Path is the ciphertext's path on the node's branch, "secrets/<id>.age"
	// (see [SealedPath]).
	Path string
}

// SealedSecrets answers, for a secret and a node, where its ciphertext is.
// The reconcile loop fills it from what vaultd sealed; `plan`, which has no
// vault, uses [Unsealed]. [Render] calls Sealed from several goroutines at
// once.
type SealedSecrets interface {
	Sealed(name, node string) (SealedSecret, bool)
}

// SealedMap is a SealedSecrets held in memory, keyed by [SealedKey].
type SealedMap map[string]SealedSecret

// SealedKey is the key of a secret sealed to a node in a [SealedMap].
func SealedKey(name, node string) string { return name + "\x00" + node }

// Sealed implements [SealedSecrets].
func (m SealedMap) Sealed(name, node string) (SealedSecret, bool) {
	s, ok := m[SealedKey(name, node)]
	return s, ok
}

// Unsealed stands in for the vault where there is none (`meshgen plan`):
// every secret is at version 0, at its [SealedPath], with a stand-in hash
// derived from its name and node. It renders deterministically and says
// nothing about any value.
type Unsealed struct{}

// Sealed implements [SealedSecrets].
func (Unsealed) Sealed(name, node string) (SealedSecret, bool) {
	sum := sha256.Sum256([]byte("meshgen unsealed stand-in\x00" + name + "\x00" + node))
	return SealedSecret{Version: 0, SHA256: hex.EncodeToString(sum[:]), Path: SealedPath(name)}, true
}

// SealedPath is the path of secret name's ciphertext on a node's branch:
// "secrets/<id>.age", where id is the name written in the characters a path
// on the branch allows, followed by a hash of the name so two names never
// share a file.
func SealedPath(name string) string {
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
	return "secrets/" + string(b) + "-" + hex.EncodeToString(sum[:])[:hashLen] + ".age"
}

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
	parallel(len(nodes), func(i int) {
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

// consumers writes the per-consumer files a provider applies.
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
		ID: r.id("mesh.consumers"), Kind: declaration.KindDirectory, Module: r.a.Module,
		Directory: &declaration.Directory{Path: r.consumersDir, Mode: "0700"},
	})
	for _, s := range serves {
		base := s.Identity.Login + "." + s.Requirement
		info := consumerInfo{Consumer: s.Consumer, Requirement: s.Requirement, Contract: s.Contract,
			Name: s.Identity.Name, Login: s.Identity.Login, SecretFile: base + "." + s.SecretField}
		content, err := info.json()
		if err != nil {
			return fmt.Errorf("consumer %s: %w", s.Consumer, err)
		}
		id := r.id("mesh.consumer." + base + ".json")
		r.out = append(r.out, declaration.Resource{
			ID: id, Kind: declaration.KindFile, Module: r.a.Module,
			File: &declaration.File{Path: path.Join(r.consumersDir, base+".json"), Mode: "0600", Content: content},
		})
		r.consumerFiles = append(r.consumerFiles, id)
		ref, err := r.secretRef(s.Secret, "")
		if err != nil {
			return err
		}
		id = r.id("mesh.consumer." + info.SecretFile)
		r.out = append(r.out, declaration.Resource{
			ID: id, Kind: declaration.KindFile, Module: r.a.Module,
			File: &declaration.File{Path: path.Join(r.consumersDir, info.SecretFile), Mode: "0600", Secret: ref},
		})
		r.consumerFiles = append(r.consumerFiles, id)
	}
	return nil
}

// consumerInfo is the non-secret part of what a provider is told about one
// consumer: who it is, and which file holds its secret.
type consumerInfo struct {
	Consumer    string `json:"consumer"`
	Requirement string `json:"requirement"`
	Contract    string `json:"contract"`
	Name        string `json:"name"`
	Login       string `json:"login"`
	SecretFile  string `json:"secretFile"`
}

// json writes the consumer's file: indented JSON, ending in a newline. Its
// strings are names (of assignments, requirements, contracts, identities),
// written directly; anything else goes through encoding/json.
func (c consumerInfo) json() (string, error) {
	fields := [][2]string{{"consumer", c.Consumer}, {"requirement", c.Requirement}, {"contract", c.Contract},
		{"name", c.Name}, {"login", c.Login}, {"secretFile", c.SecretFile}}
	var b strings.Builder
	b.WriteString("{\n")
	for i, f := range fields {
		if !plainJSON(f[1]) {
			data, err := json.MarshalIndent(c, "", "  ")
			return string(data) + "\n", err
		}
		b.WriteString(`  "` + f[0] + `": "` + f[1] + `"`)
		if i < len(fields)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	return b.String(), nil
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

func (r *renderer) secretRef(name, envVar string) (*declaration.SecretRef, error) {
	s, ok := r.sealed.Sealed(name, r.a.Node)
	if !ok {
		return nil, fmt.Errorf("secret %q is not sealed to node %q: ask the vault to seal it before rendering", name, r.a.Node)
	}
	return &declaration.SecretRef{Name: name, Version: s.Version, Sealed: s.Path, SHA256: s.SHA256, EnvVar: envVar}, nil
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
		return v.Text, nil
	})
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
	if f.Secret, err = r.secretRef(v.Secret, src.EnvVar); err != nil {
		return nil, err
	}
	f.Mode = mode(src.Mode, "0600")
	if r.readsAtStart(refs[0].Requirement) {
		r.secretFiles = append(r.secretFiles, secretFile{path: p, id: r.id(src.Name())})
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
		id := r.id(x)
		if !seen[id] {
			seen[id] = true
			c.RestartOn = append(c.RestartOn, id)
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
