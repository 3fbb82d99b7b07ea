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
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "> %s\n\n", mdEscape(n))
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
		if n.changes() {
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
		for i, w := range p.Waiting {
			if i == secretRows {
				fmt.Fprintf(&b, "- ... and %d more\n", len(p.Waiting)-secretRows)
				break
			}
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
		for i, s := range p.Secrets {
			if i == secretRows {
				fmt.Fprintf(&b, "| ... and %d more | | |\n", len(p.Secrets)-secretRows)
				break
			}
			var to []string
			for _, r := range s.Recipients {
				to = append(to, fmt.Sprintf("%s (%s, %s)", r.Node, r.Role, r.Assignment))
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.Name, s.Change, strings.Join(to, "<br>"))
		}
		b.WriteString("\n")
	}
	collapse := len(changed) > collapseAbove
	for i, n := range p.Nodes {
		if !n.changes() {
			continue
		}
		sec := nodeSection(n, collapse)
		if b.Len()+len(sec) > CommentLimit-tailRoom {
			left := 0
			for _, m := range p.Nodes[i:] {
				if m.changes() {
					left++
				}
			}
			fmt.Fprintf(&b, "... and %d more %s change, not shown to keep this comment under %d characters; `meshgen plan --format json` lists every one.\n\n",
				left, plural(left, "node", "nodes"), CommentLimit)
			break
		}
		b.Write(sec)
	}
	switch {
	case len(unchanged) > listAbove:
		fmt.Fprintf(&b, "Unchanged: %d nodes.\n", len(unchanged))
	case len(unchanged) > 0:
		fmt.Fprintf(&b, "Unchanged: %s.\n", codeList(unchanged))
	}
	return b.Bytes()
}

// A pull-request comment holds at most 65,536 characters on GitHub; the
// markdown stays under CommentLimit, collapses node sections when many nodes
// change, and summarises long lists.
const (
	CommentLimit  = 60000
	tailRoom      = 2000 // for the closing lines
	collapseAbove = 10   // changed nodes shown open
	listAbove     = 50   // names listed before a count is given instead
	secretRows    = 30   // secrets or waiting requirements listed before a count
	sectionRows   = 60   // a node's resources, recreations or steps listed before a count
)

// nodeSection is one node's changes, collapsed into a <details> block when
// collapse is set.
func nodeSection(n NodePlan, collapse bool) []byte {
	var b bytes.Buffer
	summary := fmt.Sprintf("%d added, %d changed, %d removed", len(n.Added), len(n.Changed), len(n.Removed))
	if n.RemovedFromMesh {
		summary = "removed from the mesh, " + summary
	}
	if collapse {
		fmt.Fprintf(&b, "<details><summary>Node <code>%s</code>: %s</summary>\n\n", n.Node, summary)
	} else {
		fmt.Fprintf(&b, "### Node `%s`\n\n%s.\n\n", n.Node, summary)
	}
	if n.RemovedFromMesh {
		b.WriteString("The node is no longer in the mesh: its branch gets a final declaration with no resources, " +
			"so its hostd removes the containers it ran (their data stays) and holds none of its secrets. " +
			"The branch is kept, so its generation continues if the node is enrolled again.\n\n")
	}
	var rows []string
	for _, r := range n.Added {
		rows = append(rows, fmt.Sprintf("| + | `%s` | %s | |\n", r.ID, r.Kind))
	}
	for _, r := range n.Changed {
		rows = append(rows, fmt.Sprintf("| ~ | `%s` | %s | %s |\n", r.ID, r.Kind, strings.Join(r.Fields, ", ")))
	}
	for _, r := range n.Removed {
		rows = append(rows, fmt.Sprintf("| - | `%s` | %s | |\n", r.ID, r.Kind))
	}
	if len(rows) > 0 {
		b.WriteString("| | resource | kind | what changed |\n|---|---|---|---|\n")
		for i, row := range rows {
			if i == sectionRows {
				fmt.Fprintf(&b, "| | ... and %d more | | |\n", len(rows)-sectionRows)
				break
			}
			b.WriteString(row)
		}
		b.WriteString("\n")
	}
	reruns := func(title string, rs []Rerun) {
		if len(rs) == 0 {
			return
		}
		b.WriteString(title + ":\n\n")
		for i, r := range rs {
			if i == sectionRows {
				fmt.Fprintf(&b, "- ... and %d more\n", len(rs)-sectionRows)
				break
			}
			fmt.Fprintf(&b, "- `%s` (`%s`): %s\n", r.ID, r.Container, mdEscape(strings.Join(r.Reasons, "; ")))
		}
		b.WriteString("\n")
	}
	reruns("Containers recreated", n.Recreated)
	reruns("Steps that will run", n.Reruns)
	if collapse {
		b.WriteString("</details>\n\n")
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
