package hostd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/hostd/podman"
)

// spec turns a container resource into what the runtime runs, labelled with
// the mesh, node, resource ID and digest.
func (a *applier) spec(r *declaration.Resource) podman.Spec {
	c := r.Container
	s := podman.Spec{
		Name: c.Name, Image: c.Image, Command: c.Command, Env: c.Env,
		Mounts: c.Mounts, Ports: c.Ports,
		Labels: map[string]string{
			podman.LabelMesh: a.d.Mesh, podman.LabelNode: a.d.Node,
			podman.LabelID: r.ID, podman.LabelDigest: a.digests[r.ID],
		},
	}
	for _, ef := range c.EnvFiles {
		if f := a.byID[ef.File]; f != nil && f.File != nil {
			s.EnvFiles = append(s.EnvFiles, f.File.Path)
		}
	}
	return s
}

// readsChanged names what a container or step reads that changed: in this
// apply (a file rewritten, a step that ran), or since its record (a crash
// between the two).
func (a *applier) readsChanged(c *declaration.Container) []string {
	var why []string
	for _, id := range c.Reads(a.byPath) {
		what, now := a.changed[id]
		if !now && a.prev[id] != "" && a.prev[id] != a.digests[id] {
			what, now = "changed", true
		}
		if !now {
			continue
		}
		if r := a.byID[id]; what == "ran" && r != nil && r.Container != nil {
			why = append(why, fmt.Sprintf("step %q ran", id))
		} else {
			why = append(why, fmt.Sprintf("%q changed", id))
		}
	}
	return why
}

// container holds a long-running container to its declaration. It is
// recreated when its digest moved (it or what it reads changed, restarts
// being derived) or a step it names ran; put back when its running
// configuration drifted; started when found stopped.
func (a *applier) container(ctx context.Context, r *declaration.Resource) (declaration.Outcome, string, error) {
	c := r.Container
	spec := a.spec(r)
	o, exists := a.observed[c.Name]
	if !exists {
		if err := a.run(ctx, spec); err != nil {
			return "", "", err
		}
		a.changed[r.ID] = "changed"
		return declaration.Created, "", nil
	}
	var outcome declaration.Outcome
	var why []string
	if reads := a.readsChanged(c); len(reads) > 0 {
		outcome, why = declaration.Recreated, reads
	} else if o.Labels[podman.LabelDigest] != a.digests[r.ID] {
		outcome, why = declaration.Recreated, []string{"its declaration changed"}
	} else if diffs := drift(o, spec); o.Inspected && len(diffs) > 0 {
		outcome, why = declaration.Corrected, []string{"running configuration differed: " + strings.Join(diffs, ", ")}
	} else if !o.Running {
		if err := a.h.rt.Start(ctx, c.Name); err != nil {
			return "", "", err
		}
		a.changed[r.ID] = "changed"
		return declaration.Corrected, fmt.Sprintf("was %s, started again", o.State), nil
	} else {
		if a.st.Containers[c.Name] != o.ID {
			// Inspected and found as declared: hostd's from now on.
			a.st.Containers[c.Name] = o.ID
			a.dirty = true
		}
		return declaration.Unchanged, "", nil
	}
	if err := a.h.rt.Remove(ctx, c.Name); err != nil {
		return "", "", err
	}
	delete(a.st.Containers, c.Name)
	if err := a.run(ctx, spec); err != nil {
		return "", "", err
	}
	a.changed[r.ID] = "changed"
	return outcome, strings.Join(why, ", "), nil
}

// run starts a container and notes its ID for the record.
func (a *applier) run(ctx context.Context, spec podman.Spec) error {
	id, err := a.h.rt.Run(ctx, spec)
	if err != nil {
		return err
	}
	a.st.Containers[spec.Name] = id
	a.dirty = true
	return nil
}

// drift names how a running container differs from its declaration: image,
// env (names only, never values), mounts and ports.
func drift(o podman.Observed, s podman.Spec) []string {
	var diffs []string
	if o.Image != s.Image {
		diffs = append(diffs, "image")
	}
	var env []string
	for k, v := range s.Env {
		if got, ok := o.Env[k]; !ok || got != v {
			env = append(env, k)
		}
	}
	for k, v := range envFileVars(s.EnvFiles) {
		if _, declared := s.Env[k]; declared {
			continue // --env wins over --env-file
		}
		if got, ok := o.Env[k]; !ok || got != v {
			env = append(env, k)
		}
	}
	sort.Strings(env)
	for _, k := range env {
		diffs = append(diffs, "env "+k)
	}
	want := slices.Clone(s.Mounts)
	podman.SortMounts(want)
	if !slices.Equal(want, o.Mounts) && !(len(want) == 0 && len(o.Mounts) == 0) {
		diffs = append(diffs, "mounts")
	}
	ports := make([]declaration.Port, len(s.Ports))
	for i, p := range s.Ports {
		if p.Protocol == "" {
			p.Protocol = "tcp"
		}
		ports[i] = p
	}
	podman.SortPorts(ports)
	if !slices.Equal(ports, o.Ports) && !(len(ports) == 0 && len(o.Ports) == 0) {
		diffs = append(diffs, "ports")
	}
	return diffs
}

// envFileVars reads the variables of env-files hostd wrote in this apply, as
// podman reads them: KEY=VALUE lines, # comments. Their values are compared,
// never reported.
func envFileVars(paths []string) map[string]string {
	vars := map[string]string{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if k, v, ok := strings.Cut(line, "="); ok {
				vars[k] = v
			}
		}
	}
	return vars
}

// step runs a run-once container to completion when its marker does not
// match its digest, or when something it names under restartOn changed in
// this apply (ADR 0052, 0099). A non-zero exit fails the apply naming the
// step and records nothing, so it is retried next apply.
func (a *applier) step(ctx context.Context, r *declaration.Resource) (declaration.Outcome, string, error) {
	c := r.Container
	var why []string
	for _, id := range c.RestartOn {
		if what, ok := a.changed[id]; ok {
			why = append(why, fmt.Sprintf("%q %s in this apply", id, what))
		}
	}
	marker := a.st.Markers[r.ID]
	switch {
	case marker == "":
		why = []string{"first run"}
	case len(why) > 0:
	case marker != a.digests[r.ID]:
		if reads := a.readsChanged(c); len(reads) > 0 {
			why = reads
		} else {
			why = append(why, "its declaration changed")
		}
	}
	_, leftover := a.observed[c.Name]
	if leftover {
		// A step killed mid-run (hostd crashed) leaves its container.
		if err := a.h.rt.Remove(ctx, c.Name); err != nil {
			return "", "", err
		}
	}
	if len(why) == 0 {
		return declaration.Unchanged, "", nil
	}
	if err := a.h.rt.RunOnce(ctx, a.spec(r)); err != nil {
		var exit *podman.ExitError
		if errors.As(err, &exit) {
			return "", "", fmt.Errorf("step %q exited with status %d", r.ID, exit.Code)
		}
		return "", "", fmt.Errorf("step %q: %w", r.ID, err)
	}
	a.changed[r.ID] = "ran"
	return declaration.Ran, strings.Join(why, ", "), nil
}

// answers reads the Answer file of every step that holds (ran or was
// unchanged): a JSON object of contract fields, carried back on status/<node>.
func (a *applier) answers(results []declaration.Result) map[string]map[string]string {
	var out map[string]map[string]string
	for i, r := range a.d.Resources {
		c := r.Container
		if c == nil || c.Answer == "" || i >= len(results) {
			continue
		}
		if o := results[i].Outcome; o != declaration.Ran && o != declaration.Unchanged {
			continue
		}
		data, err := os.ReadFile(c.Answer)
		if err != nil {
			continue
		}
		var raw map[string]any
		if json.Unmarshal(data, &raw) != nil {
			continue
		}
		fields := make(map[string]string, len(raw))
		for k, v := range raw {
			if s, ok := v.(string); ok {
				fields[k] = s
			} else {
				b, _ := json.Marshal(v)
				fields[k] = string(b)
			}
		}
		if out == nil {
			out = map[string]map[string]string{}
		}
		out[r.ID] = fields
	}
	return out
}
