// Package fsync makes a directory's entries durable: after a file is
// created, renamed or removed in a directory, the change survives a crash
// only once the directory itself is synced.
package fsync

import (
	"errors"
	"os"
)

// Dir syncs the directory dir, so that the entries created, renamed or
// removed in it are on disk.
func Dir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
