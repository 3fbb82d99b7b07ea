package test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/internal/meshtest"
	"github.com/meshgen/meshgen/reconciler/status"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// TestProviderAnswerCarriedBack: a consumer of a provider's answer (the lab's
// proxy needs the CA's root, which only the running CA knows) waits, and
// nothing depending on it is delivered, until hostd reports the answer on
// status/<provider node>; then the consumer receives it.
func TestProviderAnswerCarriedBack(t *testing.T) {
	ctx := context.Background()
	m := newMesh(t)
	r, _ := newReconciler(t, m, vaulttest.Start(t), io.Discard)
	out, err := r.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Waiting) != 1 {
		t.Fatalf("want the proxy waiting for the CA's answer, got %+v", out.Waiting)
	}
	w := out.Waiting[0]
	const root = "-----BEGIN CERTIFICATE-----MIIB-test-root-----END CERTIFICATE-----"
	provider := strings.SplitN(w.Provider, "@", 2)[1]
	consumer := strings.SplitN(w.Assignment, "@", 2)[1]
	before := meshtest.Git(t, m.Bare, "cat-file", "blob", "node/"+consumer+":declaration.json")
	if strings.Contains(before, root) {
		t.Fatal("the answer is delivered before it was reported")
	}

	// hostd on the provider's node reports the answer its step wrote.
	fields := map[string]string{}
	for _, f := range w.Fields {
		fields[f] = root
	}
	rep := declaration.Report{Mesh: "lab", Node: provider, Generation: 1, Attempted: 1, Time: time.Now(),
		Answers: map[string]map[string]string{w.Answer: fields}}
	body, _ := json.Marshal(rep)
	m.PushReport(t, provider, body)

	out, err = r.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Waiting) != 0 {
		t.Fatalf("still waiting after the answer was reported: %+v", out.Waiting)
	}
	after := meshtest.Git(t, m.Bare, "cat-file", "blob", "node/"+consumer+":declaration.json")
	if !strings.Contains(after, "MIIB-test-root") {
		t.Fatalf("node/%s does not carry the reported answer:\n%s", consumer, after)
	}
	var d declaration.Declaration
	json.Unmarshal([]byte(after), &d)
	if d.Generation != 2 {
		t.Errorf("node/%s generation %d, want 2", consumer, d.Generation)
	}

	// The provider's answer changes (it moved, or made a new root): the
	// consumer follows (ADR 0099).
	fields = map[string]string{}
	for _, f := range w.Fields {
		fields[f] = "-----BEGIN CERTIFICATE-----MIIB-second-root-----END CERTIFICATE-----"
	}
	rep.Answers = map[string]map[string]string{w.Answer: fields}
	body, _ = json.Marshal(rep)
	m.PushReport(t, provider, body)
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	after = meshtest.Git(t, m.Bare, "cat-file", "blob", "node/"+consumer+":declaration.json")
	if !strings.Contains(after, "MIIB-second-root") || strings.Contains(after, "MIIB-test-root") {
		t.Fatalf("node/%s does not follow the provider's new answer", consumer)
	}

	// status reflects the report: the provider applied generation 1.
	nodes, err := status.Read(m.Bare, status.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum := status.Summarize(nodes, status.SummaryOptions{Now: time.Now(), Interval: 30 * time.Second, StaleAfter: 3})
	for _, e := range sum.Nodes {
		switch e.Node {
		case provider:
			if e.State != status.Current || e.Applied != 1 {
				t.Errorf("provider %s: %+v", provider, e)
			}
		default:
			if e.State != status.Never {
				t.Errorf("node %s never reported but is %s", e.Node, e.State)
			}
		}
	}
}

// TestRacingReconcilers: reconcilers racing on one repository over many
// pushes lose nothing: every node's generations run down by one, and every
// branch ends at a render of the last push.
func TestRacingReconcilers(t *testing.T) {
	ctx := context.Background()
	m := newMesh(t)
	v := vaulttest.Start(t)
	r1, _ := newReconciler(t, m, v, io.Discard)
	r2, _ := newReconciler(t, m, v, io.Discard)
	var last string
	for round := range 6 {
		// n3's address moves each round: n3 and its consumers change.
		p := filepath.Join(m.Work, "nodes", "n3.yaml")
		b := readFile(t, p)
		os.WriteFile(p, []byte(strings.Replace(b, "address: 10.0.0.3", "address: 10.0.0.3"+string(rune('0'+round)), 1)), 0o644)
		last = m.Push(t, "round")
		var wg sync.WaitGroup
		errs := make([]error, 2)
		wg.Go(func() { _, errs[0] = r1.Once(ctx) })
		wg.Go(func() { _, errs[1] = r2.Once(ctx) })
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	for node := range m.IDs {
		out := meshtest.Git(t, m.Bare, "log", "--first-parent", "--format=%H", "node/"+node)
		commits := strings.Fields(out)
		for i, c := range commits {
			var d declaration.Declaration
			json.Unmarshal([]byte(meshtest.Git(t, m.Bare, "cat-file", "blob", c+":declaration.json")), &d)
			if want := uint64(len(commits) - i); d.Generation != want {
				t.Fatalf("node/%s: generation %d at depth %d, want %d", node, d.Generation, i, want)
			}
			if i == 0 && node == "n3" && d.Source != last {
				t.Errorf("node/n3 ends at source %s, want the last push %s", d.Source, last)
			}
		}
	}
}

func readFile(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
