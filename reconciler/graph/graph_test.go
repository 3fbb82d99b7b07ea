package graph

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/reconciler"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGolden draws the lab mesh (examples/lab) in both formats and compares
// with testdata/lab.{mmd,dot}.
func TestGolden(t *testing.T) {
	repo, err := schema.LoadDir("../../examples/lab")
	if err != nil {
		t.Fatal(err)
	}
	res, err := reconciler.Resolve(repo, reconciler.ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g := Build(res)
	for _, tt := range []struct {
		file string
		got  []byte
	}{{"lab.mmd", g.Mermaid()}, {"lab.dot", g.DOT()}} {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", tt.file)
			if *update {
				os.MkdirAll("testdata", 0o755)
				if err := os.WriteFile(path, tt.got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(tt.got, want) {
				t.Errorf("%s differs from the golden file:\n%s", tt.file, tt.got)
			}
		})
	}
}

func TestEdges(t *testing.T) {
	repo, err := schema.LoadDir("../../examples/lab")
	if err != nil {
		t.Fatal(err)
	}
	res, err := reconciler.Resolve(repo, reconciler.ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g := Build(res)
	tests := []struct {
		consumer, provider, req string
		waiting                 bool
	}{
		{"gitea@n2", "postgres@n1", "db", false},
		{"gitea@n2", "proxy@n2", "web", false},
		{"proxy@n2", "ca@n3", "ca", true},
		{"ca@n3", "vault@n1", "key-password", false},
	}
	for _, tt := range tests {
		found := false
		for _, e := range g.Edges {
			if e.Consumer == tt.consumer && e.Provider == tt.provider && e.Requirement == tt.req {
				found = true
				if (len(e.Waiting) > 0) != tt.waiting {
					t.Errorf("%s -> %s (%s): waiting %v, want %v", tt.consumer, tt.provider, tt.req, e.Waiting, tt.waiting)
				}
			}
		}
		if !found {
			t.Errorf("no edge %s -> %s (%s)", tt.consumer, tt.provider, tt.req)
		}
	}
	// Answered, the edge is no longer waiting.
	res, err = reconciler.Resolve(repo, reconciler.ResolveOptions{Answers: reconciler.Answers{"n3": {"ca/init": {"root": "ROOT"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range Build(res).Edges {
		if len(e.Waiting) > 0 {
			t.Errorf("still waiting after the answer: %+v", e)
		}
	}
	seats := map[string][]string{}
	for _, n := range g.Nodes {
		for _, a := range n.Assignments {
			seats[a.ID] = a.Seats
		}
	}
	if len(seats["vault@n1"]) != 1 || seats["vault@n1"][0] != schema.SeatVault {
		t.Errorf("vault@n1 seats %v", seats["vault@n1"])
	}
}
