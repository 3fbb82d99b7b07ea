package schema

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// digestRE matches an image reference pinned by digest:
// name[:tag]@sha256:<64 hex>.
var digestRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}$`)

// resourceKeys are the YAML keys each kind of resource takes.
var resourceKeys = map[string][]string{
	"file":      {"file", "path", "mode", "owner", "content", "secret", "envVar", "createOnce"},
	"directory": {"directory", "path", "mode", "owner"},
	"container": {"container", "image", "command", "env", "envFiles", "mounts", "ports", "runOnce", "restartOn", "answer"},
}

// allResourceKeys lists every resource key in declaration order.
var allResourceKeys = func() []string {
	var keys []string
	for _, f := range yamlFields(reflectResource) {
		keys = append(keys, f.name)
	}
	return keys
}()

// resource checks resources[i].
func (c *moduleCheck) resource(i int) {
	r := &c.m.Resources[i]
	p := fmt.Sprintf("$.resources[%d]", i)
	var kinds []string
	for _, k := range []string{"file", "directory", "container"} {
		if c.has(p + "." + k) {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) != 1 {
		hint := "start the resource with `file: <name>`, `directory: <name>` or `container: <name>`"
		if len(kinds) == 0 {
			c.add(p, hint, "a resource names exactly one of file, directory or container, and this one names none")
		} else {
			c.add(p, "split it into one resource per kind", "a resource names exactly one of file, directory or container, not %s", strings.Join(kinds, " and "))
		}
		return
	}
	kind := kinds[0]
	name := r.Name()
	if c.checkName(p+"."+kind, "the "+kind+"'s name", name) {
		for j := 0; j < i; j++ {
			if c.m.Resources[j].Name() == name {
				c.add(p+"."+kind, "give each resource its own name", "resource %q is declared twice", name)
				break
			}
		}
	}
	for _, k := range allResourceKeys {
		if c.has(p+"."+k) && !slices.Contains(resourceKeys[kind], k) {
			c.add(p+"."+k, "remove it: a "+kind+" takes "+strings.Join(resourceKeys[kind][1:], ", "), "%s does not apply to a %s", k, kind)
		}
	}
	if r.Mode != "" && !modeRE.MatchString(r.Mode) {
		c.add(p+".mode", "write an octal mode in quotes, such as \"0644\"", "%q is not a file mode", r.Mode)
	}
	switch kind {
	case "file":
		c.hostPath(p+".path", r.Path, "file")
		switch {
		case r.Content != "" && r.Secret != "":
			c.add(p+".secret", "a file holds either content or one secret: split it into two files", "a file cannot have both content and secret")
		case r.Secret != "":
			c.secretFile(p+".secret", r.Secret)
		}
		if r.Content != "" {
			c.refs(p+".content", r.Content, refPlain)
		}
		if r.EnvVar != "" && !envNameRE.MatchString(r.EnvVar) {
			c.add(p+".envVar", "write an environment variable name such as DB_PASSWORD", "%q is not an environment variable name", r.EnvVar)
		}
		if r.EnvVar != "" && r.Secret == "" {
			c.add(p+".envVar", "envVar names the variable a secret file holds when passed as an env-file: add `secret:`, or remove envVar", "envVar applies only to a file with a secret")
		}
	case "directory":
		c.hostPath(p+".path", r.Path, "directory")
	case "container":
		c.container(i, p, r)
	}
}

// soleRef returns the placeholder s consists of, if s is exactly one.
func soleRef(s string) (Ref, bool) {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, openMark) || !strings.HasSuffix(t, closeMark) || strings.Count(t, openMark) != 1 {
		return Ref{}, false
	}
	refs, err := Refs(t)
	if err != nil || len(refs) != 1 {
		return Ref{}, false
	}
	return refs[0], true
}

// secretFile checks a file's secret: exactly one placeholder naming a secret
// field.
func (c *moduleCheck) secretFile(p, s string) {
	if _, err := Refs(s); err != nil {
		c.refs(p, s, refSecretFile) // reports the malformed form
		return
	}
	if _, ok := soleRef(s); !ok {
		c.add(p, "write exactly one placeholder, such as secret: ${{ db.password }}", "a file's secret is one ${{ requirement.field }} and nothing else")
		return
	}
	c.refs(p, s, refSecretFile)
}

// hostPath checks a path on the host: it starts with a host-directory
// requirement's path, is not absolute, and does not escape with "..".
func (c *moduleCheck) hostPath(p, s, what string) {
	switch {
	case s == "":
		c.add(p, "place it under a host directory, such as path: ${{ data.path }}/app.ini", "a %s needs a path", what)
		return
	case strings.HasPrefix(s, "/"):
		c.add(p, "require a host directory and write ${{ <requirement>.path }}/...: a definition names no host path (design 27)", "%q is an absolute host path", s)
		return
	case hasDotDot(s):
		c.add(p, "write the path without ..", "%q escapes with ..", s)
		return
	}
	refs := c.refs(p, s, refPlain)
	if !strings.HasPrefix(s, openMark) || len(refs) == 0 {
		c.add(p, "start it with a host directory requirement, such as ${{ data.path }}/app.ini", "%q is not under a host directory", s)
		return
	}
	if req := c.reqs[refs[0].Requirement]; req != nil && (req.Contract != ContractHostDir || refs[0].Field != "path") {
		c.add(p, "start it with ${{ <host-directory requirement>.path }}", "%q does not start with a host directory's path", s)
	}
}

// container checks a container resource.
func (c *moduleCheck) container(i int, p string, r *Resource) {
	switch {
	case r.Image == "":
		c.add(p+".image", "name an image pinned by digest, such as docker.io/library/postgres@sha256:<64 hex>", "a container needs an image")
	case strings.Contains(r.Image, openMark):
		c.add(p+".image", "write the image reference itself, pinned by digest", "an image cannot use a placeholder")
	case !digestRE.MatchString(r.Image):
		c.add(p+".image", "pin it by digest: name@sha256:<64 hex> (find it with `podman image inspect` or the registry)", "image %q is not pinned by digest", r.Image)
	}
	for j, arg := range r.Command {
		c.refs(fmt.Sprintf("%s.command[%d]", p, j), arg, refCommand)
	}
	for _, k := range sortedKeys(r.Env) {
		ep := p + ".env." + k
		if !envNameRE.MatchString(k) {
			c.add(ep, "write an environment variable name such as DB_HOST", "%q is not an environment variable name", k)
		}
		c.refs(ep, r.Env[k], refEnv)
	}
	earlier := func(name string) (int, bool) {
		k := slices.IndexFunc(c.m.Resources, func(x Resource) bool { return x.Name() == name })
		return k, k >= 0 && k < i
	}
	for j, ef := range r.EnvFiles {
		fp := fmt.Sprintf("%s.envFiles[%d]", p, j)
		k, before := earlier(ef.File)
		switch {
		case ef.File == "":
			c.add(fp+".file", "name a file resource of this module", "the env-file's file is missing")
		case k < 0:
			c.add(fp+".file", "name a file resource of this module declared before the container", "file %q does not exist", ef.File)
		case c.m.Resources[k].File == "":
			c.add(fp+".file", "name a file resource", "resource %q is not a file", ef.File)
		case !before:
			c.add(fp+".file", "declare the file before the container", "file %q comes after the container", ef.File)
		}
		if strings.TrimSpace(ef.Reason) == "" {
			c.add(fp, "add `reason:` saying why this process cannot read the value from a file (ADR 0086)", "an env-file needs a reason")
		}
	}
	for j, m := range r.Mounts {
		mp := fmt.Sprintf("%s.mounts[%d]", p, j)
		c.hostPath(mp+".source", m.Source, "mount")
		switch {
		case m.Target == "":
			c.add(mp+".target", "write the path inside the container, such as /data", "the mount's target is missing")
		case !strings.HasPrefix(m.Target, "/"):
			c.add(mp+".target", "write an absolute path inside the container", "target %q is not an absolute path", m.Target)
		case hasDotDot(m.Target):
			c.add(mp+".target", "write the path without ..", "%q escapes with ..", m.Target)
		case strings.Contains(m.Target, openMark):
			c.add(mp+".target", "write the path inside the container literally", "a mount target cannot use a placeholder")
		}
	}
	for j, port := range r.Ports {
		pp := fmt.Sprintf("%s.ports[%d]", p, j)
		c.refs(pp+".host", port.Host, refPlain)
		ref, ok := soleRef(port.Host)
		if req := c.reqs[ref.Requirement]; ok && req != nil && (req.Contract != ContractHostPort || ref.Field != "port") {
			ok = false
		}
		if !ok {
			c.add(pp+".host", "require a host-port and write host: ${{ <requirement>.port }}: the host says where the port is (ADR 0038)", "host port %q is not a host-port requirement's port", port.Host)
		}
		if port.Container < 1 || port.Container > 65535 {
			c.add(pp+".container", "write the port the software listens on, 1 to 65535", "%d is not a port", port.Container)
		}
		if port.Protocol != "" && port.Protocol != "tcp" && port.Protocol != "udp" {
			c.add(pp+".protocol", "write tcp or udp", "%q is not a protocol", port.Protocol)
		}
	}
	for j, name := range r.RestartOn {
		rp := fmt.Sprintf("%s.restartOn[%d]", p, j)
		k, before := earlier(name)
		switch {
		case k < 0:
			c.add(rp, "name a resource of this module declared before this container", "resource %q does not exist", name)
		case k == i:
			c.add(rp, "name what the container reads, not the container itself", "container %q names itself", name)
		case !before:
			c.add(rp, "move the resource before this container: it is applied in order (ADR 0052)", "resource %q comes after this container", name)
		}
	}
	if r.Answer != "" {
		switch {
		case !r.RunOnce:
			c.add(p+".answer", "set runOnce: true, or remove answer", "only a run-once step writes an answer")
		case !strings.HasPrefix(r.Answer, "/"):
			c.add(p+".answer", "write the absolute path inside the container, in a mounted directory", "answer %q is not an absolute path", r.Answer)
		case hasDotDot(r.Answer):
			c.add(p+".answer", "write the path without ..", "%q escapes with ..", r.Answer)
		}
	}
}
