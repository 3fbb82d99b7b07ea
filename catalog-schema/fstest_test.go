package schema

import (
	"io/fs"
	"testing/fstest"
)

// fstestFS runs the standard library's fs.FS conformance checks.
func fstestFS(fsys fs.FS, files ...string) error { return fstest.TestFS(fsys, files...) }
