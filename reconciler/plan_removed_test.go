package reconciler

import (
	"strings"
	"testing"

	schema "github.com/meshgen/meshgen/catalog-schema"
)

// TestPlanNodeRemovedFromMesh: a node of the base that the head no longer
// has is shown removed from the mesh, with every resource it ran removed,
// and counts as a change.
func TestPlanNodeRemovedFromMesh(t *testing.T) {
	base, _ := loadCase(t, "lab")
	head, _ := loadCase(t, "lab")
	// The base has one more node, n9, running a second greeter.
	n3 := *base.Nodes["n3"]
	base.Nodes["n9"] = &n3
	for _, a := range base.Assignments {
		if a.Node == "n3" && a.Module == "greeter" {
			b := *a
			b.Node = "n9"
			base.Assignments = append(base.Assignments, &b)
			break
		}
	}
	for _, tt := range []struct {
		name string
		base *schema.Repo
		want bool
	}{
		{"n9 leaves", base, true},
		{"nothing leaves", head, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := MakePlan(PlanOptions{Base: tt.base, Head: head})
			if err != nil {
				t.Fatal(err)
			}
			if !p.Resolves {
				t.Fatalf("refused: %+v", p.Refused)
			}
			var n9 *NodePlan
			for i := range p.Nodes {
				if p.Nodes[i].Node == "n9" {
					n9 = &p.Nodes[i]
				} else if p.Nodes[i].RemovedFromMesh {
					t.Errorf("node %s is said removed from the mesh", p.Nodes[i].Node)
				}
			}
			md := string(p.Markdown())
			if !tt.want {
				if n9 != nil || strings.Contains(md, "removed from the mesh") {
					t.Fatalf("no node left, yet the plan says one did: %+v\n%s", n9, md)
				}
				return
			}
			if n9 == nil || !n9.RemovedFromMesh || len(n9.Removed) == 0 || len(n9.Added)+len(n9.Changed) != 0 || !p.Changed() {
				t.Fatalf("n9 in the plan: %+v", n9)
			}
			if !strings.Contains(md, "### Node `n9`\n\nremoved from the mesh, 0 added, 0 changed, ") ||
				!strings.Contains(md, "its hostd removes the containers it ran (their data stays)") {
				t.Fatalf("markdown does not show n9 removed from the mesh:\n%s", md)
			}
			js, err := p.JSON()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(js), `"removedFromMesh": true`) {
				t.Fatalf("JSON does not say n9 was removed:\n%s", js)
			}
		})
	}
}
