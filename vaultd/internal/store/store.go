// Package store keeps vaultd's records on disk, each encrypted at rest to the
// vault's own age identity, which vaultd makes on first start and which never
// leaves its directory.
//
// Layout of the directory (0700):
//
//	identity        the vault's age identity (0600)
//	lock            held (flock) by the one vaultd using the directory
//	records/<id>    one record per key, age-encrypted (0600); id is the
//	                hex sha256 of the key, so names are not on disk in clear
//	generation      the change token's epoch and counter ceiling, plain
//	                JSON (0600), written by vaultd with [FileStore.WriteFile]
//
// Every write goes to a temporary file in the same directory, is fsynced,
// renamed over the record and the directory fsynced (renameio), so a kill -9
// at any point leaves either the old record or the new one. Temporary files a
// crash left behind are removed by [Open].
package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"filippo.io/age"
	"github.com/google/renameio/v2"
)

// FileStore is a directory of encrypted records. It is not safe for
// concurrent writes of the same key; vaultd serialises them.
type FileStore struct {
	dir      string
	records  string
	identity *age.X25519Identity
	lock     *os.File
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
	s.identity = id
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
func (s *FileStore) Recipient() *age.X25519Recipient { return s.identity.Recipient() }

// Identity decrypts what was sealed to [FileStore.Recipient]. It never leaves
// the vault's process.
func (s *FileStore) Identity() age.Identity { return s.identity }

// Dir is the store's directory.
func (s *FileStore) Dir() string { return s.dir }

func (s *FileStore) path(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(s.records, hex.EncodeToString(sum[:]))
}

// Put encrypts data to the vault's recipient and replaces key's record
// atomically and durably.
func (s *FileStore) Put(key string, data []byte) error {
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, s.identity.Recipient())
	if err != nil {
		return fmt.Errorf("encrypt record: %w", err)
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("encrypt record: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("encrypt record: %w", err)
	}
	if err := writeFile(s.path(key), buf.Bytes()); err != nil {
		return fmt.Errorf("write record: %w", err)
	}
	return nil
}

// All decrypts every record and calls fn with each, in no given order.
func (s *FileStore) All(fn func(data []byte) error) error {
	ents, err := os.ReadDir(s.records)
	if err != nil {
		return fmt.Errorf("read records: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		data, err := s.read(filepath.Join(s.records, e.Name()))
		if err != nil {
			return fmt.Errorf("record %s: %w", e.Name(), err)
		}
		if err := fn(data); err != nil {
			return fmt.Errorf("record %s: %w", e.Name(), err)
		}
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
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
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
