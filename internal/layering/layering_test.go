// Package layering holds the test that keeps the roles apart: DESIGN.md's
// table of who may import whom, checked against `go list`.
package layering

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/meshgen/meshgen/"

// rules says, for each role (a package path prefix below the module), which
// other roles' packages it must never import, directly or indirectly.
var rules = []struct {
	role  string
	never []string
}{
	{"catalog-schema", []string{"reconciler", "vaultd", "hostd", "genesis"}},
	{"hostd/declaration", []string{"reconciler", "vaultd", "catalog-schema", "genesis", "hostd/"}},
	// A node never reads the catalog.
	{"hostd", []string{"reconciler", "vaultd", "catalog-schema", "genesis"}},
	{"vaultd", []string{"reconciler", "hostd", "catalog-schema", "genesis"}},
	// The reconciler sees hostd only through the wire format, and vaultd
	// only through its client.
	{"reconciler", []string{"hostd/!declaration", "vaultd/!client", "genesis"}},
}

// forbidden lists packages no role may import: cosign's own pkg/signature
// drags Kubernetes into every binary.
var forbidden = []string{"github.com/sigstore/cosign/v2/pkg/signature", "k8s.io/"}

type pkg struct {
	ImportPath string
	Deps       []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json=ImportPath,Deps", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found only %d packages; is the module path %q right?", len(pkgs), module)
	}
	return pkgs
}

// violates reports whether dep (relative to the module) falls under rule,
// where "a/!b" means "below a, except below a/b".
func violates(dep, rule string) bool {
	base, except, hasExcept := strings.Cut(rule, "!")
	if !under(dep, strings.TrimSuffix(base, "/")) {
		return false
	}
	return !hasExcept || !under(dep, base+except)
}

func under(p, prefix string) bool { return p == prefix || strings.HasPrefix(p, prefix+"/") }

func TestRolesImportOnlyWhatTheyMay(t *testing.T) {
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(p.ImportPath, module)
		for _, r := range rules {
			if !under(rel, r.role) || (r.role == "hostd" && under(rel, "hostd/declaration")) {
				continue
			}
			for _, d := range p.Deps {
				drel, ok := strings.CutPrefix(d, module)
				if !ok {
					continue
				}
				for _, never := range r.never {
					if violates(drel, never) {
						t.Errorf("%s imports %s: role %s must not (DESIGN.md, who may import whom)", rel, drel, r.role)
					}
				}
			}
		}
		if rel == "hostd/declaration" {
			// Every role imports the wire format: it stays on the standard library.
			for _, d := range p.Deps {
				if first, _, _ := strings.Cut(d, "/"); strings.Contains(first, ".") {
					t.Errorf("hostd/declaration imports %s: it may import only the standard library", d)
				}
			}
		}
		for _, d := range p.Deps {
			for _, f := range forbidden {
				if strings.HasPrefix(d, f) {
					t.Errorf("%s imports %s, which no package may", rel, d)
				}
			}
		}
	}
}

func TestViolates(t *testing.T) {
	tests := []struct {
		dep, rule string
		want      bool
	}{
		{"hostd", "hostd/!declaration", true},
		{"hostd/podman", "hostd/!declaration", true},
		{"hostd/declaration", "hostd/!declaration", false},
		{"vaultd/client", "vaultd/!client", false},
		{"vaultd/internal/store", "vaultd/!client", true},
		{"reconciler/branch", "reconciler", true},
		{"reconcilers", "reconciler", false},
		{"hostd/declaration", "hostd/", true},
	}
	for _, tt := range tests {
		if got := violates(tt.dep, tt.rule); got != tt.want {
			t.Errorf("violates(%q, %q) = %v, want %v", tt.dep, tt.rule, got, tt.want)
		}
	}
}
