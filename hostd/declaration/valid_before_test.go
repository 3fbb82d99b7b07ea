package declaration

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// The regular expressions Validate used before its hand-written checks, and
// Validate as it was: the references the checks and messages must match.
var (
	digestImage = regexp.MustCompile(`^[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}$`)
	octalMode   = regexp.MustCompile(`^0[0-7]{3}$`)
	ownerForm   = regexp.MustCompile(`^[0-9]+:[0-9]+$`)
	hexSHA256   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	envName     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	sealedPath  = regexp.MustCompile(`^secrets/[A-Za-z0-9._-]+\.age$`)
	// containerName is what podman accepts as a container's name.
	containerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)
)

// validateBefore is Validate as it was, with regular expressions: the
// reference Validate must agree with, error for error and word for word.
func validateBefore(d *Declaration) error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if d.Format != Version {
		add("declaration format %d is not supported (this hostd reads format %d): upgrade hostd", d.Format, Version)
	}
	if d.Mesh == "" || d.Node == "" {
		add("declaration names no mesh or no node")
	}
	seen := map[string]Kind{}
	names := map[string]string{} // container name -> resource ID
	for i, r := range d.Resources {
		where := fmt.Sprintf("resource %d (%q)", i, r.ID)
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
			checkPathBefore(add, where, r.File.Path)
			checkModeOwnerBefore(add, where, r.File.Mode, r.File.Owner)
			if s := r.File.Secret; s != nil {
				if r.File.Content != "" {
					add("%s: a file has content or a secret, not both", where)
				}
				if !sealedPath.MatchString(s.Sealed) || !hexSHA256.MatchString(s.SHA256) || s.Name == "" {
					add("%s: secret reference needs a name, sealed path secrets/<id>.age and a sha256", where)
				}
				if s.EnvVar != "" && !envName.MatchString(s.EnvVar) {
					add("%s: envVar %q is not a valid variable name", where, s.EnvVar)
				}
			}
		case KindDirectory:
			if r.Directory == nil {
				add("%s: kind directory without a directory body", where)
				break
			}
			checkPathBefore(add, where, r.Directory.Path)
			checkModeOwnerBefore(add, where, r.Directory.Mode, r.Directory.Owner)
		case KindContainer:
			c := r.Container
			if c == nil {
				add("%s: kind container without a container body", where)
				break
			}
			switch other, dup := names[c.Name]; {
			case c.Name == "":
				add("%s: container has no name", where)
			case !containerName.MatchString(c.Name):
				add("%s: container name %q is not one podman accepts ([a-zA-Z0-9][a-zA-Z0-9_.-]*)", where, c.Name)
			case dup:
				add("%s: container name %q is also %q's", where, c.Name, other)
			default:
				names[c.Name] = r.ID
			}
			if !digestImage.MatchString(c.Image) {
				add("%s: image %q is not pinned by digest (want <repository>@sha256:<64 hex>)", where, c.Image)
			}
			for k := range c.Env {
				if !envName.MatchString(k) {
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
				checkPathBefore(add, where, m.Source)
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
				checkPathBefore(add, where, c.Answer)
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

func checkPathBefore(add func(string, ...any), where, p string) {
	if !path.IsAbs(p) || path.Clean(p) != p {
		add("%s: path %q is not absolute and clean", where, p)
	}
}

func checkModeOwnerBefore(add func(string, ...any), where, mode, owner string) {
	if !octalMode.MatchString(mode) {
		add("%s: mode %q is not an octal mode such as 0640", where, mode)
	}
	if owner != "" && !ownerForm.MatchString(owner) {
		add("%s: owner %q is not uid:gid", where, owner)
	}
}
