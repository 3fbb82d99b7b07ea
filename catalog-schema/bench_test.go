package schema

import (
	"os"
	"testing"
)

// BenchmarkLoadLab reads and checks the example mesh from memory.
func BenchmarkLoadLab(b *testing.B) {
	fsys := unarchive(archive(b, "../examples/lab"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(fsys); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadBroken reads a repository with many problems.
func BenchmarkLoadBroken(b *testing.B) {
	fsys := os.DirFS("testdata/broken/several-mistakes")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(fsys); err == nil {
			b.Fatal("no problems")
		}
	}
}
