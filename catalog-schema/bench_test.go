package schema

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshgen/meshgen/internal/benchcpu"
)

// BenchmarkLoadLab reads and checks the example mesh from memory.
func BenchmarkLoadLab(b *testing.B) {
	fsys := unarchive(archive(b, "../examples/lab"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(fsys); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadBroken reads a repository with many problems.
func BenchmarkLoadBroken(b *testing.B) {
	fsys := os.DirFS("testdata/broken/several-mistakes")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(fsys); err == nil {
			b.Fatal("no problems")
		}
	}
}

// synthGit commits a mesh of nodes × perNode assignments over the example
// catalog to a git repository (packed, as a server keeps it) and returns the
// repository's path. The modules other than vault, mosquitto and ca are
// spread over every node, then copies of gitea fill each node up, each with
// its own public name. (reconciler/synth makes richer meshes; the catalog
// cannot import it.)
func synthGit(tb testing.TB, nodes, perNode int) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "mesh")
	copyTree(tb, "../examples/lab", dir)
	for _, sub := range []string{"nodes", "assignments"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			tb.Fatal(err)
		}
	}
	gitea, err := os.ReadFile(filepath.Join(dir, "catalog/modules/gitea/module.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	write := func(name, data string) {
		tb.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	spread := []string{"postgres", "proxy"}
	copies := perNode - len(spread)
	for k := 1; k < copies; k++ {
		write(fmt.Sprintf("catalog/modules/gitea-v%d/module.yaml", k), string(gitea))
	}
	var recipients []string // the lab's, one per node in turn
	for _, n := range []string{"n1", "n2", "n3"} {
		data, err := os.ReadFile(filepath.Join("../examples/lab/nodes", n+".yaml"))
		if err != nil {
			tb.Fatal(err)
		}
		recipients = append(recipients, recipientOf(tb, string(data)))
	}
	for i := range nodes {
		node := fmt.Sprintf("n%04d", i)
		write("nodes/"+node+".yaml", fmt.Sprintf("recipient: %s\nfacts:\n  address: 10.1.%d.%d\n",
			recipients[i%len(recipients)], i>>8&255, i&255))
		if i == 0 {
			write("assignments/"+node+"/vault.yaml", "seats: [mesh-vault]\nplacements:\n  tools: /usr/local/lib/meshgen\n")
			write("assignments/"+node+"/mosquitto.yaml", "seats: [mesh-broker]\n")
			write("assignments/"+node+"/ca.yaml", "seats: [mesh-ca]\n")
		}
		for _, m := range spread {
			write("assignments/"+node+"/"+m+".yaml", "")
		}
		for k := range copies {
			mod := "gitea"
			if k > 0 {
				mod = fmt.Sprintf("gitea-v%d", k)
			}
			write("assignments/"+node+"/"+mod+".yaml", fmt.Sprintf("values:\n  public-name: %s.%s.synth.example\n", mod, node))
		}
	}
	runGit(tb, dir, "init", "-q", "-b", "main")
	runGit(tb, dir, "add", "-A")
	runGit(tb, dir, "-c", "gc.auto=0", "commit", "-q", "-m", "synthetic mesh")
	runGit(tb, dir, "gc", "-q")
	return dir
}

// recipientOf picks the recipient out of a node file.
func recipientOf(tb testing.TB, node string) string {
	tb.Helper()
	for _, line := range strings.Split(node, "\n") {
		if r, ok := strings.CutPrefix(line, "recipient: "); ok {
			return r
		}
	}
	tb.Fatalf("no recipient in %q", node)
	return ""
}

// BenchmarkLoadRef reads and checks a synthetic mesh of 1,000 nodes × 20
// assignments (21,000 files and more) from a commit of a packed git
// repository, as `meshgen plan` and the reconciler do. It reports the CPU
// time of every thread per read as cpu-ns/op.
func BenchmarkLoadRef(b *testing.B) {
	repo := synthGit(b, 1000, 20)
	r, err := LoadRef(repo, "main")
	if err != nil {
		b.Fatal(err)
	}
	if len(r.Nodes) != 1000 || len(r.Assignments) != 1000*20+3 {
		b.Fatalf("read %d nodes, %d assignments; want 1000 and %d", len(r.Nodes), len(r.Assignments), 1000*20+3)
	}
	b.ReportAllocs()
	b.ResetTimer()
	defer benchcpu.Report(b)()
	for b.Loop() {
		if _, err := LoadRef(repo, "main"); err != nil {
			b.Fatal(err)
		}
	}
}
