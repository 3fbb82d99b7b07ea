package schema

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// maxDepth bounds how deep the decoder follows a document, whatever it
// holds; the model itself is only a few levels deep.
const maxDepth = 32

// decoder turns one file's YAML into a model value, recording the position
// of every value under its YAML path and a problem for every unknown field
// and wrong type, without stopping at the first.
type decoder struct {
	file    string
	pos     map[string]Pos
	probs   *problems
	anchors map[string]ast.Node
}

// decodeFile parses data (the file named file) into v, a pointer to a model
// struct, and returns the position of every value by YAML path ("$" is the
// document). A syntax error is one problem and leaves v zero.
func decodeFile(file string, data []byte, v any, probs *problems) (map[string]Pos, bool) {
	d := &decoder{file: file, pos: map[string]Pos{"$": {File: file, Line: 1, Col: 1}}, probs: probs, anchors: map[string]ast.Node{}}
	f, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		pos, msg := syntaxPos(file, err)
		probs.add(pos, "", "fix the YAML syntax", "invalid YAML: %s", msg)
		return d.pos, false
	}
	var docs []*ast.DocumentNode
	for _, doc := range f.Docs {
		if doc != nil && doc.Body != nil {
			if _, comment := doc.Body.(*ast.CommentGroupNode); !comment {
				docs = append(docs, doc)
			}
		}
	}
	if len(docs) > 1 {
		probs.add(d.nodePos(docs[1].Body), "", "keep one document per file", "the file holds %d YAML documents; want one", len(docs))
	}
	if len(docs) == 0 {
		return d.pos, true
	}
	d.decode(docs[0].Body, reflect.ValueOf(v).Elem(), "$", 0)
	d.pos["$"] = Pos{File: file, Line: 1, Col: 1}
	return d.pos, true
}

// syntaxPos finds the position and message of a parse error.
func syntaxPos(file string, err error) (Pos, string) {
	pos := Pos{File: file, Line: 1, Col: 1}
	msg := err.Error()
	var ye yaml.Error
	if errors.As(err, &ye) {
		msg = ye.GetMessage()
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			pos.Line, pos.Col = tk.Position.Line, tk.Position.Column
		}
	}
	msg, _, _ = strings.Cut(msg, "\n")
	return pos, strings.TrimSpace(msg)
}

// fieldName turns a YAML path into a Problem's Field: "$.a.b" → "a.b".
func fieldName(path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, "$"), ".")
}

// nodePos returns where n stands in the file.
func (d *decoder) nodePos(n ast.Node) Pos {
	if m, ok := n.(*ast.MappingNode); ok && len(m.Values) > 0 {
		n = m.Values[0].Key
	}
	if mv, ok := n.(*ast.MappingValueNode); ok {
		n = mv.Key
	}
	if n == nil {
		return Pos{File: d.file, Line: 1, Col: 1}
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return Pos{File: d.file, Line: 1, Col: 1}
	}
	return Pos{File: d.file, Line: tk.Position.Line, Col: tk.Position.Column}
}

// kindOf describes what a node holds, for messages.
func kindOf(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode:
		return "an integer"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	case *ast.NullNode:
		return "null"
	default:
		return "an unsupported value"
	}
}

// want describes what a Go type takes, for messages.
func want(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Slice:
		return "a list"
	case reflect.Int:
		return "an integer"
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Pointer:
		return want(t.Elem())
	default:
		return "a string"
	}
}

// unwrap follows tags, anchors and aliases to the node holding the value.
func (d *decoder) unwrap(n ast.Node, path string) ast.Node {
	for i := 0; i < maxDepth && n != nil; i++ {
		switch x := n.(type) {
		case *ast.TagNode:
			n = x.Value
		case *ast.AnchorNode:
			if x.Name != nil && x.Value != nil {
				d.anchors[x.Name.GetToken().Value] = x.Value
			}
			n = x.Value
		case *ast.AliasNode:
			name := ""
			if x.Value != nil {
				name = x.Value.GetToken().Value
			}
			a, ok := d.anchors[name]
			if !ok {
				d.probs.add(d.nodePos(n), fieldName(path), "define the anchor before the alias", "%s: unknown alias %q", fieldName(path), name)
				return nil
			}
			n = a
		default:
			return n
		}
	}
	return nil
}

// wrongType records a problem for a value of the wrong kind.
func (d *decoder) wrongType(n ast.Node, path string, t reflect.Type) {
	f := fieldName(path)
	hint := "write " + want(t)
	if t.Kind() == reflect.Bool {
		hint = "write true or false, without quotes"
	}
	d.probs.add(d.nodePos(n), f, hint, "%s: want %s, got %s", f, want(t), kindOf(n))
}

// decode fills v from n, recording positions and problems.
func (d *decoder) decode(n ast.Node, v reflect.Value, path string, depth int) {
	if depth > maxDepth {
		d.probs.add(d.nodePos(n), fieldName(path), "flatten the document", "%s: nested too deeply", fieldName(path))
		return
	}
	n = d.unwrap(n, path)
	if n == nil {
		return
	}
	if _, null := n.(*ast.NullNode); null {
		d.pos[path] = d.nodePos(n)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		e := reflect.New(v.Type().Elem())
		d.decode(n, e.Elem(), path, depth)
		v.Set(e)
	case reflect.Struct:
		d.pos[path] = d.nodePos(n)
		d.decodeStruct(n, v, path, depth)
	case reflect.Map:
		d.pos[path] = d.nodePos(n)
		values, ok := mappingValues(n)
		if !ok {
			d.wrongType(n, path, v.Type())
			return
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		seen := map[string]bool{}
		for _, mv := range values {
			key, ok := d.key(mv, path)
			if !ok {
				continue
			}
			p := path + "." + key
			if seen[key] {
				d.probs.add(d.nodePos(mv.Key), fieldName(p), "remove one of them", "%s: duplicate key %q", fieldName(p), key)
				continue
			}
			seen[key] = true
			e := reflect.New(v.Type().Elem()).Elem()
			d.decode(mv.Value, e, p, depth+1)
			v.SetMapIndex(reflect.ValueOf(key), e)
			d.blockAtKey(mv, p)
		}
	case reflect.Slice:
		d.pos[path] = d.nodePos(n)
		seq, ok := n.(*ast.SequenceNode)
		if !ok {
			d.wrongType(n, path, v.Type())
			return
		}
		s := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
		for i, item := range seq.Values {
			d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1)
		}
		v.Set(s)
	case reflect.String:
		d.pos[path] = d.nodePos(n)
		s, ok := scalarText(n)
		if !ok {
			d.wrongType(n, path, v.Type())
			return
		}
		v.SetString(s)
	case reflect.Int:
		d.pos[path] = d.nodePos(n)
		i, ok := n.(*ast.IntegerNode)
		if !ok {
			d.wrongType(n, path, v.Type())
			return
		}
		var x int64
		switch iv := i.Value.(type) {
		case int64:
			x = iv
		case uint64:
			x, ok = int64(iv), iv <= 1<<31
		default:
			ok = false
		}
		if !ok || x < -(1<<31) || x > 1<<31 {
			d.probs.add(d.nodePos(i), fieldName(path), "write a smaller number", "%s: %s is out of range", fieldName(path), i.GetToken().Value)
			return
		}
		v.SetInt(x)
	case reflect.Bool:
		d.pos[path] = d.nodePos(n)
		b, ok := n.(*ast.BoolNode)
		if !ok {
			d.wrongType(n, path, v.Type())
			return
		}
		v.SetBool(b.Value)
	}
}

// blockAtKey places a block value (a mapping or a list) at its key: that is
// where an operator looks for it.
func (d *decoder) blockAtKey(mv *ast.MappingValueNode, p string) {
	if _, scalar := scalarText(d.unwrap(mv.Value, p)); !scalar {
		if _, ok := d.pos[p]; ok {
			d.pos[p] = d.nodePos(mv.Key)
		}
	}
}

// mappingValues returns the entries of a mapping node.
func mappingValues(n ast.Node) ([]*ast.MappingValueNode, bool) {
	switch m := n.(type) {
	case *ast.MappingNode:
		return m.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{m}, true
	}
	return nil, false
}

// key returns a mapping entry's key as text.
func (d *decoder) key(mv *ast.MappingValueNode, path string) (string, bool) {
	if mv.Key == nil || mv.Key.IsMergeKey() {
		d.probs.add(d.nodePos(mv), fieldName(path), "write the keys out", "%s: merge keys (<<) are not supported", fieldName(path))
		return "", false
	}
	k, ok := scalarText(d.unwrap(mv.Key, path))
	if !ok {
		d.probs.add(d.nodePos(mv.Key), fieldName(path), "write a plain key", "%s: a key must be a string", fieldName(path))
		return "", false
	}
	return k, true
}

// scalarText returns the text of a scalar node as written: an operator may
// write `workers: 4` where a string is wanted.
func scalarText(n ast.Node) (string, bool) {
	switch x := n.(type) {
	case *ast.StringNode:
		return x.Value, true
	case *ast.LiteralNode:
		if x.Value == nil {
			return "", true
		}
		return x.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		if tk := x.GetToken(); tk != nil {
			return tk.Value, true
		}
	}
	return "", false
}

// structField is one YAML key of a model struct.
type structField struct {
	index int
	name  string
}

// yamlFields lists the YAML keys of struct type t.
func yamlFields(t reflect.Type) []structField {
	var fs []structField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || name == "" || !f.IsExported() {
			continue
		}
		fs = append(fs, structField{index: i, name: name})
	}
	return fs
}

var posType = reflect.TypeFor[Pos]()

// decodeStruct fills struct v from mapping n.
func (d *decoder) decodeStruct(n ast.Node, v reflect.Value, path string, depth int) {
	values, ok := mappingValues(n)
	if !ok {
		d.wrongType(n, path, v.Type())
		return
	}
	if f := v.FieldByName("Pos"); f.IsValid() && f.Type() == posType {
		f.Set(reflect.ValueOf(d.nodePos(n)))
	}
	fields := yamlFields(v.Type())
	seen := map[string]bool{}
	for _, mv := range values {
		key, ok := d.key(mv, path)
		if !ok {
			continue
		}
		p := path + "." + key
		i := slices.IndexFunc(fields, func(f structField) bool { return f.name == key })
		if i < 0 {
			d.unknownField(mv, p, key, fields)
			continue
		}
		if seen[key] {
			d.probs.add(d.nodePos(mv.Key), fieldName(p), "remove one of them", "%s: duplicate key %q", fieldName(p), key)
			continue
		}
		seen[key] = true
		if mv.Value == nil {
			continue
		}
		d.decode(mv.Value, v.Field(fields[i].index), p, depth+1)
		d.blockAtKey(mv, p)
	}
}

// unknownField records a key the struct does not have, suggesting the
// nearest one.
func (d *decoder) unknownField(mv *ast.MappingValueNode, path, key string, fields []structField) {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	hint := "the fields here are " + strings.Join(names, ", ")
	if s := nearest(key, names); s != "" {
		hint = fmt.Sprintf("did you mean %q?", s)
	}
	d.probs.add(d.nodePos(mv.Key), fieldName(path), hint, "%s: unknown field %q", fieldName(path), key)
}

// nearest returns the name closest to s by edit distance, if close enough.
func nearest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if dd := editDistance(strings.ToLower(s), strings.ToLower(n)); dd < bestD {
			best, bestD = n, dd
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
