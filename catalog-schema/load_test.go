package schema

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/broken/*/want.txt from what the loader reports")

// brokenDirs lists the broken repositories of the corpus.
func brokenDirs(t testing.TB) []string {
	dirs, err := filepath.Glob("testdata/broken/*")
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// TestBroken loads every repository of testdata/broken and compares the
// problems it reports, all at once, with its want.txt, line for line.
func TestBroken(t *testing.T) {
	dirs := brokenDirs(t)
	if len(dirs) < 30 {
		t.Fatalf("testdata/broken holds %d repositories; the corpus needs at least 30", len(dirs))
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			repo, err := LoadDir(dir)
			if err == nil {
				t.Fatalf("loaded %s without a problem: %+v", dir, repo.Mesh)
			}
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("want Problems, got %T: %v", err, err)
			}
			if repo != nil {
				t.Error("a repository with problems must come back nil")
			}
			for _, p := range ps {
				if p.Hint == "" {
					t.Errorf("%s: no hint", p)
				}
				if p.Pos.File == "" {
					t.Errorf("%s: no file", p)
				}
			}
			got := ps.Error() + "\n"
			wantFile := filepath.Join(dir, "want.txt")
			if *update {
				if err := os.WriteFile(wantFile, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(wantFile)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("problems differ from %s\n--- got\n%s--- want\n%s", wantFile, got, want)
			}
		})
	}
}

// TestProblemsAreSorted checks the report is ordered by file, line, column.
func TestProblemsAreSorted(t *testing.T) {
	_, err := LoadDir("testdata/broken/several-mistakes")
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("want Problems, got %v", err)
	}
	for i := 1; i < len(ps); i++ {
		a, b := ps[i-1].Pos, ps[i].Pos
		if a.File > b.File || a.File == b.File && (a.Line > b.Line || a.Line == b.Line && a.Col > b.Col) {
			t.Errorf("%s comes before %s", ps[i-1], ps[i])
		}
	}
	files := map[string]bool{}
	for _, p := range ps {
		files[p.Pos.File] = true
	}
	if len(files) < 5 {
		t.Errorf("several-mistakes reports problems in %d files; it has mistakes in 5", len(files))
	}
}

// TestGood loads every repository of testdata/good and the example mesh.
func TestGood(t *testing.T) {
	dirs, err := filepath.Glob("testdata/good/*")
	if err != nil {
		t.Fatal(err)
	}
	dirs = append(dirs, "../examples/lab")
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			repo, err := LoadDir(dir)
			if err != nil {
				t.Fatalf("load %s:\n%v", dir, err)
			}
			if repo.Mesh.Name == "" || len(repo.Nodes) == 0 {
				t.Errorf("loaded an empty mesh: %+v", repo.Mesh)
			}
			if repo.Source != "" {
				t.Errorf("Source = %q for a directory; want empty", repo.Source)
			}
		})
	}
}

func TestLoadDirNotADirectory(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{f, filepath.Join(t.TempDir(), "missing")} {
		_, err := LoadDir(dir)
		var ps Problems
		if err == nil || errors.As(err, &ps) {
			t.Errorf("LoadDir(%s) = %v; want a read error", dir, err)
		}
		if err != nil && !strings.Contains(err.Error(), dir) {
			t.Errorf("error %q does not name %s", err, dir)
		}
	}
}
