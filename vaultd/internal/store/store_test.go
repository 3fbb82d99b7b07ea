package store

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"filippo.io/age"
)

func TestStoreRoundTripAndIdentity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vault")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	records := map[string]string{"a": `{"name":"a"}`, "b/c": `{"name":"b/c"}`}
	for k, v := range records {
		if err := s.Put(k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	// Replacing a record keeps one file per key.
	if err := s.Put("a", []byte(`{"name":"a","v":2}`)); err != nil {
		t.Fatal(err)
	}
	records["a"] = `{"name":"a","v":2}`
	// A second store on the directory is refused while the first holds it.
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "in use by another vaultd") {
		t.Fatalf("a second store on the directory: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Opened again: the same identity, the same records.
	again, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.Recipient().String() != s.Recipient().String() {
		t.Fatal("the identity changed on the second start")
	}
	var got []string
	if err := again.All(func(b []byte) error { got = append(got, string(b)); return nil }); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, v := range records {
		want = append(want, v)
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("records %v, want %v", got, want)
	}
	fi, err := os.Stat(filepath.Join(dir, "identity"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("identity: %v %v", fi.Mode(), err)
	}
	// Nothing else can read a record: not another identity.
	other, _ := age.GenerateX25519Identity()
	files, _ := filepath.Glob(filepath.Join(dir, "records", "*"))
	if len(files) != 2 {
		t.Fatalf("%d record files, want 2", len(files))
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if _, err := age.Decrypt(bytes.NewReader(b), other); err == nil {
			t.Fatal("a record opens with another identity")
		}
	}
}

func TestAReplacedIdentityIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vault")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put("a", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	other, _ := age.GenerateX25519Identity()
	if err := os.WriteFile(filepath.Join(dir, "identity"), []byte(other.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = s2.All(func([]byte) error { return nil })
	s2.Close()
	if err == nil || !strings.Contains(err.Error(), "was the identity replaced?") {
		t.Fatalf("records under another identity: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "identity"), []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "is not an age identity (restore it from backup)") || strings.Contains(err.Error(), "not a key") {
		t.Fatalf("a damaged identity: %v", err)
	}
}

func TestAMissingIdentityIsNotReplaced(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vault")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put("a", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.Remove(filepath.Join(dir, "identity")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "is missing but records exist: restore it from backup") {
		t.Fatalf("a missing identity beside records: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "identity")); !os.IsNotExist(err) {
		t.Fatal("a new identity was made beside records it cannot open")
	}
}
