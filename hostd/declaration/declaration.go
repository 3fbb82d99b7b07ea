// Package declaration is the wire format between the reconciler and hostd: the
// ordered list of resources one node must hold, as committed to branch
// node/<name> in declaration.json.
//
// The host owns this vocabulary because the host decides what it will accept
// (DESIGN.md). It is finite — [KindFile], [KindDirectory], [KindContainer] —
// and every addition is a security decision (ADR 0052). A command to run as the
// host ("action") is not part of it and is refused by [Parse].
//
// Use [Marshal] to write the canonical bytes that are signed, [Parse] to read
// them back strictly, and [Declaration.Digests] for the per-resource digests
// that decide what changed (ADR 0018, 0052, 0099).
//
// This package imports only the standard library: every role imports it.
package declaration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// Version is the format version a declaration carries in its "format" field.
// hostd refuses a declaration of any other version.
const Version = 1

// Kind names one of the host's resource shapes.
type Kind string

// The host's finite vocabulary.
const (
	KindFile      Kind = "file"
	KindDirectory Kind = "directory"
	KindContainer Kind = "container"
)

// Declaration is everything one node must hold, in the order it must be applied.
type Declaration struct {
	// Format is [Version].
	Format int `json:"format"`
	// Mesh is the name of the mesh the declaration belongs to.
	Mesh string `json:"mesh"`
	// Node is the node this declaration is for; hostd refuses any other.
	Node string `json:"node"`
	// Generation rises by one each time the node's declaration changes; hostd
	// refuses one lower than the generation it last applied (replay).
	Generation uint64 `json:"generation"`
	// Source is the commit on main the declaration was rendered from.
	Source string `json:"source"`
	// Resources are applied in this order, never sorted (ADR 0052).
	Resources []Resource `json:"resources"`
}

// Resource is one thing the host holds. Exactly one of File, Directory and
// Container is set, matching Kind.
type Resource struct {
	// ID is unique within the declaration: "<module>/<resource name>".
	ID string `json:"id"`
	// Kind says which of File, Directory and Container is set.
	Kind Kind `json:"kind"`
	// Module is the assignment's module the resource belongs to.
	Module string `json:"module"`

	File      *File      `json:"file,omitempty"`
	Directory *Directory `json:"directory,omitempty"`
	Container *Container `json:"container,omitempty"`
}

// File is a regular file with inline content or a sealed secret.
type File struct {
	// Path is absolute and clean.
	Path string `json:"path"`
	// Mode is an octal permission string such as "0640".
	Mode string `json:"mode"`
	// Owner is "uid:gid" (numeric) or empty for the host's user.
	Owner string `json:"owner,omitempty"`
	// Content is the file's text. Empty when Secret is set.
	Content string `json:"content,omitempty"`
	// Secret, when set, names a sealed file under secrets/ whose plaintext
	// becomes the file's content. Its plaintext never appears here.
	Secret *SecretRef `json:"secret,omitempty"`
	// CreateOnce files are written when absent and otherwise kept as they
	// are, content, mode and owner (ADR 0087).
	CreateOnce bool `json:"createOnce,omitempty"`
}

// SecretRef points at one sealed secret delivered beside the declaration.
type SecretRef struct {
	// Name is the secret's name in the vault.
	Name string `json:"name"`
	// Version is the secret's version; a new version is a changed file.
	Version uint64 `json:"version"`
	// Sealed is the path of the age ciphertext on the branch, "secrets/<id>.age".
	Sealed string `json:"sealed"`
	// SHA256 is the hex sha256 of the ciphertext; hostd refuses a mismatch.
	SHA256 string `json:"sha256"`
	// EnvVar, when set, makes the file an env-file: "<EnvVar>=<plaintext>\n".
	EnvVar string `json:"envVar,omitempty"`
}

// Directory is a directory the host creates; it never deletes one.
type Directory struct {
	Path  string `json:"path"`
	Mode  string `json:"mode"`
	Owner string `json:"owner,omitempty"`
}

// Container is a digest-pinned container, long-running or run once (ADR 0052).
type Container struct {
	// Name is the container's name on the host, derived from the assignment.
	Name string `json:"name"`
	// Image is "<repository>@sha256:<hex>".
	Image   string   `json:"image"`
	Command []string `json:"command,omitempty"`
	// Env is plain environment; a secret never appears here (design 27).
	Env map[string]string `json:"env,omitempty"`
	// EnvFiles name file resources (by ID) passed with --env-file.
	EnvFiles []EnvFile `json:"envFiles,omitempty"`
	Mounts   []Mount   `json:"mounts,omitempty"`
	Ports    []Port    `json:"ports,omitempty"`
	// RunOnce containers run to completion and must exit 0; a failure gates
	// everything after them (ADR 0052).
	RunOnce bool `json:"runOnce,omitempty"`
	// RestartOn names earlier resources (by ID) whose change recreates the
	// container, or runs a step again (ADR 0099).
	RestartOn []string `json:"restartOn,omitempty"`
	// Answer, on a provider's step, is the path of a JSON object of contract
	// fields the step writes; hostd carries it back on status/<node>.
	Answer string `json:"answer,omitempty"`
}

// EnvFile is a file resource passed to a container with --env-file, with the
// reason a file mount would not do (design 27, ADR 0086).
type EnvFile struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
}

// Mount binds a host path into a container.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// Port publishes a container port on the host.
type Port struct {
	Host      int    `json:"host"`
	Container int    `json:"container"`
	Protocol  string `json:"protocol,omitempty"`
}

// Marshal returns the canonical bytes of d: indented JSON with struct fields in
// declaration order, map keys sorted and no HTML escaping, ending in a newline.
// The same declaration always gives the same bytes; these are what is signed.
func Marshal(d *Declaration) ([]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return canonical(d), nil
}

// Parse reads a declaration strictly: unknown fields, an unknown kind (an
// "action" among them) or trailing data are refused, and the result is
// validated with [Declaration.Validate].
func Parse(data []byte) (*Declaration, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var d Declaration
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("parse declaration: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("parse declaration: trailing data after the JSON object")
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

// Validate checks everything hostd relies on before it touches the machine:
// the format version, one body per resource matching its kind, unique IDs,
// absolute clean paths, digest-pinned images, and restartOn and envFiles that
// name earlier resources. It returns every problem at once, joined.
func (d *Declaration) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if d.Format != Version {
		add("declaration format %d is not supported (this hostd reads format %d): upgrade hostd", d.Format, Version)
	}
	if d.Mesh == "" || d.Node == "" {
		add("declaration names no mesh or no node")
	}
	seen := make(map[string]Kind, len(d.Resources))
	names := map[string]string{} // container name -> resource ID
	for i, r := range d.Resources {
		where := resourceAt{i, r.ID}
		if r.ID == "" {
			add("resource %d has no id", i)
		} else if _, dup := seen[r.ID]; dup {
			add("%s: id appears twice", where)
		}
		bodies := 0
		for _, set := range []bool{r.File != nil, r.Directory != nil, r.Container != nil} {
			if set {
				bodies++
			}
		}
		if bodies != 1 {
			add("%s: exactly one of file, directory and container must be set", where)
		}
		switch r.Kind {
		case KindFile:
			if r.File == nil {
				add("%s: kind file without a file body", where)
				break
			}
			checkPath(add, where, r.File.Path)
			checkModeOwner(add, where, r.File.Mode, r.File.Owner)
			if s := r.File.Secret; s != nil {
				if r.File.Content != "" {
					add("%s: a file has content or a secret, not both", where)
				}
				if !isSealedPath(s.Sealed) || !isHex64(s.SHA256) || s.Name == "" {
					add("%s: secret reference needs a name, sealed path secrets/<id>.age and a sha256", where)
				}
				if s.EnvVar != "" && !isEnvName(s.EnvVar) {
					add("%s: envVar %q is not a valid variable name", where, s.EnvVar)
				}
			}
		case KindDirectory:
			if r.Directory == nil {
				add("%s: kind directory without a directory body", where)
				break
			}
			checkPath(add, where, r.Directory.Path)
			checkModeOwner(add, where, r.Directory.Mode, r.Directory.Owner)
		case KindContainer:
			c := r.Container
			if c == nil {
				add("%s: kind container without a container body", where)
				break
			}
			switch other, dup := names[c.Name]; {
			case c.Name == "":
				add("%s: container has no name", where)
			case !isContainerName(c.Name):
				add("%s: container name %q is not one podman accepts ([a-zA-Z0-9][a-zA-Z0-9_.-]*)", where, c.Name)
			case dup:
				add("%s: container name %q is also %q's", where, c.Name, other)
			default:
				names[c.Name] = r.ID
			}
			if !isDigestImage(c.Image) {
				add("%s: image %q is not pinned by digest (want <repository>@sha256:<64 hex>)", where, c.Image)
			}
			for k := range c.Env {
				if !isEnvName(k) {
					add("%s: env name %q is not a valid variable name", where, k)
				}
			}
			for _, ef := range c.EnvFiles {
				if seen[ef.File] != KindFile {
					add("%s: envFile %q names no earlier file resource", where, ef.File)
				}
				if strings.TrimSpace(ef.Reason) == "" {
					add("%s: envFile %q has no reason (a secret reaches a process as a file unless a reason is given)", where, ef.File)
				}
			}
			for _, m := range c.Mounts {
				checkPath(add, where, m.Source)
				if !path.IsAbs(m.Target) {
					add("%s: mount target %q is not absolute", where, m.Target)
				}
			}
			for _, p := range c.Ports {
				if p.Host < 1 || p.Host > 65535 || p.Container < 1 || p.Container > 65535 {
					add("%s: port %d:%d is out of range", where, p.Host, p.Container)
				}
				if p.Protocol != "" && p.Protocol != "tcp" && p.Protocol != "udp" {
					add("%s: port protocol %q is not tcp or udp", where, p.Protocol)
				}
			}
			for _, id := range c.RestartOn {
				if _, ok := seen[id]; !ok {
					add("%s: restartOn %q names no earlier resource", where, id)
				}
			}
			if c.Answer != "" {
				checkPath(add, where, c.Answer)
			}
		default:
			add("%s: kind %q is not one hostd applies (file, directory, container)", where, r.Kind)
		}
		if r.ID != "" {
			seen[r.ID] = r.Kind
		}
	}
	return errors.Join(errs...)
}

func checkPath(add func(string, ...any), where resourceAt, p string) {
	if !path.IsAbs(p) || path.Clean(p) != p {
		add("%s: path %q is not absolute and clean", where, p)
	}
}

func checkModeOwner(add func(string, ...any), where resourceAt, mode, owner string) {
	if !isOctalMode(mode) {
		add("%s: mode %q is not an octal mode such as 0640", where, mode)
	}
	if owner != "" && !isOwner(owner) {
		add("%s: owner %q is not uid:gid", where, owner)
	}
}

// resourceAt names a resource in an error, "resource <index> (<quoted id>)",
// formatted only when there is an error to report.
type resourceAt struct {
	index int
	id    string
}

func (r resourceAt) String() string { return fmt.Sprintf("resource %d (%q)", r.index, r.id) }
