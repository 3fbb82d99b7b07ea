package status

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/reconciler/branch"
	"github.com/meshgen/meshgen/reconciler/sign/signtest"
)

// TestRemovedNode: a node whose branch holds the final declaration the
// reconciler writes for a node removed from the mesh is listed as removed,
// not stale or failed, whether or not its hostd applied that declaration,
// and does not make the summary fail.
func TestRemovedNode(t *testing.T) {
	ctx := context.Background()
	bare := filepath.Join(t.TempDir(), "mesh.git")
	gitRun(t, "", "init", "-q", "--bare", bare)
	repo, err := branch.OpenLocal(bare)
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := signtest.Signer(t)
	node := func(name string, removed bool) *branch.Node {
		d := &declaration.Declaration{Format: declaration.Version, Mesh: "lab", Node: name, Resources: []declaration.Resource{}}
		if !removed {
			d.Resources = append(d.Resources, declaration.Resource{ID: "web/conf", Kind: declaration.KindFile, Module: "web",
				File: &declaration.File{Path: "/srv/web.conf", Mode: "0644", Content: "x"}})
		}
		return &branch.Node{Declaration: d, Removed: removed}
	}
	opts := branch.WriteOptions{Source: strings.Repeat("a", 40), Signer: signer}
	if _, err := repo.Write(ctx, map[string]*branch.Node{"n1": node("n1", false), "n7": node("n7", false)}, opts); err != nil {
		t.Fatal(err)
	}
	opts.Source = strings.Repeat("b", 40)
	if _, err := repo.Write(ctx, map[string]*branch.Node{"n7": node("n7", true)}, opts); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	pushFile(t, bare, "status/n1", declaration.ReportFile, declaration.Report{Node: "n1", Generation: 1, Attempted: 1, Time: now})
	// n7 reported long ago, before its removal: it would be stale.
	pushFile(t, bare, "status/n7", declaration.ReportFile, declaration.Report{Node: "n7", Generation: 1, Attempted: 1, Time: now.Add(-time.Hour)})

	for _, tt := range []struct {
		applied uint64
		line    string
	}{
		{1, "n7: removed from the mesh; its hostd has not applied the empty generation 2 yet"},
		{2, "n7: removed from the mesh; its containers are gone (generation 2 applied)"},
	} {
		if tt.applied == 2 {
			pushFile(t, bare, "status/n7", declaration.ReportFile, declaration.Report{Node: "n7", Generation: 2, Attempted: 2, Time: now.Add(-time.Hour)})
		}
		nodes, err := Read(bare, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sum := Summarize(nodes, SummaryOptions{Now: now, Interval: 30 * time.Second, StaleAfter: 3})
		if len(sum.Nodes) != 2 || sum.Nodes[0].State != Current || sum.Nodes[1].State != Removed || sum.Nodes[1].Latest != 2 {
			t.Fatalf("applied %d: %+v", tt.applied, sum.Nodes)
		}
		if !sum.OK() || sum.Removed != 1 || sum.Stale != 0 || sum.Failed != 0 {
			t.Fatalf("applied %d: a removed node fails the summary: %+v", tt.applied, sum)
		}
		var text strings.Builder
		if err := sum.WriteText(&text, now); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text.String(), tt.line+"\n") || !strings.Contains(text.String(), "n7    removed") {
			t.Fatalf("applied %d: text lacks %q:\n%s", tt.applied, tt.line, text.String())
		}
	}
}
