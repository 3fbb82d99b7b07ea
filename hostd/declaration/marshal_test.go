package declaration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// marshalBefore is Marshal as it was, with json.Encoder: the reference
// the canonical bytes must never drift from.
func marshalBefore(d *Declaration) ([]byte, error) {
	if err := validateBefore(d); err != nil {
		return nil, err
	}
	return encodeBefore(d)
}

// encodeBefore is marshalBefore's encoding, without validation.
func encodeBefore(d *Declaration) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, fmt.Errorf("encode declaration: %w", err)
	}
	return buf.Bytes(), nil
}

// testdataDeclarations returns every declaration under testdata, by file.
func testdataDeclarations(tb testing.TB) map[string][]byte {
	tb.Helper()
	files, _ := filepath.Glob("testdata/seeds/*.json")
	files = append(files, "testdata/declaration.json")
	out := map[string][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		out[f] = data
	}
	if len(out) < 4 {
		tb.Fatalf("%d declarations in testdata", len(out))
	}
	return out
}

// Marshal gives the reference's bytes on every declaration in testdata, on a
// large one, and on ones whose strings need every kind of escape.
func TestMarshalSameBytes(t *testing.T) {
	cases := map[string]*Declaration{
		"large":                  large(200),
		"every field set":        filled(),
		"zero":                   {},
		"no resources":           {Resources: []Resource{}},
		"empty bodies":           {Resources: []Resource{{File: &File{Secret: &SecretRef{}}}, {Directory: &Directory{}}, {Container: &Container{}}}},
		"empty slices and maps":  {Resources: []Resource{{Container: &Container{Command: []string{}, Env: map[string]string{}, EnvFiles: []EnvFile{}, Mounts: []Mount{}, Ports: []Port{}, RestartOn: []string{}}}}},
		"empty strings in lists": {Resources: []Resource{{Container: &Container{Command: []string{""}, Env: map[string]string{"": ""}, EnvFiles: []EnvFile{{}}, Mounts: []Mount{{}}, Ports: []Port{{Host: -1, Container: 1 << 40}}, RestartOn: []string{"", ""}}}}},
	}
	for name, data := range testdataDeclarations(t) {
		d, err := Parse(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cases[name] = d
		for i, s := range awkward {
			cases[fmt.Sprintf("%s with awkward string %d in every field", name, i)] = withStrings(d, s, s+"x", "y"+s)
		}
	}
	for name, d := range cases {
		t.Run(name, func(t *testing.T) {
			compareMarshal(t, d)
		})
	}
}

// awkward strings: every escape encoding/json writes, HTML characters it
// leaves alone here, invalid UTF-8, U+2028, and quotes after backslashes.
var awkward = []string{
	"", "plain", "<b>&amp;</b>", "\u2028\u2029", "\x00\x01\x1f\x7f", "\b\f\n\r\t",
	"\xff\xfe", "a\xe2\x80", `\`, `\\`, `\"`, `"\\"`, `{"a":[1,2]}`, "é€😀", "[]{},:",
}

func compareMarshal(t *testing.T, d *Declaration) {
	t.Helper()
	if got, want := fmt.Sprint(d.Validate()), fmt.Sprint(validateBefore(d)); got != want {
		t.Fatalf("Validate says %s, before it said %s", got, want)
	}
	want, wantErr := marshalBefore(d)
	got, err := Marshal(d)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("error %v, the reference's %v", err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Marshal differs from the reference:\n%q\nwant\n%q", got, want)
	}
	// Without validation too: the encoding alone, whatever the strings.
	want, wantErr = encodeBefore(d)
	got = canonical(d)
	if wantErr != nil {
		t.Fatalf("reference: %v", wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding differs from the reference:\n%q\nwant\n%q", got, want)
	}
}

// filled returns a declaration with every field of every type set, values
// and map keys distinct, lists of two: a field added to the format and not
// to the canonical encoding shows here.
func filled() *Declaration {
	var d Declaration
	n := 0
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		n++
		switch v.Kind() {
		case reflect.String:
			v.SetString(fmt.Sprintf("s%d", n))
		case reflect.Int:
			v.SetInt(int64(n))
		case reflect.Uint64:
			v.SetUint(uint64(n) << 40)
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem())
		case reflect.Struct:
			for i := range v.NumField() {
				fill(v.Field(i))
			}
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
			fill(v.Index(0))
			fill(v.Index(1))
		case reflect.Map:
			v.Set(reflect.MakeMap(v.Type()))
			for _, k := range []string{"z", "a", "m"} {
				e := reflect.New(v.Type().Elem()).Elem()
				fill(e)
				v.SetMapIndex(reflect.ValueOf(k+fmt.Sprint(n)), e)
			}
		default:
			panic("filled: no value for a " + v.Kind().String())
		}
	}
	fill(reflect.ValueOf(&d).Elem())
	return &d
}

// withStrings returns a deep copy of d with its string fields (map keys, slice
// elements and the kind among them) set to a, b and c in turn.
func withStrings(d *Declaration, a, b, c string) *Declaration {
	data, err := json.Marshal(d)
	if err != nil {
		panic(err)
	}
	var cp Declaration
	if err := json.Unmarshal(data, &cp); err != nil {
		panic(err)
	}
	strs := []string{a, b, c}
	n := 0
	next := func() string { n++; return strs[(n-1)%len(strs)] }
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			v.SetString(next())
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i))
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			m := reflect.MakeMap(v.Type())
			for _, k := range v.MapKeys() {
				m.SetMapIndex(reflect.ValueOf(next()+k.String()), reflect.ValueOf(next()))
			}
			v.Set(m)
		}
	}
	walk(reflect.ValueOf(&cp).Elem())
	return &cp
}

// FuzzMarshalSameBytes: with arbitrary strings in every string field of a
// testdata declaration, Marshal and its encoding give the reference's bytes.
func FuzzMarshalSameBytes(f *testing.F) {
	var decls []*Declaration
	for name, data := range testdataDeclarations(f) {
		d, err := Parse(data)
		if err != nil {
			f.Fatalf("%s: %v", name, err)
		}
		decls = append(decls, d)
	}
	for i, s := range awkward {
		f.Add(uint8(i), s, s, "")
	}
	f.Add(uint8(0), "mosquitto/conf", "/srv/mesh/x", "0640")
	f.Fuzz(func(t *testing.T, which uint8, a, b, c string) {
		d := decls[int(which)%len(decls)]
		compareMarshal(t, d)
		compareMarshal(t, withStrings(d, a, b, c))
	})
}

// large returns a valid declaration of n resources in the lab's shapes: a
// directory, a config file, a secret env-file and a container per four.
func large(n int) *Declaration {
	d := &Declaration{Format: Version, Mesh: "lab", Node: "node-0001", Generation: 7, Source: "0123456789abcdef0123456789abcdef01234567"}
	const digest = "6a9bf81bfdcd3da0e25dd1a8151adbd15b07fdacbd195321ed4549b434fe12e1"
	for i := 0; len(d.Resources) < n; i++ {
		m := fmt.Sprintf("module-%d", i)
		dir := "/srv/mesh/" + m
		d.Resources = append(d.Resources,
			Resource{ID: m + "/data", Kind: KindDirectory, Module: m, Directory: &Directory{Path: dir + "/data", Mode: "0750", Owner: "1883:1883"}},
			Resource{ID: m + "/conf", Kind: KindFile, Module: m, File: &File{Path: dir + "/app.conf", Mode: "0640",
				Content: "listener 1883\nallow_anonymous false\npassword_file /mosquitto/config/passwd\n# <generated> & \"quoted\"\n"}},
			Resource{ID: m + "/password", Kind: KindFile, Module: m, File: &File{Path: dir + "/password.env", Mode: "0600",
				Secret: &SecretRef{Name: m + "-admin", Version: 2, Sealed: "secrets/" + m + "-admin.age", SHA256: digest, EnvVar: "ADMIN_PASSWORD"}}},
			Resource{ID: m + "/app", Kind: KindContainer, Module: m, Container: &Container{
				Name: m + "-app", Image: "registry.example/eclipse-mosquitto@sha256:" + digest,
				Command:   []string{"mosquitto", "-c", "/mosquitto/config/app.conf"},
				Env:       map[string]string{"TZ": "UTC", "LOG_LEVEL": "info"},
				EnvFiles:  []EnvFile{{File: m + "/password", Reason: "the image reads its password from the environment"}},
				Mounts:    []Mount{{Source: dir + "/app.conf", Target: "/mosquitto/config/app.conf", ReadOnly: true}, {Source: dir + "/data", Target: "/mosquitto/data"}},
				Ports:     []Port{{Host: 1883, Container: 1883, Protocol: "tcp"}},
				RestartOn: []string{m + "/conf"},
			}},
		)
	}
	d.Resources = d.Resources[:n]
	return d
}

// BenchmarkMarshal and BenchmarkValidate measure a 200-resource declaration,
// now and with the code as it was (the references above), side by side.
func BenchmarkMarshal(b *testing.B) {
	d := large(200)
	for _, bc := range []struct {
		name    string
		marshal func(*Declaration) ([]byte, error)
	}{{"now", Marshal}, {"before", marshalBefore}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.marshal(d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkValidate(b *testing.B) {
	d := large(200)
	for _, bc := range []struct {
		name     string
		validate func(*Declaration) error
	}{{"now", (*Declaration).Validate}, {"before", validateBefore}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.validate(d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
