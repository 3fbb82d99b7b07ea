package schema

import (
	"fmt"
	"strings"
)

// namesNoNodeOrMesh refuses a node's or the mesh's name inside a module
// definition: a definition names no node, mesh or path (design 27, ADR
// 0112). Names are matched as whole words of the values a definition
// writes: paths, content, environment, commands, mounts and answers.
func (c *moduleCheck) namesNoNodeOrMesh() {
	check := func(p, s string) {
		for _, w := range words(s) {
			switch {
			case c.repo.Nodes[w] != nil:
				c.add(p, "require what the node answers (a host fact, or an operator value set on the assignment) instead of naming it", "names node %q", w)
			case w == c.repo.Mesh.Name && w != "":
				c.add(p, "require mesh-identity or an operator value instead of naming the mesh", "names the mesh %q", w)
			}
		}
	}
	for i, req := range c.m.Requires {
		if req.Default != nil {
			check(fmt.Sprintf("$.requires[%d].default", i), *req.Default)
		}
	}
	for i, pr := range c.m.Provides {
		for _, k := range sortedKeys(pr.Values) {
			check(fmt.Sprintf("$.provides[%d].values.%s", i, k), pr.Values[k])
		}
	}
	for i, r := range c.m.Resources {
		p := fmt.Sprintf("$.resources[%d]", i)
		check(p+".path", r.Path)
		check(p+".content", r.Content)
		check(p+".answer", r.Answer)
		for j, a := range r.Command {
			check(fmt.Sprintf("%s.command[%d]", p, j), a)
		}
		for _, k := range sortedKeys(r.Env) {
			check(p+".env."+k, r.Env[k])
		}
		for j, m := range r.Mounts {
			check(fmt.Sprintf("%s.mounts[%d].source", p, j), m.Source)
			check(fmt.Sprintf("%s.mounts[%d].target", p, j), m.Target)
		}
	}
}

// words splits s into the lowercase-name-like words it holds, skipping the
// insides of placeholders (requirement names are the module's own).
func words(s string) []string {
	var out []string
	for {
		i := strings.Index(s, openMark)
		if i < 0 {
			break
		}
		out = append(out, splitWords(s[:i])...)
		j := strings.Index(s[i:], closeMark)
		if j < 0 {
			return out
		}
		s = s[i+j+len(closeMark):]
	}
	return append(out, splitWords(s)...)
}

// splitWords splits on anything that cannot be part of a name, after
// lowering case: host names do not care about it.
func splitWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-')
	})
}
