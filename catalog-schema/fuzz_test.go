package schema

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// archive packs a repository's YAML files into one fuzz input, each file
// introduced by a line "-- path --" (the shape of txtar).
func archive(t testing.TB, dir string) []byte {
	var b bytes.Buffer
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b.WriteString("-- " + filepath.ToSlash(rel) + " --\n")
		b.Write(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// unarchive turns a fuzz input back into a file system.
func unarchive(data []byte) fstest.MapFS {
	fsys := fstest.MapFS{}
	var name string
	var body []byte
	flush := func() {
		if name != "" && fs.ValidPath(name) {
			fsys[name] = &fstest.MapFile{Data: body}
		}
	}
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if bytes.HasPrefix(t, []byte("-- ")) && bytes.HasSuffix(t, []byte(" --")) && len(t) > 6 {
			flush()
			name, body = string(t[3:len(t)-3]), nil
			continue
		}
		body = append(body, line...)
	}
	flush()
	return fsys
}

// FuzzLoad loads arbitrary repositories: the loader must never panic, and
// must either load a repository or name problems that each have a place.
func FuzzLoad(f *testing.F) {
	dirs, _ := filepath.Glob("testdata/*/*")
	dirs = append(dirs, "../examples/lab")
	seeds := 0
	for _, dir := range dirs {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			f.Add(archive(f, dir))
			seeds++
		}
	}
	if seeds < 30 {
		f.Fatalf("FuzzLoad found %d seed repositories in testdata; want at least 30", seeds)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		repo, err := Load(unarchive(data))
		var ps Problems
		switch {
		case err == nil:
			if repo == nil {
				t.Fatal("no error and no repository")
			}
		case errors.As(err, &ps):
			if repo != nil {
				t.Fatal("problems and a repository")
			}
			for _, p := range ps {
				if p.Pos.File == "" || p.Message == "" {
					t.Fatalf("problem without a place or a message: %#v", p)
				}
				_ = p.String()
			}
		default:
			t.Fatalf("an in-memory repository failed to read: %v", err)
		}
	})
}

// TestArchiveRoundTrip checks the fuzz input format carries a repository.
func TestArchiveRoundTrip(t *testing.T) {
	fsys := unarchive(archive(t, "../examples/lab"))
	if _, err := Load(fsys); err != nil {
		t.Fatalf("the lab, archived and unpacked, does not load: %v", err)
	}
	if _, ok := fsys["catalog/modules/gitea/module.yaml"]; !ok {
		t.Error("the archive lost catalog/modules/gitea/module.yaml")
	}
}
