package schema

import (
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
)

// memFS is a read-only file system in memory with its directories indexed:
// listing a directory costs its entries, not the whole tree (fstest.MapFS
// scans every file on each listing, which is quadratic on a big mesh).
type memFS struct {
	files map[string][]byte
	dirs  map[string][]fs.DirEntry // in the order added; ReadDir sorts
	when  time.Time
}

func newMemFS(when time.Time) *memFS {
	return &memFS{files: map[string][]byte{}, dirs: map[string][]fs.DirEntry{".": nil}, when: when}
}

// add records a file and every directory above it.
func (m *memFS) add(name string, data []byte) {
	m.files[name] = data
	child := memInfo{name: path.Base(name), size: int64(len(data)), when: m.when}
	for dir := path.Dir(name); ; dir = path.Dir(dir) {
		_, known := m.dirs[dir]
		m.dirs[dir] = append(m.dirs[dir], child)
		if known || dir == "." {
			break
		}
		child = memInfo{name: path.Base(dir), dir: true, when: m.when}
	}
}

// Open implements fs.FS.
func (m *memFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if data, ok := m.files[name]; ok {
		return &memFile{Reader: strings.NewReader(string(data)), info: memInfo{name: path.Base(name), size: int64(len(data)), when: m.when}}, nil
	}
	if _, ok := m.dirs[name]; ok {
		ents, _ := m.ReadDir(name)
		return &memDir{info: memInfo{name: path.Base(name), dir: true, when: m.when}, ents: ents}, nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// ReadFile implements fs.ReadFileFS.
func (m *memFS) ReadFile(name string) ([]byte, error) {
	if data, ok := m.files[name]; ok {
		return slices.Clone(data), nil
	}
	return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
}

// ReadDir implements fs.ReadDirFS.
func (m *memFS) ReadDir(name string) ([]fs.DirEntry, error) {
	ents, ok := m.dirs[name]
	if !ok {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	out := slices.Clone(ents)
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// Stat implements fs.StatFS.
func (m *memFS) Stat(name string) (fs.FileInfo, error) {
	f, err := m.Open(name)
	if err != nil {
		return nil, err
	}
	return f.Stat()
}

// memInfo describes a file or directory of a memFS; it is also its DirEntry.
type memInfo struct {
	name string
	size int64
	dir  bool
	when time.Time
}

func (i memInfo) Name() string               { return i.name }
func (i memInfo) Size() int64                { return i.size }
func (i memInfo) ModTime() time.Time         { return i.when }
func (i memInfo) IsDir() bool                { return i.dir }
func (i memInfo) Sys() any                   { return nil }
func (i memInfo) Type() fs.FileMode          { return i.Mode().Type() }
func (i memInfo) Info() (fs.FileInfo, error) { return i, nil }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}

type memFile struct {
	*strings.Reader
	info memInfo
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Close() error               { return nil }

type memDir struct {
	info memInfo
	ents []fs.DirEntry // not yet read
}

// ReadDir implements fs.ReadDirFile.
func (d *memDir) ReadDir(n int) ([]fs.DirEntry, error) {
	if n <= 0 {
		out := d.ents
		d.ents = nil
		return out, nil
	}
	if len(d.ents) == 0 {
		return nil, io.EOF
	}
	k := min(n, len(d.ents))
	out := d.ents[:k]
	d.ents = d.ents[k:]
	return out, nil
}

func (d *memDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *memDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: fs.ErrInvalid}
}
func (d *memDir) Close() error { return nil }
