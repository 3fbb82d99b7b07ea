// Package podman runs a node's containers through the podman CLI: it is the
// [github.com/meshgen/meshgen/hostd.Runtime] hostd uses on a real machine.
//
// Every command carries the store flags of [Options] (--root, --runroot,
// --tmpdir when set), and images are run with --pull=never unless the node
// allows pulls, so a digest that is not on the machine fails instead of
// reaching a registry. [Podman.List] observes every container of a mesh with
// one `ps`, whatever their number; [Podman.Inspect] reads the full
// configuration of the few that need it with one `inspect`.
package podman

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"

	"github.com/meshgen/meshgen/hostd/declaration"
)

// Labels hostd puts on every container it makes.
const (
	LabelMesh   = "meshgen.mesh"
	LabelNode   = "meshgen.node"
	LabelID     = "meshgen.id"
	LabelDigest = "meshgen.digest"
)

// Options select the podman store and the pull policy.
type Options struct {
	// Binary is the podman executable; "podman" when empty.
	Binary string
	// Root, RunRoot and TmpDir are podman's --root, --runroot and --tmpdir;
	// each is left to podman's default when empty.
	Root, RunRoot, TmpDir string
	// StopTimeout is the seconds a container is given to stop before it is
	// killed, when it is removed.
	StopTimeout int
	// AllowPulls lets podman pull a missing image (--pull=missing) instead of
	// failing (--pull=never).
	AllowPulls bool
}

// Podman is the podman CLI.
type Podman struct {
	opts Options
}

// New returns a Podman using opts.
func New(opts Options) *Podman {
	if opts.Binary == "" {
		opts.Binary = "podman"
	}
	return &Podman{opts: opts}
}

// Spec is a container to run.
type Spec struct {
	Name    string
	Image   string
	Command []string
	Env     map[string]string
	// EnvFiles are host paths passed with --env-file.
	EnvFiles []string
	Mounts   []declaration.Mount
	Ports    []declaration.Port
	Labels   map[string]string
}

// Observed is a container as podman reports it.
type Observed struct {
	Name    string
	ID      string
	Running bool
	// State is podman's word: running, exited, created, ...
	State string
	// Image is the image reference the container was created from.
	Image  string
	Env    map[string]string
	Mounts []declaration.Mount
	Ports  []declaration.Port
	Labels map[string]string
	// Inspected says Env, Mounts and Ports were read ([Podman.Inspect]).
	Inspected bool
}

func (p *Podman) command(ctx context.Context, args ...string) *exec.Cmd {
	var flags []string
	if p.opts.Root != "" {
		flags = append(flags, "--root", p.opts.Root)
	}
	if p.opts.RunRoot != "" {
		flags = append(flags, "--runroot", p.opts.RunRoot)
	}
	if p.opts.TmpDir != "" {
		flags = append(flags, "--tmpdir", p.opts.TmpDir)
	}
	return exec.CommandContext(ctx, p.opts.Binary, append(flags, args...)...)
}

// run runs podman and returns its standard output. The error carries the
// last line of podman's standard error, never the command's arguments (they
// hold environment values).
func (p *Podman) run(ctx context.Context, what string, args ...string) ([]byte, error) {
	cmd := p.command(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("podman %s: %w: %s", what, err, lastLine(stderr.String()))
	}
	return stdout.Bytes(), nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

type psEntry struct {
	ID     string            `json:"Id"`
	Names  []string          `json:"Names"`
	Image  string            `json:"Image"`
	State  string            `json:"State"`
	Labels map[string]string `json:"Labels"`
}

type inspectEntry struct {
	ID        string `json:"Id"`
	Name      string `json:"Name"`
	ImageName string `json:"ImageName"`
	State     struct {
		Status  string `json:"Status"`
		Running bool   `json:"Running"`
	} `json:"State"`
	Config struct {
		Env    []string          `json:"Env"`
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
	Mounts []struct {
		Type        string `json:"Type"`
		Source      string `json:"Source"`
		Destination string `json:"Destination"`
		RW          bool   `json:"RW"`
	} `json:"Mounts"`
	HostConfig struct {
		PortBindings map[string][]struct {
			HostPort string `json:"HostPort"`
		} `json:"PortBindings"`
	} `json:"HostConfig"`
}

// List returns every container labelled with mesh, by name, with one
// `podman ps`: name, ID, state, image and labels; Env, Mounts and Ports are
// left empty ([Observed.Inspected] is false).
func (p *Podman) List(ctx context.Context, mesh string) (map[string]Observed, error) {
	out, err := p.run(ctx, "ps", "ps", "--all", "--format", "json", "--filter", "label="+LabelMesh+"="+mesh)
	if err != nil {
		return nil, fmt.Errorf("list containers of mesh %q: %w", mesh, err)
	}
	var ps []psEntry
	if err := json.Unmarshal(out, &ps); err != nil {
		return nil, fmt.Errorf("list containers of mesh %q: read podman ps: %w", mesh, err)
	}
	found := make(map[string]Observed, len(ps))
	for _, c := range ps {
		if len(c.Names) == 0 {
			continue
		}
		found[c.Names[0]] = Observed{Name: c.Names[0], ID: c.ID, State: c.State, Running: c.State == "running", Image: c.Image, Labels: c.Labels}
	}
	return found, nil
}

// Inspect returns the full configuration of the named containers (or IDs),
// by name, with one `podman container inspect`.
func (p *Podman) Inspect(ctx context.Context, names []string) (map[string]Observed, error) {
	found := make(map[string]Observed, len(names))
	if len(names) == 0 {
		return found, nil
	}
	out, err := p.run(ctx, "inspect", append([]string{"container", "inspect"}, names...)...)
	if err != nil {
		return nil, fmt.Errorf("inspect containers %s: %w", strings.Join(names, ", "), err)
	}
	var ins []inspectEntry
	if err := json.Unmarshal(out, &ins); err != nil {
		return nil, fmt.Errorf("inspect containers: read podman inspect: %w", err)
	}
	for _, c := range ins {
		o := Observed{
			Name: strings.TrimPrefix(c.Name, "/"), ID: c.ID, Running: c.State.Running, State: c.State.Status,
			Image: c.ImageName, Env: map[string]string{}, Labels: c.Config.Labels, Inspected: true,
		}
		for _, kv := range c.Config.Env {
			k, v, _ := strings.Cut(kv, "=")
			o.Env[k] = v
		}
		for _, m := range c.Mounts {
			if m.Type != "" && m.Type != "bind" {
				continue
			}
			o.Mounts = append(o.Mounts, declaration.Mount{Source: m.Source, Target: m.Destination, ReadOnly: !m.RW})
		}
		for key, binds := range c.HostConfig.PortBindings {
			port, proto, _ := strings.Cut(key, "/")
			cp, _ := strconv.Atoi(port)
			for _, b := range binds {
				hp, _ := strconv.Atoi(b.HostPort)
				o.Ports = append(o.Ports, declaration.Port{Host: hp, Container: cp, Protocol: proto})
			}
		}
		SortMounts(o.Mounts)
		SortPorts(o.Ports)
		found[o.Name] = o
	}
	return found, nil
}

// SortMounts orders mounts by target, so two sets compare equal.
func SortMounts(ms []declaration.Mount) {
	sort.Slice(ms, func(i, j int) bool { return ms[i].Target < ms[j].Target })
}

// SortPorts orders ports by host port and protocol, so two sets compare equal.
func SortPorts(ps []declaration.Port) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Host != ps[j].Host {
			return ps[i].Host < ps[j].Host
		}
		return ps[i].Protocol < ps[j].Protocol
	})
}

func (p *Podman) runArgs(s Spec) []string {
	pull := "--pull=never"
	if p.opts.AllowPulls {
		pull = "--pull=missing"
	}
	args := []string{"--name", s.Name, pull}
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--label", k+"="+s.Labels[k])
	}
	for _, f := range s.EnvFiles {
		args = append(args, "--env-file", f)
	}
	keys = keys[:0]
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--env", k+"="+s.Env[k])
	}
	for _, m := range s.Mounts {
		v := m.Source + ":" + m.Target
		if m.ReadOnly {
			v += ":ro"
		}
		args = append(args, "--volume", v)
	}
	for _, pt := range s.Ports {
		proto := pt.Protocol
		if proto == "" {
			proto = "tcp"
		}
		args = append(args, "--publish", fmt.Sprintf("%d:%d/%s", pt.Host, pt.Container, proto))
	}
	args = append(args, s.Image)
	return append(args, s.Command...)
}

// Run creates and starts a long-running container, detached, and returns
// its ID.
func (p *Podman) Run(ctx context.Context, s Spec) (string, error) {
	out, err := p.run(ctx, "run "+s.Name, append([]string{"run", "--detach"}, p.runArgs(s)...)...)
	if err != nil {
		return "", fmt.Errorf("run container %q: %w", s.Name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// ExitError is a step that ran and exited non-zero.
type ExitError struct {
	Name string
	Code int
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("container %q exited with status %d", e.Name, e.Code)
}

// RunOnce runs a container to completion, attached, and removes it. A
// non-zero exit returns an [*ExitError]; podman's own failures (125 and up
// before the command ran) return another error. The step's output is
// discarded: it may print what it read, secrets among it.
func (p *Podman) RunOnce(ctx context.Context, s Spec) error {
	cmd := p.command(ctx, append([]string{"run", "--rm"}, p.runArgs(s)...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit) && exit.ExitCode() == 125:
		// podman's own failure: its message is about the engine, not the step.
		return fmt.Errorf("run step %q: podman failed: %s", s.Name, lastLine(stderr.String()))
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return &ExitError{Name: s.Name, Code: exit.ExitCode()}
	default:
		return fmt.Errorf("run step %q: %w", s.Name, err)
	}
}

// Start starts a stopped container.
func (p *Podman) Start(ctx context.Context, name string) error {
	if _, err := p.run(ctx, "start "+name, "start", name); err != nil {
		return fmt.Errorf("start container %q: %w", name, err)
	}
	return nil
}

// Remove stops (after StopTimeout seconds) and removes a container; a
// container that does not exist is not an error.
func (p *Podman) Remove(ctx context.Context, name string) error {
	if _, err := p.run(ctx, "rm "+name, "rm", "--force", "--ignore", "--time", strconv.Itoa(p.opts.StopTimeout), name); err != nil {
		return fmt.Errorf("remove container %q: %w", name, err)
	}
	return nil
}
