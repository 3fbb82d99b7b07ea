package status

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshgen/meshgen/hostd/declaration"
)

func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=h", "GIT_AUTHOR_EMAIL=h@h", "GIT_COMMITTER_NAME=h", "GIT_COMMITTER_EMAIL=h@h")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// pushFile commits one file as the whole content of branch, the way
// hostd pushes status/<node> and the reconciler node/<node>.
func pushFile(t *testing.T, bare, branch, name string, v any) {
	t.Helper()
	work := t.TempDir()
	gitRun(t, work, "init", "-q", "-b", "x")
	b, _ := json.MarshalIndent(v, "", "  ")
	os.WriteFile(filepath.Join(work, name), b, 0o644)
	gitRun(t, work, "add", name)
	gitRun(t, work, "commit", "-q", "-m", branch)
	gitRun(t, work, "push", "-q", "-f", bare, "x:refs/heads/"+branch)
}

func TestReadAndSummarize(t *testing.T) {
	bare := filepath.Join(t.TempDir(), "mesh.git")
	gitRun(t, "", "init", "-q", "--bare", bare)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for node, gen := range map[string]uint64{"n1": 4, "n2": 7, "n3": 2, "n4": 1, "n5": 3} {
		pushFile(t, bare, "node/"+node, "declaration.json", map[string]any{"format": 1, "mesh": "lab", "node": node, "generation": gen, "source": "abc"})
	}
	reports := map[string]declaration.Report{
		"n1": {Node: "n1", Generation: 4, Attempted: 4, Time: now.Add(-time.Minute),
			Resources: []declaration.Result{{ID: "web/app", Outcome: declaration.Unchanged}}},
		"n2": {Node: "n2", Generation: 6, Attempted: 7, Time: now.Add(-time.Minute), Resources: []declaration.Result{
			{ID: "db/init", Outcome: declaration.Failed, Reason: "exit status 1"},
			{ID: "db/server", Outcome: declaration.Gated}},
			LeftFiles: []declaration.LeftFile{{Path: "/srv/db/.mesh/consumers/app__n1.db.password", Reason: "kept until an apply succeeds"}}},
		"n3": {Node: "n3", Generation: 2, Attempted: 2, Time: now.Add(-time.Hour)},
		"n4": {Node: "n4", Generation: 0, Attempted: 1, Time: now.Add(-time.Minute), Refused: "signature does not verify"},
		"n5": {Node: "n5", Generation: 2, Attempted: 2, Time: now.Add(-time.Minute)},
	}
	for node, rep := range reports {
		pushFile(t, bare, "status/"+node, declaration.ReportFile, rep)
	}
	pushFile(t, bare, "node/n6", "declaration.json", map[string]any{"generation": 1, "source": "abc"})

	nodes, err := Read(bare, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum := Summarize(nodes, SummaryOptions{Now: now, Interval: 30 * time.Second, StaleAfter: 4})
	want := map[string]State{"n1": Current, "n2": Failed, "n3": Stale, "n4": Refused, "n5": Behind, "n6": Never}
	if len(sum.Nodes) != len(want) {
		t.Fatalf("%d nodes, want %d: %+v", len(sum.Nodes), len(want), sum.Nodes)
	}
	for _, e := range sum.Nodes {
		if e.State != want[e.Node] {
			t.Errorf("node %s: state %s, want %s", e.Node, e.State, want[e.Node])
		}
	}
	n2 := sum.Nodes[1]
	if n2.Applied != 6 || n2.Latest != 7 || len(n2.Failures) != 1 || n2.Failures[0].Reason != "exit status 1" || len(n2.Gated) != 1 {
		t.Errorf("n2: %+v", n2)
	}
	if sum.OK() || sum.Failed != 2 || sum.Stale != 2 {
		t.Errorf("summary: failed %d stale %d ok %v", sum.Failed, sum.Stale, sum.OK())
	}
	var text strings.Builder
	if err := sum.WriteText(&text, now); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"n2: db/init failed: exit status 1", "n2: gated: db/server",
		"n2: still holds /srv/db/.mesh/consumers/app__n1.db.password, a secret no longer declared: kept until an apply succeeds", "n4: refused generation 1: signature does not verify", "n3    stale"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("text output lacks %q:\n%s", s, text.String())
		}
	}
	// All current: OK.
	ok := Summarize(nodes[:1], SummaryOptions{Now: now, Interval: 30 * time.Second, StaleAfter: 4})
	if !ok.OK() {
		t.Errorf("a current node is not OK: %+v", ok)
	}
}
