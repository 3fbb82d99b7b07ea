package loop

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/internal/meshtest"
	"github.com/meshgen/meshgen/reconciler/branch"
	"github.com/meshgen/meshgen/reconciler/sign"
	"github.com/meshgen/meshgen/reconciler/sign/signtest"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// enrolN4 adds node n4 to the lab, running a second postgres (which reads a
// secret), and returns the files that make it a node of the mesh.
func enrolN4(t *testing.T, m *meshtest.Mesh, recipient string) []string {
	t.Helper()
	files := map[string]string{
		"nodes/n4.yaml":                "recipient: " + recipient + "\nfacts:\n  address: 10.0.0.4\n",
		"assignments/n4/postgres.yaml": "# a second database server\n{}\n",
	}
	var paths []string
	for p, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(m.Work, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(m.Work, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// decl reads the declaration on node/<node> of m.
func decl(t *testing.T, m *meshtest.Mesh, node string) (*declaration.Declaration, string) {
	t.Helper()
	body := meshtest.Git(t, m.Bare, "cat-file", "blob", "node/"+node+":"+branch.DeclarationFile)
	d, err := declaration.Parse([]byte(body))
	if err != nil {
		t.Fatalf("node/%s: %v", node, err)
	}
	return d, body
}

// TestRemovedNodeIsEmptied: a node removed from the mesh (its nodes/<n>.yaml
// and assignments gone) gets one final commit on its branch: a signed
// declaration with no resources and no sealed file, the generation raised
// by one, its source the removing commit, and a message saying so. Further
// reconciles write nothing for it; enrolled again, it continues its
// generations upward.
func TestRemovedNodeIsEmptied(t *testing.T) {
	ctx := context.Background()
	m := newMesh(t)
	var log strings.Builder
	r, pub := newReconciler(t, m, &log)
	paths := enrolN4(t, m, vaulttest.NewNode(t).Recipient().String())
	m.Push(t, "enrol n4")
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	d, _ := decl(t, m, "n4")
	if d.Generation != 1 || len(d.Resources) == 0 || !strings.Contains(meshtest.Git(t, m.Bare, "ls-tree", "-r", "--name-only", "node/n4"), branch.SecretsDir+"/") {
		t.Fatalf("n4 before its removal: generation %d, %d resources; want generation 1 with resources and secrets", d.Generation, len(d.Resources))
	}

	meshtest.Git(t, m.Work, "rm", "-q", "-r", "nodes/n4.yaml", "assignments/n4")
	removal := m.Push(t, "n4 leaves the mesh")
	before := strings.TrimSpace(meshtest.Git(t, m.Bare, "rev-parse", "node/n4"))
	out, err := r.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Removed, []string{"n4"}) || slices.Contains(out.Written, "n4") {
		t.Fatalf("removing n4: removed %v, written %v; want n4 removed", out.Removed, out.Written)
	}
	if got := meshtest.Git(t, m.Bare, "rev-list", before+"..node/n4"); strings.Count(got, "\n") != 1 {
		t.Fatalf("want one commit on node/n4 for the removal, got:\n%s", got)
	}
	d, body := decl(t, m, "n4")
	if d.Generation != 2 || d.Source != removal || len(d.Resources) != 0 || d.Node != "n4" || d.Mesh != "lab" {
		t.Fatalf("n4's final declaration: %s", body)
	}
	sig := meshtest.Git(t, m.Bare, "cat-file", "blob", "node/n4:"+branch.SignatureFile)
	if err := sign.Verify(pub, []byte(body), []byte(sig)); err != nil {
		t.Fatalf("n4's final declaration: %v", err)
	}
	if files := meshtest.Git(t, m.Bare, "ls-tree", "-r", "--name-only", "node/n4"); strings.Contains(files, branch.SecretsDir+"/") {
		t.Fatalf("node/n4 still holds sealed files:\n%s", files)
	}
	if msg := meshtest.Git(t, m.Bare, "log", "-1", "--format=%B", "node/n4"); !strings.Contains(msg, "Removed from the mesh:") {
		t.Fatalf("the removal's commit message does not say so:\n%s", msg)
	}
	if !strings.Contains(log.String(), `"removed":["n4"]`) {
		t.Fatalf("the log line does not name the removed node:\n%s", log.String())
	}

	// Nothing more is written for it: not when nothing changed, and not
	// when main moves for another reason.
	tip := meshtest.Git(t, m.Bare, "rev-parse", "node/n4")
	for _, push := range []bool{false, true} {
		if push {
			m.Push(t, "something else")
		}
		out, err = r.Once(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Removed) != 0 || slices.Contains(out.Written, "n4") || !slices.Contains(out.Unchanged, "n4") ||
			meshtest.Git(t, m.Bare, "rev-parse", "node/n4") != tip {
			t.Fatalf("reconcile after the removal (push %v): removed %v, written %v; want n4 unchanged", push, out.Removed, out.Written)
		}
	}

	// Enrolled again, the node continues upward: hostd refuses a
	// generation lower than the one it applied.
	enrolN4(t, m, vaulttest.NewNode(t).Recipient().String())
	meshtest.Git(t, m.Work, "add", paths[0], paths[1])
	m.Push(t, "n4 is back")
	out, err = r.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(out.Written, "n4") || len(out.Removed) != 0 {
		t.Fatalf("enrolling n4 again: written %v, removed %v", out.Written, out.Removed)
	}
	if d, _ := decl(t, m, "n4"); d.Generation != 3 || len(d.Resources) == 0 {
		t.Fatalf("n4 enrolled again: generation %d, %d resources; want 3 and its resources back", d.Generation, len(d.Resources))
	}
	if msg := meshtest.Git(t, m.Bare, "log", "-1", "--format=%B", "node/n4"); strings.Contains(msg, "Removed from the mesh") {
		t.Fatalf("n4 enrolled again is still said removed:\n%s", msg)
	}
}

// TestRemovedNodeOtherPaths: the removal is written the same way on a git
// server (through the cache, the branch pushed with compare-and-swap) and by
// Reconcile, which observes nothing and reads the node branches itself.
func TestRemovedNodeOtherPaths(t *testing.T) {
	for _, how := range []string{"remote", "reconcile"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			m := newMesh(t)
			enrolN4(t, m, vaulttest.NewNode(t).Recipient().String())
			m.Push(t, "enrol n4")
			signer, _ := signtest.Signer(t)
			opts := Options{Repo: m.Bare, Vault: vaulttest.Start(t).Client, Signer: signer, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if how == "remote" {
				opts.Repo = meshtest.GitDaemon(t, filepath.Dir(m.Bare)) + filepath.Base(m.Bare)
				opts.CacheDir = filepath.Join(t.TempDir(), "cache")
			}
			r, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := r.Once(ctx); err != nil {
				t.Fatal(err)
			}
			meshtest.Git(t, m.Work, "rm", "-q", "-r", "nodes/n4.yaml", "assignments/n4")
			m.Push(t, "n4 leaves the mesh")
			var out *Outcome
			if how == "remote" {
				out, err = r.Once(ctx)
			} else {
				repo, lerr := schema.LoadRef(m.Bare, branch.MainRef)
				if lerr != nil {
					t.Fatal(lerr)
				}
				out, err = r.Reconcile(ctx, repo, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out.Removed, []string{"n4"}) {
				t.Fatalf("removed %v, written %v; want n4 removed", out.Removed, out.Written)
			}
			if d, body := decl(t, m, "n4"); d.Generation != 2 || len(d.Resources) != 0 {
				t.Fatalf("node/n4 on the server: %s", body)
			}
		})
	}
}
