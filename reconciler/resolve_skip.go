package reconciler

import (
	schema "github.com/meshgen/meshgen/catalog-schema"
)

// skipped returns the resources of a that read a requirement still waiting
// for its provider, or that name (under restartOn or envFiles) or mount a
// resource already skipped, in author order: nothing that depends on a
// provider's answer is delivered before the answer (design 27).
func skipped(a *Resolved) []string {
	var out []string
	skip := map[string]bool{}
	skipPaths := map[string]bool{}
	for i := range a.Definition.Resources {
		res := &a.Definition.Resources[i]
		if dependsOnSkipped(res, skip, skipPaths) || readsWaiting(res, a.Waiting) {
			skip[res.Name()] = true
			if res.Path != "" {
				skipPaths[canonical(res.Path)] = true
			}
			out = append(out, res.Name())
		}
	}
	return out
}

func dependsOnSkipped(res *schema.Resource, skip, skipPaths map[string]bool) bool {
	for _, x := range res.RestartOn {
		if skip[x] {
			return true
		}
	}
	for _, ef := range res.EnvFiles {
		if skip[ef.File] {
			return true
		}
	}
	for _, m := range res.Mounts {
		if skipPaths[canonical(m.Source)] {
			return true
		}
	}
	return false
}

// canonical writes every reference in s the one way, so that two spellings
// of one path compare equal.
func canonical(s string) string {
	out, err := schema.Expand(s, func(r schema.Ref) (string, error) { return r.String(), nil })
	if err != nil {
		return s
	}
	return out
}

// readsWaiting reports whether any value of res uses the one form to read a
// waiting requirement.
func readsWaiting(res *schema.Resource, waiting map[string]Waiting) bool {
	reads := func(s string) bool {
		refs, _ := schema.Refs(s)
		for _, r := range refs {
			if _, ok := waiting[r.Requirement]; ok {
				return true
			}
		}
		return false
	}
	strs := []string{res.Path, res.Mode, res.Owner, res.Content, res.Secret, res.Image, res.Answer}
	strs = append(strs, res.Command...)
	for _, v := range res.Env {
		strs = append(strs, v)
	}
	for _, m := range res.Mounts {
		strs = append(strs, m.Source, m.Target)
	}
	for _, p := range res.Ports {
		strs = append(strs, p.Host)
	}
	for _, s := range strs {
		if reads(s) {
			return true
		}
	}
	return false
}
