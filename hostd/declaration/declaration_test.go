package declaration

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func load(t testing.TB) *Declaration {
	t.Helper()
	data, err := os.ReadFile("testdata/declaration.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The seeds parse: they exercise every field.
func TestSeedsParse(t *testing.T) {
	seeds, _ := filepath.Glob("testdata/seeds/*.json")
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(data); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	if len(seeds) < 3 {
		t.Fatalf("%d seeds", len(seeds))
	}
}

// The committed example is canonical: Parse then Marshal gives its bytes.
func TestRoundTrip(t *testing.T) {
	data, err := os.ReadFile("testdata/declaration.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, data) {
		t.Fatalf("not canonical:\n%s", out)
	}
}

func TestParseRefuses(t *testing.T) {
	good, err := os.ReadFile("testdata/declaration.json")
	if err != nil {
		t.Fatal(err)
	}
	edit := func(old, new string) string {
		if !strings.Contains(string(good), old) {
			t.Fatalf("testdata has no %q", old)
		}
		return strings.Replace(string(good), old, new, 1)
	}
	cases := []struct{ name, data, want string }{
		{"an action", edit(`"kind": "directory"`, `"kind": "action"`), `kind "action" is not one hostd applies`},
		{"an unknown field", edit(`"createOnce": true`, `"createOnce": true, "exec": "rm -rf /"`), `unknown field "exec"`},
		{"trailing data", string(good) + "{}", "trailing data"},
		{"another format", edit(`"format": 1`, `"format": 2`), "format 2 is not supported"},
		{"an image by tag", edit(`@sha256:6a9bf81bfdcd3da0e25dd1a8151adbd15b07fdacbd195321ed4549b434fe12e1"`, `:latest"`), "is not pinned by digest"},
		{"a relative path", edit(`"/srv/mesh/mosquitto/mosquitto.conf",`, `"../mosquitto.conf",`), "is not absolute and clean"},
		{"an unclean path", edit(`"/srv/mesh/mosquitto/mosquitto.conf",`, `"/srv/mesh/../etc/passwd",`), "is not absolute and clean"},
		{"a bad mode", edit(`"mode": "0644"`, `"mode": "644"`), "is not an octal mode"},
		{"restartOn a later resource", edit("\"restartOn\": [\n          \"mosquitto/conf\"", `"restartOn": ["mosquitto/broker"`), "names no earlier resource"},
		{"a duplicate id", edit(`"id": "mosquitto/conf"`, `"id": "mosquitto/data"`), "id appears twice"},
		{"a container name twice", edit(`"name": "mosquitto-broker"`, `"name": "mosquitto-seed"`), `container name "mosquitto-seed" is also "mosquitto/seed"'s`},
		{"a container name podman refuses", edit(`"name": "mosquitto-broker"`, `"name": "-broker/x"`), "is not one podman accepts"},
		{"a bad sealed path", edit(`"sealed": "secrets/mosquitto-admin.age"`, `"sealed": "../key.age"`), "sealed path"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// A container's digest moves with what it reads (restartOn, files mounted
// directly, env-files), a step's with what it names; not with anything else.
func TestDigestsAreDerived(t *testing.T) {
	base := load(t).Digests()
	cases := []struct {
		name   string
		change func(d *Declaration)
		moved  []string
		stayed []string
	}{
		{"the mounted config file", func(d *Declaration) { d.Resources[1].File.Content += "# more\n" },
			[]string{"mosquitto/conf", "mosquitto/seed", "mosquitto/broker"}, []string{"mosquitto/data", "mosquitto/admin-password"}},
		{"a secret's version", func(d *Declaration) { d.Resources[3].File.Secret.Version = 3 },
			[]string{"mosquitto/admin-password", "mosquitto/seed", "mosquitto/broker"}, []string{"mosquitto/conf"}},
		{"the seed file's content (not read by any container)", func(d *Declaration) { d.Resources[2].File.Content = "[]\n" },
			[]string{"mosquitto/dynsec"}, []string{"mosquitto/seed", "mosquitto/broker"}},
		{"the broker's env", func(d *Declaration) { d.Resources[5].Container.Env["TZ"] = "CET" },
			[]string{"mosquitto/broker"}, []string{"mosquitto/seed"}},
		{"the generation", func(d *Declaration) { d.Generation++ },
			nil, []string{"mosquitto/data", "mosquitto/conf", "mosquitto/seed", "mosquitto/broker"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := load(t)
			tc.change(d)
			got := d.Digests()
			for _, id := range tc.moved {
				if got[id] == base[id] {
					t.Errorf("%s did not move", id)
				}
			}
			for _, id := range tc.stayed {
				if got[id] != base[id] {
					t.Errorf("%s moved", id)
				}
			}
		})
	}
}

// FuzzParse: whatever Parse accepts, Marshal writes back to bytes that parse
// to the same canonical bytes (no malleability). The seeds are small, one per
// shape: the fuzzer's minimizer stalls on a large seed for a minute.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/seeds/*.json")
	if len(seeds) == 0 {
		f.Fatal("no seeds in testdata")
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data)
		if err != nil {
			return
		}
		out, err := Marshal(d)
		if err != nil {
			t.Fatalf("parsed but does not marshal: %v", err)
		}
		d2, err := Parse(out)
		if err != nil {
			t.Fatalf("marshalled bytes do not parse: %v", err)
		}
		out2, err := Marshal(d2)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("not stable: %v", err)
		}
	})
}
