package reconciler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// JSON returns the plan as indented JSON, ending in a newline.
func (p *Plan) JSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("encode plan: %w", err)
	}
	return buf.Bytes(), nil
}

// Markdown returns the plan as a pull-request comment: a verdict first, then
// refusals, waiting requirements, secrets, and one section per node that
// changes.
func (p *Plan) Markdown() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "## meshgen plan for mesh `%s`\n\n", p.Mesh)
	if p.BaseNote != "" {
		fmt.Fprintf(&b, "> %s\n\n", p.BaseNote)
	}
	if !p.Resolves {
		fmt.Fprintf(&b, "**Refused**: %d %s. Nothing would be delivered to any node until every one is answered.\n\n",
			len(p.Refused), plural(len(p.Refused), "reason", "reasons"))
		b.WriteString("### Refused\n\n")
		for _, r := range p.Refused {
			b.WriteString("- ")
			if r.Pos.File != "" {
				fmt.Fprintf(&b, "`%s` ", posString(r.Pos))
			}
			if r.Assignment != "" {
				fmt.Fprintf(&b, "**%s** ", r.Assignment)
			}
			if r.Requirement != "" {
				fmt.Fprintf(&b, "requirement `%s`: ", r.Requirement)
			}
			b.WriteString(mdEscape(r.Message))
			b.WriteString("\n")
			if r.Hint != "" {
				fmt.Fprintf(&b, "  - hint: %s\n", mdEscape(r.Hint))
			}
		}
		return b.Bytes()
	}
	var changed, unchanged []string
	for _, n := range p.Nodes {
		if len(n.Added)+len(n.Changed)+len(n.Removed) > 0 {
			changed = append(changed, n.Node)
		} else {
			unchanged = append(unchanged, n.Node)
		}
	}
	fmt.Fprintf(&b, "**Resolves.** %d of %d %s change", len(changed), len(p.Nodes), plural(len(p.Nodes), "node", "nodes"))
	if len(p.Secrets) > 0 {
		fmt.Fprintf(&b, "; %d %s", len(p.Secrets), plural(len(p.Secrets), "secret changes", "secrets change"))
	}
	if len(p.Waiting) > 0 {
		fmt.Fprintf(&b, "; %d %s waiting for a provider", len(p.Waiting), plural(len(p.Waiting), "requirement is", "requirements are"))
	}
	b.WriteString(".\n\n")

	if len(p.Waiting) > 0 {
		b.WriteString("### Waiting\n\n")
		for _, w := range p.Waiting {
			fmt.Fprintf(&b, "- **%s** requirement `%s` waits for **%s** (step `%s`) to answer %s",
				w.Assignment, w.Requirement, w.Provider, w.Answer, codeList(w.Fields))
			if len(w.Skipped) > 0 {
				fmt.Fprintf(&b, "; not delivered until then: %s", codeList(w.Skipped))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	if len(p.Secrets) > 0 {
		b.WriteString("### Secrets\n\nNames only; the vault makes and seals every value.\n\n")
		b.WriteString("| secret | change | sealed to |\n|---|---|---|\n")
		for _, s := range p.Secrets {
			var to []string
			for _, r := range s.Recipients {
				to = append(to, fmt.Sprintf("%s (%s, %s)", r.Node, r.Role, r.Assignment))
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.Name, s.Change, strings.Join(to, "<br>"))
		}
		b.WriteString("\n")
	}
	for _, n := range p.Nodes {
		if len(n.Added)+len(n.Changed)+len(n.Removed) == 0 {
			continue
		}
		fmt.Fprintf(&b, "### Node `%s`\n\n", n.Node)
		fmt.Fprintf(&b, "%d added, %d changed, %d removed.\n\n", len(n.Added), len(n.Changed), len(n.Removed))
		b.WriteString("| | resource | kind | what changed |\n|---|---|---|---|\n")
		for _, r := range n.Added {
			fmt.Fprintf(&b, "| + | `%s` | %s | |\n", r.ID, r.Kind)
		}
		for _, r := range n.Changed {
			fmt.Fprintf(&b, "| ~ | `%s` | %s | %s |\n", r.ID, r.Kind, strings.Join(r.Fields, ", "))
		}
		for _, r := range n.Removed {
			fmt.Fprintf(&b, "| - | `%s` | %s | |\n", r.ID, r.Kind)
		}
		b.WriteString("\n")
		if len(n.Recreated) > 0 {
			b.WriteString("Containers recreated:\n\n")
			for _, r := range n.Recreated {
				fmt.Fprintf(&b, "- `%s` (`%s`): %s\n", r.ID, r.Container, mdEscape(strings.Join(r.Reasons, "; ")))
			}
			b.WriteString("\n")
		}
		if len(n.Reruns) > 0 {
			b.WriteString("Steps that will run:\n\n")
			for _, r := range n.Reruns {
				fmt.Fprintf(&b, "- `%s` (`%s`): %s\n", r.ID, r.Container, mdEscape(strings.Join(r.Reasons, "; ")))
			}
			b.WriteString("\n")
		}
	}
	if len(unchanged) > 0 {
		fmt.Fprintf(&b, "Unchanged: %s.\n", codeList(unchanged))
	}
	return b.Bytes()
}

func codeList(xs []string) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = "`" + x + "`"
	}
	return strings.Join(out, ", ")
}

// mdEscape keeps text from an operator's repository from turning into
// markdown structure in a comment.
func mdEscape(s string) string {
	r := strings.NewReplacer("|", "\\|", "<", "&lt;", ">", "&gt;", "\n", " ")
	return r.Replace(s)
}
