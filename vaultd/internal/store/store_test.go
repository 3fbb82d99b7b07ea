package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
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

// records reads every record of the store in dir (opened and closed here),
// as the newest data of each key.
func records(t *testing.T, dir string) []string {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []string
	if err := s.All(func(b []byte) error { got = append(got, string(b)); return nil }); err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	return got
}

func files(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "records"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestGroupWrites: a write of many records is one file; a key's newest
// entry wins across files; a file whose every entry was superseded goes.
func TestGroupWrites(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vault")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var first []Entry
	for i := range 100 {
		first = append(first, Entry{Key: fmt.Sprintf("k%03d", i), Data: []byte(fmt.Sprintf(`{"name":"k%03d","v":1}`, i))})
	}
	steps := []struct {
		name    string
		entries []Entry
		files   int
	}{
		{"a batch of 100 is one file", first, 1},
		{"a single record beside it", []Entry{{Key: "single", Data: []byte(`{"name":"single","v":1}`)}}, 2},
		{"replacing some of the batch keeps its file", []Entry{{Key: "k000", Data: []byte(`{"name":"k000","v":2}`)}, {Key: "k001", Data: []byte(`{"name":"k001","v":2}`)}}, 3},
		{"replacing the single removes its file", []Entry{{Key: "single", Data: []byte(`{"name":"single","v":2}`)}}, 3},
		{"replacing k000 and k001 again removes the earlier pair's file", []Entry{{Key: "k000", Data: []byte(`{"name":"k000","v":3}`)}, {Key: "k001", Data: []byte(`{"name":"k001","v":3}`)}}, 3},
	}
	want := map[string]string{}
	for _, st := range steps {
		if err := s.Write(st.entries); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		for _, e := range st.entries {
			want[e.Key] = string(e.Data)
		}
		if got := files(t, dir); len(got) != st.files {
			t.Fatalf("%s: files %v, want %d", st.name, got, st.files)
		}
		// No file keeps a superseded entry.
		for _, f := range files(t, dir) {
			plain, err := s.read(filepath.Join(dir, "records", f))
			if err != nil {
				t.Fatal(err)
			}
			held, err := decodeGroup(plain)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range held {
				if want[e.Key] != string(e.Data) {
					t.Fatalf("%s: file %s keeps %s, superseded by %s", st.name, f, e.Data, want[e.Key])
				}
			}
		}
	}
	// Replacing every remaining entry of the first batch removes it.
	var rest []Entry
	for _, e := range first[2:] {
		rest = append(rest, Entry{Key: e.Key, Data: []byte(`{"name":"` + e.Key + `","v":2}`)})
		want[e.Key] = `{"name":"` + e.Key + `","v":2}`
	}
	if err := s.Write(rest); err != nil {
		t.Fatal(err)
	}
	if got := files(t, dir); len(got) != 3 {
		t.Fatalf("after replacing the first batch: files %v, want 3", got)
	}
	if err := s.Write([]Entry{{Key: "a", Data: []byte("1")}, {Key: "a", Data: []byte("2")}}); err == nil || !strings.Contains(err.Error(), `key "a" appears twice`) {
		t.Fatalf("a write naming a key twice: %v", err)
	}
	s.Close()
	var wantAll []string
	for _, v := range want {
		wantAll = append(wantAll, v)
	}
	sort.Strings(wantAll)
	if got := records(t, dir); strings.Join(got, "|") != strings.Join(wantAll, "|") {
		t.Fatalf("read back %d records, want %d:\n%v\n%v", len(got), len(wantAll), got, wantAll)
	}
}

// TestAnInterruptedRemovalIsRedone leaves what a crash after a write but
// before the removal of the file it superseded leaves: the older file is
// read as older, and removed on the next start.
func TestAnInterruptedRemovalIsRedone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vault")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write([]Entry{{Key: "a", Data: []byte("a1")}, {Key: "b", Data: []byte("b1")}}); err != nil {
		t.Fatal(err)
	}
	old := files(t, dir)
	saved, err := os.ReadFile(filepath.Join(dir, "records", old[0]))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write([]Entry{{Key: "a", Data: []byte("a2")}, {Key: "b", Data: []byte("b2")}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got := files(t, dir); len(got) != 1 || got[0] == old[0] {
		t.Fatalf("files %v: the superseded one is still there", got)
	}
	// The crash: the superseded file is back.
	if err := os.WriteFile(filepath.Join(dir, "records", old[0]), saved, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := records(t, dir); strings.Join(got, ",") != "a2,b2" {
		t.Fatalf("records %v, want the newer a2,b2", got)
	}
	if got := files(t, dir); len(got) != 1 || got[0] == old[0] {
		t.Fatalf("files %v: the superseded one was not removed on start", got)
	}
}

// TestAnInterruptedCompactionIsRedone leaves what a crash after a write
// but before the file it superseded in part was written again leaves: the
// older entry is not read, and is dropped from the file on the next start.
func TestAnInterruptedCompactionIsRedone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vault")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write([]Entry{{Key: "a", Data: []byte("a1")}, {Key: "b", Data: []byte("b1")}}); err != nil {
		t.Fatal(err)
	}
	first := files(t, dir)[0]
	saved, err := os.ReadFile(filepath.Join(dir, "records", first))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write([]Entry{{Key: "a", Data: []byte("a2")}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// The crash: the first file still holds a1.
	if err := os.WriteFile(filepath.Join(dir, "records", first), saved, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := records(t, dir); strings.Join(got, ",") != "a2,b1" {
		t.Fatalf("records %v, want a2,b1", got)
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plain, err := s.read(filepath.Join(dir, "records", first))
	if err != nil {
		t.Fatal(err)
	}
	if held, err := decodeGroup(plain); err != nil || len(held) != 1 || held[0].Key != "b" {
		t.Fatalf("file %s holds %v after the start, want b alone: %v", first, held, err)
	}
}

// TestRecordsOfAnOlderVaultd reads a one-record file an older vaultd wrote
// (records/<sha256 of the key>, the record itself encrypted) and replaces it
// with the first write of its key.
func TestRecordsOfAnOlderVaultd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vault")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"old-a", "old-b"} {
		var buf bytes.Buffer
		w, err := age.Encrypt(&buf, s.Recipient())
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(`{"name":"` + k + `"}`))
		w.Close()
		if err := os.WriteFile(filepath.Join(dir, "records", legacyName(k)), buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if got := records(t, dir); strings.Join(got, ",") != `{"name":"old-a"},{"name":"old-b"}` {
		t.Fatalf("records %v", got)
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put("old-a", []byte(`{"name":"old-a","v":2}`)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got := files(t, dir); len(got) != 2 || slices.Contains(got, legacyName("old-a")) || !slices.Contains(got, legacyName("old-b")) {
		t.Fatalf("files %v: want old-a's one-record file replaced, old-b's kept", got)
	}
	if got := records(t, dir); strings.Join(got, ",") != `{"name":"old-a","v":2},{"name":"old-b"}` {
		t.Fatalf("records %v", got)
	}
}

// TestAStrangeFileIsRefused: a file in records/ that is neither a group
// nor an older vaultd's record stops the start, naming it, rather than
// being ignored or removed.
func TestAStrangeFileIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vault")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put("a", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, tt := range []struct{ name, content, want string }{
		{"notes.txt", "hello", "notes.txt is not a record file"},
		{groupName(99), "not age", "record file " + groupName(99)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, "records", tt.name)
			if err := os.WriteFile(p, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(p)
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.All(func([]byte) error { return nil }); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestDecodeGroupRefusesDamage(t *testing.T) {
	good := encodeGroup([]Entry{{Key: "a", Data: []byte("data")}})
	for _, tt := range []struct {
		name string
		in   []byte
	}{
		{"no magic", []byte("a group")},
		{"cut short", good[:len(good)-1]},
		{"a key without data", good[:len(groupMagic)+2]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := decodeGroup(tt.in); err == nil {
				t.Fatal("damage not found")
			}
		})
	}
	got, err := decodeGroup(good)
	if err != nil || len(got) != 1 || got[0].Key != "a" || string(got[0].Data) != "data" {
		t.Fatalf("round trip: %v %v", got, err)
	}
}

// TestConcurrentWritesSupersedingOneFile: writes of different keys at once,
// each superseding part of the same older file, leave each key's newest
// record and no superseded entry anywhere.
func TestConcurrentWritesSupersedingOneFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vault")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var all []Entry
	for i := range 100 {
		all = append(all, Entry{Key: fmt.Sprintf("k%03d", i), Data: fmt.Appendf(nil, "k%03d=v0", i)})
	}
	if err := s.Write(all); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, e := range all {
		want[e.Key] = string(e.Data)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 10 {
		wg.Go(func() {
			for round := 1; round <= 3; round++ {
				var es []Entry
				for i := w * 10; i < w*10+10; i += round {
					es = append(es, Entry{Key: fmt.Sprintf("k%03d", i), Data: fmt.Appendf(nil, "k%03d=v%d", i, round)})
				}
				if err := s.Write(es); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, e := range es {
					want[e.Key] = string(e.Data)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, f := range files(t, dir) {
		plain, err := s.read(filepath.Join(dir, "records", f))
		if err != nil {
			t.Fatal(err)
		}
		held, err := decodeGroup(plain)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range held {
			if want[e.Key] != string(e.Data) {
				t.Errorf("file %s keeps %s of %s, superseded by %s", f, e.Data, e.Key, want[e.Key])
			}
		}
	}
	s.Close()
	got := records(t, dir)
	var wantAll []string
	for _, v := range want {
		wantAll = append(wantAll, v)
	}
	sort.Strings(wantAll)
	if strings.Join(got, ",") != strings.Join(wantAll, ",") {
		t.Fatalf("records %v, want %v", got, wantAll)
	}
}

// FuzzDecodeGroup: whatever a group file's plaintext holds, decodeGroup
// either refuses it or reads entries that encode back to the same bytes.
func FuzzDecodeGroup(f *testing.F) {
	for _, es := range [][]Entry{
		nil,
		{{Key: "a", Data: []byte(`{"name":"a"}`)}},
		{{Key: "db/app", Data: bytes.Repeat([]byte("x"), 300)}, {Key: "", Data: nil}},
	} {
		f.Add(encodeGroup(es))
	}
	f.Add([]byte(groupMagic + "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := decodeGroup(b)
		if err != nil {
			return
		}
		if back := encodeGroup(es); !bytes.Equal(back, b) {
			t.Fatalf("%q decodes to %d entries that encode to %q", b, len(es), back)
		}
	})
}
