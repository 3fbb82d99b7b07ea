package fsync

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Dir(dir); err != nil {
		t.Fatalf("sync %s: %v", dir, err)
	}
	if err := Dir(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("sync of a missing directory: %v, want not exist", err)
	}
}
