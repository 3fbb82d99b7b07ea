package reconciler

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/reconciler/synth"
)

// TestPlanCases plans a change from one case of testdata/resolve to another
// and compares the markdown and JSON with testdata/plan/<name>.md and .json
// (-update rewrites them).
func TestPlanCases(t *testing.T) {
	tests := []struct {
		name, base, head string
		resolves         bool
		changed          bool
	}{
		{"from-nothing", "", "lab", true, true},
		{"unchanged", "lab", "lab", true, false},
		{"move-provider", "lab", "lab-moved", true, true},
		{"refused", "lab", "three-reasons", false, false},
		{"waiting", "", "waiting", true, true},
		{"base-refused", "three-reasons", "operator-only", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts PlanOptions
			var ropts ResolveOptions
			if tt.base != "" {
				opts.Base, _ = loadCase(t, tt.base)
			}
			opts.Head, ropts = loadCase(t, tt.head)
			opts.Answers = ropts.Answers
			p, err := MakePlan(opts)
			if err != nil {
				t.Fatal(err)
			}
			if p.Resolves != tt.resolves || p.Changed() != tt.changed {
				t.Errorf("resolves=%v changed=%v, want %v %v", p.Resolves, p.Changed(), tt.resolves, tt.changed)
			}
			js, err := p.JSON()
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata/plan", tt.name+".md"), p.Markdown())
			golden(t, filepath.Join("testdata/plan", tt.name+".json"), js)
		})
	}
}

func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n%s", file, lineDiff(string(want), string(got)))
	}
}

// TestPlanKeepsPorts: the head is resolved with the base's state, so a new
// assignment that would hash onto an existing port does not move it.
func TestPlanKeepsPorts(t *testing.T) {
	base := goRepo()
	head := goRepo()
	head.Modules["aaa"] = head.Modules["app"]
	head.Assignments = append(head.Assignments, &schema.Assignment{Node: "n2", Module: "aaa"})
	p, err := MakePlan(PlanOptions{Base: base, Head: head})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range p.Nodes {
		for _, c := range n.Changed {
			if c.ID == "app/server" {
				t.Fatalf("app/server changed (%v): its port moved", c.Fields)
			}
		}
	}
}

// TestPlanMarkdownFitsAComment: planning a big mesh from nothing, with every
// consumer of an answer waiting, still gives a comment GitHub accepts: node
// sections collapsed, long lists counted, and the rest left to the JSON.
func TestPlanMarkdownFitsAComment(t *testing.T) {
	m, err := synth.Mesh(testCatalog(t), synth.Options{Nodes: 300, PerNode: 10})
	if err != nil {
		t.Fatal(err)
	}
	p, err := MakePlan(PlanOptions{Head: m.Repo})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Resolves || len(p.Waiting) <= secretRows || len(p.Secrets) <= secretRows {
		t.Fatalf("the mesh does not exercise the limits: resolves=%v, %d waiting, %d secrets", p.Resolves, len(p.Waiting), len(p.Secrets))
	}
	md := string(p.Markdown())
	if len(md) > 65536 {
		t.Fatalf("the comment is %d characters, over GitHub's 65,536", len(md))
	}
	for _, want := range []string{
		"<details><summary>Node <code>n000</code>",
		"more nodes change, not shown",
		"| | ... and ", // n000's postgres serves every wiki: its rows are counted
		fmt.Sprintf("| ... and %d more | | |", len(p.Secrets)-secretRows),
		fmt.Sprintf("- ... and %d more\n", len(p.Waiting)-secretRows),
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the comment does not say %q", want)
		}
	}
}
