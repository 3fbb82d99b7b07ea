package schema_test

import (
	"bytes"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/meshgen/meshgen/catalog-schema/internal/jsonschemagen"
)

// TestJSONSchemaUpToDate regenerates the schema files from the Go types and
// compares them byte for byte with those committed: the schema cannot drift
// from the loader. Run `go generate ./catalog-schema/` after changing
// types.go.
func TestJSONSchemaUpToDate(t *testing.T) {
	files, err := jsonschemagen.Generate(".")
	if err != nil {
		t.Fatal(err)
	}
	committed, err := filepath.Glob("jsonschema/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(committed) != len(files) {
		t.Errorf("jsonschema/ holds %d files; the generator makes %d", len(committed), len(files))
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join("jsonschema", name))
		if err != nil {
			t.Errorf("%v (run go generate ./catalog-schema/)", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("jsonschema/%s differs from what types.go generates: run go generate ./catalog-schema/", name)
		}
	}
}

// kindOf says which schema a repository file is checked against.
func kindOf(rel string) string {
	switch {
	case rel == "mesh.yaml":
		return "mesh.json"
	case strings.HasPrefix(rel, "nodes/"):
		return "node.json"
	case strings.HasPrefix(rel, "catalog/contracts/"):
		return "contract.json"
	case strings.HasPrefix(rel, "catalog/modules/") && path.Base(rel) == "module.yaml":
		return "module.json"
	case strings.HasPrefix(rel, "assignments/"):
		return "assignment.json"
	}
	return ""
}

// compile compiles the committed schema files.
func compile(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	out := map[string]*jsonschema.Schema{}
	for _, k := range jsonschemagen.Kinds {
		f, err := os.Open(filepath.Join("jsonschema", k.File))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", k.File, err)
		}
		if err := c.AddResource(jsonschemagen.BaseURL+k.File, doc); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range jsonschemagen.Kinds {
		s, err := c.Compile(jsonschemagen.BaseURL + k.File)
		if err != nil {
			t.Fatalf("compile %s: %v", k.File, err)
		}
		out[k.File] = s
	}
	return out
}

// validate checks one YAML file against its schema.
func validate(t *testing.T, s *jsonschema.Schema, file string) error {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(bytes.TrimSpace(stripComments(data))) == 0 {
		data = []byte("{}")
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return s.Validate(doc)
}

// stripComments drops comment lines, to tell an empty file.
func stripComments(data []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(data, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l...)
		}
	}
	return out
}

// repoFiles lists a repository's YAML files with their schema.
func repoFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if k := kindOf(filepath.ToSlash(rel)); k != "" {
			files[p] = k
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestJSONSchemaAcceptsGoodRepositories validates every file of the example
// mesh and of the good testdata against its schema.
func TestJSONSchemaAcceptsGoodRepositories(t *testing.T) {
	schemas := compile(t)
	dirs, _ := filepath.Glob("testdata/good/*")
	dirs = append(dirs, "../examples/lab")
	n := 0
	for _, dir := range dirs {
		for file, kind := range repoFiles(t, dir) {
			n++
			if err := validate(t, schemas[kind], file); err != nil {
				t.Errorf("%s against %s:\n%v", file, kind, err)
			}
		}
	}
	if n < 20 {
		t.Errorf("validated %d files; the lab alone has more", n)
	}
}

// TestJSONSchemaRefuses checks the schema is not vacuous: files the loader
// refuses for their shape are refused by the schema too.
func TestJSONSchemaRefuses(t *testing.T) {
	schemas := compile(t)
	for _, file := range []string{
		"testdata/broken/unknown-field/catalog/modules/web/module.yaml",
		"testdata/broken/unknown-field/assignments/n1/web.yaml",
		"testdata/broken/runonce-not-boolean/catalog/modules/job/module.yaml",
		"testdata/broken/fifth-provider/catalog/modules/web/module.yaml",
		"testdata/broken/image-not-pinned/catalog/modules/web/module.yaml",
		"testdata/broken/wrong-types/catalog/contracts/db.yaml",
		"testdata/broken/node-bad-recipient/nodes/n1.yaml",
		"testdata/broken/node-missing-recipient/nodes/n1.yaml",
		"testdata/broken/resource-kinds/catalog/modules/web/module.yaml",
		"testdata/broken/mesh-missing-name/mesh.yaml",
	} {
		rel := strings.SplitN(file, "/", 4)[3]
		if err := validate(t, schemas[kindOf(rel)], file); err == nil {
			t.Errorf("%s: the schema accepts what the loader refuses", file)
		}
	}
}

// TestExamplesNameTheirSchema checks each example file starts with the
// yaml-language-server line naming its schema by a path that exists.
func TestExamplesNameTheirSchema(t *testing.T) {
	const prefix = "# yaml-language-server: $schema="
	kinds := []string{}
	for file, kind := range repoFiles(t, "../examples/lab") {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(data), "\n")
		ref, ok := strings.CutPrefix(first, prefix)
		if !ok {
			t.Errorf("%s: the first line is not %q", file, prefix+"...")
			continue
		}
		if path.Base(ref) != kind {
			t.Errorf("%s names schema %s; want %s", file, ref, kind)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(file), ref)); err != nil {
			t.Errorf("%s: schema path %s: %v", file, ref, err)
		}
		kinds = append(kinds, kind)
	}
	for _, k := range jsonschemagen.Kinds {
		if !slices.Contains(kinds, k.File) {
			t.Errorf("no example file uses %s", k.File)
		}
	}
}
