package reconciler

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	schema "github.com/meshgen/meshgen/catalog-schema"
)

// TestPortsFromDeclarations: the ports read back from the declarations are
// the ones resolution assigned, and handing them back keeps every published
// port where it was when new assignments arrive.
func TestPortsFromDeclarations(t *testing.T) {
	repo, opts := loadCase(t, "lab")
	res := mustResolve(t, repo, opts)
	decls, err := Render(res, Unsealed{})
	if err != nil {
		t.Fatal(err)
	}
	if got := PortsFromDeclarations(repo, decls); !reflect.DeepEqual(got, res.State.Ports) {
		t.Fatalf("recovered %v, want %v", got, res.State.Ports)
	}

	big := goRepo()
	for i := 0; i < 300; i++ {
		name := fmt.Sprintf("app%03d", i)
		big.Modules[name] = big.Modules["app"]
		big.Assignments = append(big.Assignments, &schema.Assignment{Node: "n1", Module: name})
	}
	first := mustResolve(t, big, ResolveOptions{})
	firstDecls, err := Render(first, Unsealed{})
	if err != nil {
		t.Fatal(err)
	}
	ports := PortsFromDeclarations(big, firstDecls)
	for i := 0; i < 50; i++ { // modules sorting before every app
		name := fmt.Sprintf("aaa%03d", i)
		big.Modules[name] = big.Modules["app"]
		big.Assignments = append(big.Assignments, &schema.Assignment{Node: "n1", Module: name})
	}
	next := mustResolve(t, big, ResolveOptions{Previous: &State{Ports: ports}})
	moved := 0
	for id, ps := range first.State.Ports {
		if got, want := next.State.Ports[id]["web"], ps["web"]; got != want {
			t.Errorf("%s web moved from %d to %d", id, want, got)
		}
		if !strings.HasPrefix(id, "aaa") && next.State.Ports[id]["api"] != ps["api"] {
			moved++ // api is not published: not recovered, may move
		}
	}
	t.Logf("%d unpublished ports moved", moved)
}
