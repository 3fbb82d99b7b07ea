package reconciler

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/rogpeppe/go-internal/txtar"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/hostd/declaration"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// caseOptions is a case's opts.json: what the last reconcile decided and
// what providers answered.
type caseOptions struct {
	Previous *State  `json:"previous"`
	Answers  Answers `json:"answers"`
	// Undelivered names operator secrets the vault has not been given.
	Undelivered map[string]bool `json:"undelivered"`
}

// loadCase reads testdata/catalog.txtar overlaid with testdata/resolve/<name>.txtar
// as a mesh repository (with the real loader), and the case's opts.json.
func loadCase(t testing.TB, name string) (*schema.Repo, ResolveOptions) {
	t.Helper()
	fsys := fstest.MapFS{}
	var opts caseOptions
	for _, file := range []string{"testdata/catalog.txtar", filepath.Join("testdata/resolve", name+".txtar")} {
		ar, err := txtar.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range ar.Files {
			switch {
			case f.Name == "opts.json":
				if err := json.Unmarshal(f.Data, &opts); err != nil {
					t.Fatalf("%s: opts.json: %v", file, err)
				}
			case len(bytes.TrimSpace(f.Data)) == 0 && strings.HasSuffix(f.Name, ".yaml") && !strings.HasPrefix(f.Name, "assignments/"):
				delete(fsys, f.Name) // an empty file removes one of the catalog's
			default:
				fsys[f.Name] = &fstest.MapFile{Data: f.Data, Mode: 0o644}
			}
		}
	}
	repo, err := schema.Load(fsys)
	if err != nil {
		t.Fatalf("load case %s: %v", name, err)
	}
	return repo, ResolveOptions(opts)
}

// TestResolveCases resolves and renders every case under testdata/resolve
// and compares the result with its golden file, <case>.golden: the
// resolution (or every reason it was refused), then each node's declaration.
// Run with -update to rewrite the golden files, then read the diff.
func TestResolveCases(t *testing.T) {
	files, err := filepath.Glob("testdata/resolve/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases under testdata/resolve: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		t.Run(name, func(t *testing.T) {
			repo, opts := loadCase(t, name)
			got := describe(t, repo, opts)
			golden := strings.TrimSuffix(file, ".txtar") + ".golden"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from what resolution gives now:\n%s", golden, lineDiff(string(want), string(got)))
			}
		})
	}
}

// describe resolves and renders repo and writes both as a txtar archive.
func describe(t testing.TB, repo *schema.Repo, opts ResolveOptions) []byte {
	t.Helper()
	out, err := snapshot(repo, opts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// snapshot resolves and renders repo and writes the result as a txtar
// archive: every reason it was refused, or the resolution and each node's
// declaration as hostd would read it.
func snapshot(repo *schema.Repo, opts ResolveOptions) ([]byte, error) {
	res, err := Resolve(repo, opts)
	ar := &txtar.Archive{}
	var ref *Refusal
	if err != nil {
		if !errors.As(err, &ref) {
			return nil, fmt.Errorf("resolve returned %T, not a *Refusal: %w", err, err)
		}
		var b strings.Builder
		for _, r := range ref.Reasons {
			fmt.Fprintf(&b, "%s: %s\n", r.Kind, r)
			if r.Hint != "" {
				fmt.Fprintf(&b, "  hint: %s\n", r.Hint)
			}
			if len(r.Candidates) > 0 {
				fmt.Fprintf(&b, "  candidates: %s\n", strings.Join(r.Candidates, ", "))
			}
		}
		ar.Files = append(ar.Files, txtar.File{Name: "refused", Data: []byte(b.String())})
		if _, err := Render(res, Unsealed{}); !errors.Is(err, ErrRefused) {
			return nil, fmt.Errorf("render of a refused resolution: got %v, want ErrRefused", err)
		}
		return txtar.Format(ar), nil
	}
	ar.Files = append(ar.Files, txtar.File{Name: "resolution", Data: []byte(dumpResolution(res))})
	decls, err := Render(res, Unsealed{})
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	for _, n := range res.Nodes {
		data, err := declaration.Marshal(decls[n])
		if err != nil {
			return nil, fmt.Errorf("marshal %s: %w", n, err)
		}
		if _, err := declaration.Parse(data); err != nil {
			return nil, fmt.Errorf("hostd would refuse node %s's declaration: %w", n, err)
		}
		ar.Files = append(ar.Files, txtar.File{Name: "node/" + n + ".json", Data: data})
	}
	return txtar.Format(ar), nil
}

// dumpResolution writes a resolution as text, in a fixed order.
func dumpResolution(res *Resolution) string {
	var b strings.Builder
	for _, a := range res.Assignments {
		fmt.Fprintf(&b, "%s (root %s, login %s, name %s)\n", a.ID, a.Root, a.Identity.Login, a.Identity.Name)
		for _, q := range a.Definition.Requires {
			fields := map[string]Value{}
			for ref, v := range a.Values {
				if ref.Requirement == q.Name {
					fields[ref.Field] = v
				}
			}
			var parts []string
			for _, k := range sortedKeys(fields) {
				v := fields[k]
				if v.Secret != "" {
					parts = append(parts, fmt.Sprintf("%s=secret(%s)", k, v.Secret))
				} else {
					parts = append(parts, fmt.Sprintf("%s=%q", k, v.Text))
				}
			}
			from := ""
			if p := a.Providers[q.Name]; p != "" {
				from = " from " + p
			}
			if w, ok := a.Waiting[q.Name]; ok {
				parts = append(parts, fmt.Sprintf("WAITING for %s (%s) to answer %s", w.Provider, w.Answer, strings.Join(w.Fields, ", ")))
			}
			fmt.Fprintf(&b, "  %s [%s]%s: %s\n", q.Name, q.Provider, from, strings.Join(parts, " "))
		}
		for _, s := range a.Serves {
			fmt.Fprintf(&b, "  serves %s %s (%s) secret %q\n", s.Consumer, s.Requirement, s.Contract, s.Secret)
		}
		if len(a.Skipped) > 0 {
			fmt.Fprintf(&b, "  skipped: %s\n", strings.Join(a.Skipped, ", "))
		}
	}
	b.WriteString("secrets:\n")
	for _, s := range res.Secrets {
		var to []string
		for _, r := range s.Recipients {
			to = append(to, fmt.Sprintf("%s:%s(%s)", r.Node, r.Role, r.Assignment))
		}
		fmt.Fprintf(&b, "  %s [%s] -> %s\n", s.Name, s.Rotation, strings.Join(to, " "))
	}
	b.WriteString("waiting:\n")
	for _, w := range res.Waiting {
		fmt.Fprintf(&b, "  %s %s on %s\n", w.Assignment, w.Requirement, w.Provider)
	}
	state, _ := json.Marshal(res.State)
	fmt.Fprintf(&b, "state: %s\n", state)
	return b.String()
}

// lineDiff shows the lines of want and got that differ, with line numbers.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	n := max(len(w), len(g))
	shown := 0
	for i := 0; i < n && shown < 40; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want %s\n  got  %s\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}
