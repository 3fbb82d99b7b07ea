// Package store keeps vaultd's records on disk, each encrypted at rest to the
// vault's own age identity, which vaultd makes on first start and which never
// leaves its directory.
//
// Layout of the directory (0700):
//
//	identity        the vault's age identity (0600)
//	lock            held (flock) by the one vaultd using the directory
//	records/g<seq>  a group of records written together, age-encrypted
//	                (0600); seq (16 hex digits) rises with every write, and
//	                a key's newest entry is the one in the highest group.
//	                Keys are inside the encryption, not on disk in clear
//	records/<id>    one record of an older vaultd (id is the hex sha256 of
//	                its key), read as older than every group
//	generation      the change token's epoch and counter ceiling, plain
//	                JSON (0600), written by vaultd with [FileStore.WriteFile]
//
// Every write ([FileStore.Write]) is one new group file: written to a
// temporary file in the same directory, fsynced, renamed into place and the
// directory fsynced (renameio), so a kill -9 at any point leaves either every
// record of the write or none of them, each key's older entry still read.
// Once a write is durable, the entries it superseded are dropped: an older
// file left with no newest entry is removed, one left with some is written
// again (atomically, under its own sequence) with only those. So, as with one
// file per record, a record replaced (a rotated-away value) is not kept, and
// the directory holds at most one file per key. What a crash interrupted of
// this is done again on the next start. Temporary files a crash left behind
// are removed by [Open].
package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"filippo.io/age"
	"github.com/google/renameio/v2"

	"github.com/meshgen/meshgen/internal/fsync"
	"github.com/meshgen/meshgen/vaultd/internal/agefile"
	"github.com/meshgen/meshgen/vaultd/internal/x25519"
)

// FileStore is a directory of encrypted records. It is not safe for
// concurrent writes of the same key; vaultd serialises them.
type FileStore struct {
	dir      string
	records  string
	identity *age.X25519Identity
	// recipient is identity's (computed once: it is a scalar
	// multiplication); sealTo is the same recipient as vaultd's own X25519
	// sealer, which wraps a file key with a fraction of age's curve work.
	recipient *age.X25519Recipient
	sealTo    age.Recipient
	lock      *os.File

	// mu guards the index, read from disk once by load: at is the group
	// file (by sequence) holding each key's newest entry, live counts the
	// newest entries each group file holds, legacy names the one-record
	// files of an older vaultd still holding a key's newest record, and
	// seq is the last group sequence taken.
	mu     sync.Mutex
	gc     sync.Mutex // serialises compact and removals
	at     map[string]uint64
	live   map[uint64]int
	legacy map[string]bool
	seq    uint64
}

// Close releases the directory for another vaultd.
func (s *FileStore) Close() error { return s.lock.Close() }

// Open opens the store in dir, making dir and the vault's identity on first
// start.
func Open(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("vault directory %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("vault directory %s: %w", dir, err)
	}
	s := &FileStore{dir: dir, records: filepath.Join(dir, "records")}
	// One vaultd per directory: two writing the same records would lose
	// updates. The kernel drops the lock when the process dies, kill -9
	// included.
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("vault directory lock: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("vault directory %s is in use by another vaultd (stop it first): %w", dir, err)
	}
	s.lock = lock
	if err := os.MkdirAll(s.records, 0o700); err != nil {
		return nil, fmt.Errorf("vault records directory: %w", err)
	}
	id, err := loadOrMakeIdentity(filepath.Join(dir, "identity"), s.hasRecords)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.identity, s.recipient = id, id.Recipient()
	if s.sealTo, err = x25519.Parse(s.recipient.String()); err != nil {
		s.Close()
		return nil, fmt.Errorf("the vault's recipient: %w", err)
	}
	if err := s.removeTemporaries(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// hasRecords reports whether any record exists.
func (s *FileStore) hasRecords() bool {
	ents, _ := os.ReadDir(s.records)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			return true
		}
	}
	return false
}

// loadOrMakeIdentity reads the vault's identity, or makes one on first start.
// A missing identity beside existing records is refused, never replaced: a
// new one could open none of them.
func loadOrMakeIdentity(path string, hasRecords func() bool) (*age.X25519Identity, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && hasRecords() {
		return nil, fmt.Errorf("the vault's identity %s is missing but records exist: restore it from backup (a new one could open none of them)", path)
	}
	if errors.Is(err, fs.ErrNotExist) {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			return nil, fmt.Errorf("make the vault's identity: %w", err)
		}
		if err := writeFile(path, []byte(id.String()+"\n")); err != nil {
			return nil, fmt.Errorf("write the vault's identity: %w", err)
		}
		return id, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the vault's identity: %w", err)
	}
	id, err := age.ParseX25519Identity(strings.TrimSpace(string(b)))
	if err != nil {
		// The error names no key material: age's parse errors do not quote it.
		return nil, fmt.Errorf("the vault's identity file %s is not an age identity (restore it from backup): %w", path, err)
	}
	return id, nil
}

// Recipient is the vault's own age recipient.
func (s *FileStore) Recipient() *age.X25519Recipient { return s.recipient }

// Identity decrypts what was sealed to [FileStore.Recipient]. It never leaves
// the vault's process.
func (s *FileStore) Identity() age.Identity { return s.identity }

// Dir is the store's directory.
func (s *FileStore) Dir() string { return s.dir }

// legacyName is the file an older vaultd wrote key's record to: the hex
// sha256 of the key.
func legacyName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

func isLegacyName(name string) bool {
	if len(name) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(name)
	return err == nil
}

// groupName is the file of the group written with sequence seq:
// "g" and 16 hex digits, so names sort as they were written.
func groupName(seq uint64) string { return fmt.Sprintf("g%016x", seq) }

func parseGroupName(name string) (uint64, bool) {
	if len(name) != 17 || name[0] != 'g' {
		return 0, false
	}
	seq, err := strconv.ParseUint(name[1:], 16, 64)
	return seq, err == nil && seq > 0
}

// groupMagic starts every group file's plaintext; an entry follows as the
// key's length (uvarint), the key, the data's length (uvarint), the data.
const groupMagic = "meshgen-vault-records/v1\n"

func encodeGroup(entries []Entry) []byte {
	var b bytes.Buffer
	b.Grow(groupSize(entries))
	writeGroupTo(&b, entries) // a bytes.Buffer does not fail
	return b.Bytes()
}

// groupSize is at least the length of entries' group.
func groupSize(entries []Entry) int {
	n := len(groupMagic)
	for _, e := range entries {
		n += 2*binary.MaxVarintLen64 + len(e.Key) + len(e.Data)
	}
	return n
}

// writeGroupTo writes the plaintext of entries' group to w.
func writeGroupTo(w io.Writer, entries []Entry) error {
	if _, err := io.WriteString(w, groupMagic); err != nil {
		return err
	}
	// An entry's lengths and key go in one write, from one buffer.
	var head []byte
	for _, e := range entries {
		head = binary.AppendUvarint(head[:0], uint64(len(e.Key)))
		head = binary.AppendUvarint(append(head, e.Key...), uint64(len(e.Data)))
		if _, err := w.Write(head); err != nil {
			return err
		}
		if _, err := w.Write(e.Data); err != nil {
			return err
		}
	}
	return nil
}

func decodeGroup(b []byte) ([]Entry, error) {
	rest, ok := bytes.CutPrefix(b, []byte(groupMagic))
	if !ok {
		return nil, errors.New("not a group of records (damaged?)")
	}
	field := func() ([]byte, error) {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return nil, errors.New("a record is cut short (damaged?)")
		}
		if k != len(binary.AppendUvarint(nil, n)) {
			// One encoding per group: what encodeGroup writes.
			return nil, errors.New("a length is not in its shortest form (damaged?)")
		}
		f := rest[k : k+int(n)]
		rest = rest[k+int(n):]
		return f, nil
	}
	var out []Entry
	for len(rest) > 0 {
		key, err := field()
		if err != nil {
			return nil, err
		}
		data, err := field()
		if err != nil {
			return nil, err
		}
		out = append(out, Entry{Key: string(key), Data: data})
	}
	return out, nil
}

// Entry is one record to write: its key and its data.
type Entry struct {
	Key  string
	Data []byte
}

// Put encrypts data to the vault's recipient and replaces key's record
// atomically and durably: [FileStore.Write] of one entry.
func (s *FileStore) Put(key string, data []byte) error {
	return s.Write([]Entry{{Key: key, Data: data}})
}

// Write replaces the records of entries atomically as a group and durably:
// once it returns nil every entry is on disk; after a crash at any point
// either every entry of the call is read back or none is (the file holding
// them is renamed into place whole, or not at all). The group is encrypted
// once and costs two fsyncs (the file and the directory) whatever its
// size, which is what makes a batch of new secrets cheap. Keys must be
// distinct; writes of the same key must not overlap (vaultd serialises
// them), writes of different keys may.
func (s *FileStore) Write(entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if seen[e.Key] {
			return fmt.Errorf("write records: key %q appears twice in one write", e.Key)
		}
		seen[e.Key] = true
	}
	if err := s.load(nil); err != nil {
		return err
	}
	s.mu.Lock()
	s.seq++
	seq := s.seq
	s.mu.Unlock()

	if err := s.writeGroup(seq, entries); err != nil {
		return fmt.Errorf("write records: %w", err)
	}

	// The new file is durable: the entries it superseded go. A file left
	// with none goes whole; a file left with some is written again with
	// only those (same sequence, so still older than this write). What a
	// crash interrupts here, the next start does again (see load).
	var older []uint64
	var gone []string
	s.mu.Lock()
	for _, e := range entries {
		if old, ok := s.at[e.Key]; ok {
			if !slices.Contains(older, old) {
				older = append(older, old)
			}
			if s.live[old]--; s.live[old] == 0 {
				delete(s.live, old)
			}
		}
		// A store with no record of an older vaultd left (every store
		// this one made) hashes no key.
		if len(s.legacy) > 0 {
			if legacy := legacyName(e.Key); s.legacy[legacy] {
				delete(s.legacy, legacy)
				gone = append(gone, legacy)
			}
		}
		s.at[e.Key] = seq
		s.live[seq]++
	}
	s.mu.Unlock()
	s.gc.Lock()
	defer s.gc.Unlock()
	for _, name := range gone {
		// A failure here fails nothing: the next start finds the file
		// superseded and removes it.
		_ = os.Remove(filepath.Join(s.records, name))
	}
	for _, old := range older {
		// Likewise: the entries superseded are never read back, and the
		// next start drops them.
		_ = s.compact(old)
	}
	return nil
}

// writeGroup writes entries as the group file of sequence seq, replacing
// it if it exists, atomically and durably. The group is encrypted as it is
// encoded, straight into the temporary file: no copy of it is held in
// memory, plain or sealed (a first reconcile's groups are tens of
// megabytes).
func (s *FileStore) writeGroup(seq uint64, entries []Entry) error {
	path := filepath.Join(s.records, groupName(seq))
	f, err := renameio.NewPendingFile(path, renameio.WithPermissions(0o600), renameio.WithExistingPermissions(), renameio.WithTempDir(s.records))
	if err != nil {
		return err
	}
	defer f.Cleanup()
	// An age file (agefile writes what age.Encrypt would), its header and
	// then each 64 KiB chunk in one write, from one chunk buffer.
	w, err := agefile.NewWriter(f, s.sealTo, groupSize(entries))
	if err != nil {
		return fmt.Errorf("encrypt: %w", err)
	}
	if err := writeGroupTo(w, entries); err != nil {
		return fmt.Errorf("encrypt: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("encrypt: %w", err)
	}
	if err := f.CloseAtomicallyReplace(); err != nil {
		return err
	}
	return fsync.Dir(s.records)
}

// compact drops the superseded entries of group file seq: it removes the
// file when none of its entries is a key's newest, and writes it again with
// only those that are otherwise, so a superseded record (a rotated-away
// value) is not kept on disk. The caller holds gc; the entries a
// concurrent write supersedes meanwhile lose to its later sequence.
func (s *FileStore) compact(seq uint64) error {
	path := filepath.Join(s.records, groupName(seq))
	s.mu.Lock()
	live := s.live[seq]
	s.mu.Unlock()
	if live == 0 {
		return os.Remove(path)
	}
	plain, err := s.read(path)
	if err != nil {
		return err
	}
	entries, err := decodeGroup(plain)
	if err != nil {
		return err
	}
	s.mu.Lock()
	keep := slices.DeleteFunc(slices.Clone(entries), func(e Entry) bool { return s.at[e.Key] != seq })
	s.mu.Unlock()
	if len(keep) == len(entries) {
		return nil
	}
	return s.writeGroup(seq, keep)
}

// All calls fn with the data of every record (the newest entry of each
// key), in no given order. It reads the directory the first time only; a
// store that was written to since reads nothing again.
func (s *FileStore) All(fn func(data []byte) error) error {
	return s.load(fn)
}

// load reads every file once: it decrypts the groups in the order they
// were written, keeps each key's newest entry, drops superseded entries
// from the files (what a crash interrupted of Write's clean-up), and calls
// fn (when not nil) with each record's data.
func (s *FileStore) load(fn func(data []byte) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at != nil {
		return nil
	}
	ents, err := os.ReadDir(s.records)
	if err != nil {
		return fmt.Errorf("read records: %w", err)
	}
	var groups []uint64
	var legacy []string
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		if seq, ok := parseGroupName(name); ok {
			groups = append(groups, seq)
			continue
		}
		if isLegacyName(name) {
			legacy = append(legacy, name)
			continue
		}
		return fmt.Errorf("read records: %s is not a record file: move it out of %s", name, s.records)
	}
	slices.Sort(groups)
	at := map[string]uint64{}
	live := map[uint64]int{}
	data := map[string][]byte{}
	keys := map[uint64][]string{}
	for _, seq := range groups {
		plain, err := s.read(filepath.Join(s.records, groupName(seq)))
		if err != nil {
			return fmt.Errorf("record file %s: %w", groupName(seq), err)
		}
		entries, err := decodeGroup(plain)
		if err != nil {
			return fmt.Errorf("record file %s: %w", groupName(seq), err)
		}
		for _, e := range entries {
			if old, ok := at[e.Key]; ok {
				live[old]--
			}
			at[e.Key] = seq
			live[seq]++
			data[e.Key] = e.Data
			keys[seq] = append(keys[seq], e.Key)
		}
	}
	// What a crash kept from Write's clean-up: files superseded whole go,
	// files superseded in part are written again with their newest
	// entries only.
	var gone []string
	for _, seq := range groups {
		switch {
		case live[seq] == 0:
			delete(live, seq)
			gone = append(gone, groupName(seq))
		case live[seq] < len(keys[seq]):
			var keep []Entry
			for _, k := range keys[seq] {
				if at[k] == seq {
					keep = append(keep, Entry{Key: k, Data: data[k]})
				}
			}
			if err := s.writeGroup(seq, keep); err != nil {
				return fmt.Errorf("drop the superseded records of file %s: %w", groupName(seq), err)
			}
		}
	}
	newer := make(map[string]bool, len(at))
	for k := range at {
		newer[legacyName(k)] = true
	}
	s.legacy = map[string]bool{}
	legacyData := map[string][]byte{}
	for _, name := range legacy {
		if newer[name] {
			gone = append(gone, name)
			continue
		}
		plain, err := s.read(filepath.Join(s.records, name))
		if err != nil {
			return fmt.Errorf("record %s: %w", name, err)
		}
		s.legacy[name] = true
		legacyData[name] = plain
	}
	if fn != nil {
		for _, k := range slices.Sorted(maps.Keys(data)) {
			if err := fn(data[k]); err != nil {
				return fmt.Errorf("record %s of file %s: %w", legacyName(k), groupName(at[k]), err)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(legacyData)) {
			if err := fn(legacyData[name]); err != nil {
				return fmt.Errorf("record %s: %w", name, err)
			}
		}
	}
	for _, name := range gone {
		if err := os.Remove(filepath.Join(s.records, name)); err != nil {
			return fmt.Errorf("remove the superseded record file %s: %w", name, err)
		}
	}
	s.at, s.live = at, live
	if len(groups) > 0 {
		s.seq = groups[len(groups)-1]
	}
	return nil
}

func (s *FileStore) read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := age.Decrypt(f, s.identity)
	if err != nil {
		return nil, fmt.Errorf("decrypt (was the identity replaced?): %w", err)
	}
	return io.ReadAll(r)
}

// removeTemporaries removes what a write interrupted by a crash left
// (renameio's temporary files start with a dot).
func (s *FileStore) removeTemporaries() error {
	for _, dir := range []string{s.dir, s.records} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("read %s: %w", dir, err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") && !e.IsDir() {
				if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
					return fmt.Errorf("remove an interrupted write: %w", err)
				}
			}
		}
	}
	return nil
}

// writeFile writes data to path atomically (temporary file, fsync, rename)
// and fsyncs the directory so the rename itself survives a crash.
func writeFile(path string, data []byte) error {
	// The temporary file sits beside the record, never in /tmp: Open finds
	// and removes what a crash left.
	if err := renameio.WriteFile(path, data, 0o600, renameio.WithTempDir(filepath.Dir(path))); err != nil {
		return err
	}
	return fsync.Dir(filepath.Dir(path))
}

// ReadFile reads name, a small plain file beside the records (not
// encrypted: it must hold nothing secret). A missing file is nil, nil.
func (s *FileStore) ReadFile(name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// WriteFile replaces name, a small plain file beside the records, atomically
// and durably, like a record.
func (s *FileStore) WriteFile(name string, data []byte) error {
	return writeFile(filepath.Join(s.dir, name), data)
}
