// Package graph draws a resolved mesh: every node, the assignments on it and
// the seats they hold, and which assignment provides what to whom (issue 6,
// `meshgen graph`). [Build] takes a [reconciler.Resolution]; [Graph.Mermaid]
// writes a flowchart a pull request renders, [Graph.DOT] one for Graphviz.
// A requirement still waiting for its provider's answer is drawn dashed,
// naming the fields it waits for.
package graph

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/meshgen/meshgen/reconciler"
)

// Graph is a resolved mesh as vertices grouped by node, and edges.
type Graph struct {
	Mesh  string
	Nodes []Node
	Edges []Edge
}

// Node is one machine and the assignments on it.
type Node struct {
	Name        string
	Assignments []Assignment
}

// Assignment is one module on one node.
type Assignment struct {
	// ID is "<module>@<node>".
	ID    string
	Seats []string
}

// Edge is one requirement of a consumer answered by a provider.
type Edge struct {
	// Consumer and Provider are assignment IDs.
	Consumer, Provider string
	Requirement        string
	// Contract is the provision's name (empty when the requirement names
	// none).
	Contract string
	// Waiting lists the fields still unanswered by the running provider.
	Waiting []string
}

// Build draws res. The result depends only on res.
func Build(res *reconciler.Resolution) *Graph {
	g := &Graph{Mesh: res.Mesh}
	index := map[string]int{}
	for _, n := range res.Nodes {
		index[n] = len(g.Nodes)
		g.Nodes = append(g.Nodes, Node{Name: n})
	}
	for _, a := range res.Assignments {
		i, ok := index[a.Node]
		if !ok {
			index[a.Node] = len(g.Nodes)
			i = len(g.Nodes)
			g.Nodes = append(g.Nodes, Node{Name: a.Node})
		}
		var seats []string
		if a.Assignment != nil {
			seats = append(seats, a.Assignment.Seats...)
		}
		g.Nodes[i].Assignments = append(g.Nodes[i].Assignments, Assignment{ID: a.ID, Seats: seats})

		contracts := map[string]string{}
		if a.Definition != nil {
			for _, q := range a.Definition.Requires {
				contracts[q.Name] = q.Contract
			}
		}
		reqs := make([]string, 0, len(a.Providers))
		for req := range a.Providers {
			reqs = append(reqs, req)
		}
		sort.Strings(reqs)
		for _, req := range reqs {
			e := Edge{Consumer: a.ID, Provider: a.Providers[req], Requirement: req, Contract: contracts[req]}
			if w, ok := a.Waiting[req]; ok {
				e.Waiting = w.Fields
			}
			g.Edges = append(g.Edges, e)
		}
	}
	return g
}

func (e Edge) label() string {
	l := e.Requirement
	if e.Contract != "" && e.Contract != e.Requirement {
		l += ": " + e.Contract
	}
	if len(e.Waiting) > 0 {
		l += " (waiting: " + strings.Join(e.Waiting, ", ") + ")"
	}
	return l
}

func (a Assignment) label() string {
	if len(a.Seats) == 0 {
		return a.ID
	}
	return a.ID + " — seats: " + strings.Join(a.Seats, ", ")
}

// mermaidID makes an identifier Mermaid accepts from any name.
func mermaidID(prefix, s string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, c := range s {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		} else {
			fmt.Fprintf(&b, "_%x_", c)
		}
	}
	return b.String()
}

// mermaidText quotes text for a Mermaid label.
func mermaidText(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, "#quot;") + `"`
}

// Mermaid writes g as a Mermaid flowchart: a subgraph per node, an arrow
// from each consumer to its provider labelled with the requirement and its
// contract, dashed while the provider's answer is awaited.
func (g *Graph) Mermaid() []byte {
	var b bytes.Buffer
	b.WriteString("flowchart LR\n")
	for _, n := range g.Nodes {
		fmt.Fprintf(&b, "  subgraph %s[%s]\n", mermaidID("node_", n.Name), mermaidText("node "+n.Name))
		for _, a := range n.Assignments {
			fmt.Fprintf(&b, "    %s[%s]\n", mermaidID("a_", a.ID), mermaidText(a.label()))
		}
		b.WriteString("  end\n")
	}
	for _, e := range g.Edges {
		arrow := "-->"
		if len(e.Waiting) > 0 {
			arrow = "-.->"
		}
		fmt.Fprintf(&b, "  %s %s|%s| %s\n", mermaidID("a_", e.Consumer), arrow, mermaidText(e.label()), mermaidID("a_", e.Provider))
	}
	return b.Bytes()
}

// dotText quotes text for DOT.
func dotText(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// DOT writes g for Graphviz: a cluster per node, an edge from each consumer
// to its provider, dashed while the provider's answer is awaited.
func (g *Graph) DOT() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "digraph %s {\n  rankdir=LR;\n  node [shape=box];\n", dotText(g.Mesh))
	for i, n := range g.Nodes {
		fmt.Fprintf(&b, "  subgraph cluster_%d {\n    label=%s;\n", i, dotText("node "+n.Name))
		for _, a := range n.Assignments {
			fmt.Fprintf(&b, "    %s [label=%s];\n", dotText(a.ID), dotText(a.label()))
		}
		b.WriteString("  }\n")
	}
	for _, e := range g.Edges {
		style := ""
		if len(e.Waiting) > 0 {
			style = ", style=dashed"
		}
		fmt.Fprintf(&b, "  %s -> %s [label=%s%s];\n", dotText(e.Consumer), dotText(e.Provider), dotText(e.label()), style)
	}
	b.WriteString("}\n")
	return b.Bytes()
}
