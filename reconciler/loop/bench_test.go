package loop

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"filippo.io/age"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/reconciler/sign"
	"github.com/meshgen/meshgen/reconciler/synth"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// benchMesh is a synthetic mesh of nodes × 20 assignments over the lab's
// catalog, each node with a real age recipient so vaultd seals to it.
func benchMesh(b *testing.B, nodes int) *synth.Result {
	b.Helper()
	catalog, err := schema.LoadDir("../../examples/lab")
	if err != nil {
		b.Fatal(err)
	}
	m, err := synth.Mesh(catalog, synth.Options{Nodes: nodes, PerNode: 20})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range m.Repo.Nodes {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			b.Fatal(err)
		}
		n.Recipient = id.Recipient().String()
	}
	m.Repo.Source = "0000000000000000000000000000000000000001"
	return m
}

func benchReconciler(b *testing.B, v *vaulttest.Vault) *Reconciler {
	b.Helper()
	bare := filepath.Join(b.TempDir(), "mesh.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", bare).CombinedOutput(); err != nil {
		b.Fatalf("git init: %v\n%s", err, out)
	}
	kp, err := testKey()
	if err != nil {
		b.Fatal(err)
	}
	signer, err := sign.LoadSigner(kp.Private, []byte("pw"))
	if err != nil {
		b.Fatal(err)
	}
	r, err := New(Options{Repo: bare, Vault: v.Client, Signer: signer, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	return r
}

// BenchmarkReconcile is issue 6's "Speed": a synthetic mesh of 1,000 nodes
// × 20 assignments, with a real vaultd and a real bare repository: the
// first reconcile (every secret made and sealed, every branch written), a
// no-change reconcile (writes nothing), and a one-assignment change (writes
// only the affected branches). See reconciler/branch's
// BenchmarkWrite1000Nodes for the writer alone beside git fast-import.
func BenchmarkReconcile(b *testing.B) {
	ctx := context.Background()
	m := benchMesh(b, 1000)

	b.Run("first", func(b *testing.B) {
		defer reportCPU(b)()
		for b.Loop() {
			b.StopTimer()
			v := vaulttest.Start(b)
			r := benchReconciler(b, v)
			b.StartTimer()
			out, err := r.Reconcile(ctx, m.Repo, m.Answers)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(out.Sealed), "secrets")
			b.ReportMetric(float64(len(out.Written)), "written")
		}
	})

	v := vaulttest.Start(b)
	r := benchReconciler(b, v)
	if _, err := r.Reconcile(ctx, m.Repo, m.Answers); err != nil {
		b.Fatal(err)
	}
	b.Run("no-change", func(b *testing.B) {
		defer reportCPU(b)()
		for b.Loop() {
			out, err := r.Reconcile(ctx, m.Repo, m.Answers)
			if err != nil {
				b.Fatal(err)
			}
			if len(out.Written) != 0 || out.Objects != 0 {
				b.Fatalf("no-change reconcile wrote %d branches, %d objects", len(out.Written), out.Objects)
			}
		}
	})
	b.Run("one-assignment-change", func(b *testing.B) {
		defer reportCPU(b)()
		i := 0
		for b.Loop() {
			i++
			b.StopTimer()
			repo := *m.Repo
			repo.Assignments = append([]*schema.Assignment(nil), m.Repo.Assignments...)
			a := *repo.Assignments[len(repo.Assignments)/2]
			a.Values = maps.Clone(a.Values)
			if a.Values == nil {
				a.Values = map[string]string{}
			}
			// Placing a directory elsewhere changes only this assignment.
			a.Placements = map[string]string{"data": fmt.Sprintf("/srv/bench-%d", i)}
			repo.Assignments[len(repo.Assignments)/2] = &a
			repo.Source = fmt.Sprintf("%040d", i+1)
			b.StartTimer()
			out, err := r.Reconcile(ctx, &repo, m.Answers)
			if err != nil {
				b.Fatal(err)
			}
			if len(out.Written) == 0 || len(out.Written) > 2 {
				b.Fatalf("one-assignment change wrote %v", out.Written)
			}
		}
	})
}

func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
