// Package jsonschemagen makes the JSON Schema of each file kind of a mesh
// repository from the Go types of package schema, so an editor
// (yaml-language-server) checks what the loader reads and the two cannot
// drift: the schema files are generated, and a test regenerates them and
// compares bytes.
package jsonschemagen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"

	schema "github.com/meshgen/meshgen/catalog-schema"
)

// BaseURL is where the schema files are published; each file's $id is
// BaseURL + its name.
const BaseURL = "https://github.com/meshgen/meshgen/raw/main/catalog-schema/jsonschema/"

// Kind is one kind of file of a mesh repository.
type Kind struct {
	// File is the schema file's name, such as "module.json".
	File string
	// Title says which files it describes.
	Title string
	// Type is the Go type a file of this kind is read into.
	Type reflect.Type
}

// Kinds lists the file kinds, in a fixed order.
var Kinds = []Kind{
	{"mesh.json", "mesh.yaml: the mesh's name and defaults", reflect.TypeFor[schema.Mesh]()},
	{"node.json", "nodes/<node>.yaml: a machine of the mesh", reflect.TypeFor[schema.Node]()},
	{"contract.json", "catalog/contracts/<provision>.yaml: what a provision promises", reflect.TypeFor[schema.Contract]()},
	{"module.json", "catalog/modules/<module>/module.yaml: a module definition", reflect.TypeFor[schema.Module]()},
	{"assignment.json", "assignments/<node>/<module>.yaml: a module on a node", reflect.TypeFor[schema.Assignment]()},
}

// Patterns the loader also enforces.
const (
	namePattern      = `^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$`
	imagePattern     = `@sha256:[0-9a-f]{64}$`
	recipientPattern = `^age1[qpzry9x8gf2tvdw0s3jn54khce6mua7l]{58}$`
	modePattern      = `^0?[0-7]{3}$`
	envNamePattern   = `^[A-Za-z_][A-Za-z0-9_]*$`
)

// extra adds keywords to one field, keyed "Type.Field".
var extra = map[string]map[string]any{
	"Node.Recipient":             {"pattern": recipientPattern},
	"Mesh.Name":                  {"pattern": namePattern},
	"Resource.Image":             {"pattern": imagePattern},
	"Resource.Mode":              {"pattern": modePattern},
	"Resource.EnvVar":            {"pattern": envNamePattern},
	"Resource.File":              {"pattern": namePattern},
	"Resource.Directory":         {"pattern": namePattern},
	"Resource.Container":         {"pattern": namePattern},
	"Requirement.Name":           {"pattern": namePattern},
	"Port.Container":             {"minimum": 1, "maximum": 65535},
	"Port.Protocol":              {"enum": []any{"tcp", "udp"}},
	"Requirement.Restart":        {"enum": []any{"read-at-start", "applied"}},
	"PerConsumerSecret.Rotation": {"enum": []any{"two-party", "one-party"}},
	"SecretSpec.Alphabet":        {"enum": []any{"alnum", "hex", "base64url"}},
	"SecretSpec.Format":          {"enum": []any{"mosquitto-pbkdf2", "bcrypt"}},
	"SecretSpec.Length":          {"minimum": 1},
}

// scalarFields take any scalar, written as text: an operator may write
// `workers: 4` where the model holds a string.
var scalarFields = map[string]bool{
	"Requirement.Default": true,
	"Assignment.Values":   true,
	"Resource.Env":        true,
	"Resource.Command":    true,
	"Provision.Values":    true,
	"Resource.Content":    true,
}

// gen builds one schema document.
type gen struct {
	docs map[string]string // "Type.Field" or "Type" → doc comment
	defs map[string]any
}

// Generate returns every schema file by name, as the bytes to write. src is
// the directory holding package schema's source, read for doc comments.
func Generate(src string) (map[string][]byte, error) {
	docs, err := readDocs(src)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, k := range Kinds {
		g := &gen{docs: docs, defs: map[string]any{}}
		root := g.object(k.Type)
		root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
		root["$id"] = BaseURL + k.File
		root["title"] = k.Title
		if len(g.defs) > 0 {
			root["$defs"] = g.defs
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(root); err != nil {
			return nil, fmt.Errorf("encode %s: %w", k.File, err)
		}
		out[k.File] = b.Bytes()
	}
	return out, nil
}

// readDocs reads the doc comments of the model's types and fields.
func readDocs(src string) (map[string]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(src, "types.go"), nil, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("read the model's doc comments: %w", err)
	}
	docs := map[string]string{}
	clean := func(g *ast.CommentGroup) string {
		if g == nil {
			return ""
		}
		return strings.Join(strings.Fields(g.Text()), " ")
	}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, spec := range gd.Specs {
			ts := spec.(*ast.TypeSpec)
			text := clean(ts.Doc)
			if text == "" {
				text = clean(gd.Doc)
			}
			docs[ts.Name.Name] = text
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			for _, fld := range st.Fields.List {
				text := clean(fld.Doc)
				if text == "" {
					text = clean(fld.Comment)
				}
				for _, n := range fld.Names {
					docs[ts.Name.Name+"."+n.Name] = text
				}
			}
		}
	}
	return docs, nil
}

// object describes a struct type.
func (g *gen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []any
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		key := t.Name() + "." + f.Name
		var p map[string]any
		switch {
		case key == "Requirement.Narrow":
			// A narrowing names only the bounds it tightens: a Field with
			// nothing required.
			if _, ok := g.defs["Narrowing"]; !ok {
				n := g.object(reflect.TypeFor[schema.Field]())
				delete(n, "required")
				n["description"] = "Narrowing tightens one field of the requirement's contract; it never widens it."
				g.defs["Narrowing"] = n
			}
			p = map[string]any{"type": "object", "additionalProperties": map[string]any{"$ref": "#/$defs/Narrowing"}}
		case scalarFields[key]:
			p = g.scalarish(f.Type)
		default:
			p = g.typ(f.Type)
		}
		for k, v := range extra[key] {
			p[k] = v
		}
		if d := g.docs[key]; d != "" {
			p["description"] = d
		}
		props[name] = p
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	o := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		o["required"] = required
	}
	if d := g.docs[t.Name()]; d != "" {
		o["description"] = d
	}
	if t == reflect.TypeFor[schema.Resource]() {
		// A resource names exactly one of file, directory and container.
		o["oneOf"] = []any{
			map[string]any{"required": []any{"file"}},
			map[string]any{"required": []any{"directory"}},
			map[string]any{"required": []any{"container"}},
		}
	}
	return o
}

// scalarish describes a string field (or a list or map of them) that
// accepts any scalar.
func (g *gen) scalarish(t reflect.Type) map[string]any {
	scalar := map[string]any{"type": []any{"string", "number", "boolean"}}
	switch t.Kind() {
	case reflect.Pointer:
		return scalar
	case reflect.Slice:
		return map[string]any{"type": "array", "items": scalar}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": scalar}
	}
	return scalar
}

// typ describes any field type, putting named structs under $defs.
func (g *gen) typ(t reflect.Type) map[string]any {
	switch t {
	case reflect.TypeFor[schema.FieldType]():
		var e []any
		for _, ft := range schema.FieldTypes() {
			e = append(e, string(ft))
		}
		return map[string]any{"type": "string", "enum": e}
	case reflect.TypeFor[schema.ProviderKind]():
		var e []any
		for _, k := range schema.ProviderKinds() {
			e = append(e, string(k))
		}
		return map[string]any{"type": "string", "enum": e, "description": "One of the four kinds of provider; the set is closed (design 27)."}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.typ(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Int:
		return map[string]any{"type": "integer"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.typ(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.typ(t.Elem())}
	case reflect.Struct:
		if _, ok := g.defs[t.Name()]; !ok {
			g.defs[t.Name()] = true // placeholder against recursion
			g.defs[t.Name()] = g.object(t)
		}
		return map[string]any{"$ref": "#/$defs/" + t.Name()}
	}
	panic(fmt.Sprintf("jsonschemagen: no schema for %s", t))
}
