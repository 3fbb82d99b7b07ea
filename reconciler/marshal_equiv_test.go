package reconciler_test

import (
	"bytes"
	"encoding/json"
	"testing"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/reconciler"
)

// canonicalBefore is how declaration.Marshal encoded before it wrote its bytes
// itself (json.Encoder with SetIndent): the bytes it must still give.
func canonicalBefore(d *declaration.Declaration) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(d)
	return buf.Bytes(), err
}

// declaration.Marshal gives the bytes it gave before on every node the
// reconciler renders, for examples/lab (waiting for its answers) and for a
// synthetic mesh spreading its catalog (answered).
func TestMarshalSameBytesOnRenderedDeclarations(t *testing.T) {
	lab, err := schema.LoadDir("../examples/lab")
	if err != nil {
		t.Fatal(err)
	}
	m := synthMesh(t, 50, 20)
	for _, tc := range []struct {
		name string
		repo *schema.Repo
		opts reconciler.ResolveOptions
	}{
		{"examples/lab", lab, reconciler.ResolveOptions{}},
		{"synthetic mesh", m.Repo, reconciler.ResolveOptions{Answers: m.Answers}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := reconciler.Resolve(tc.repo, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			decls, err := reconciler.Render(res, reconciler.Unsealed{})
			if err != nil {
				t.Fatal(err)
			}
			resources := 0
			for node, d := range decls {
				reconciler.Stamp(d, 3, "0123456789abcdef0123456789abcdef01234567")
				want, err := canonicalBefore(d)
				if err != nil {
					t.Fatalf("%s: %v", node, err)
				}
				got, err := declaration.Marshal(d)
				if err != nil {
					t.Fatalf("%s: %v", node, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: Marshal gives other bytes than before:\n%s\nwant\n%s", node, got, want)
				}
				resources += len(d.Resources)
			}
			if len(decls) == 0 || resources == 0 {
				t.Fatalf("%d declarations of %d resources", len(decls), resources)
			}
			t.Logf("%d declarations, %d resources", len(decls), resources)
		})
	}
}
