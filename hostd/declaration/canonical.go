package declaration

import (
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// This file writes a declaration's canonical bytes directly: what a
// json.Encoder with SetEscapeHTML(false) and SetIndent("", "  ") writes for a
// *Declaration, without reflection and without the Encoder's second,
// validating pass to indent. marshal_test.go holds the Encoder as the
// reference and compares the two on every declaration it can make, every
// field set, and arbitrary strings.

// bufPool holds the buffers canonical writes into; only an exact-size copy
// leaves it, so a Marshal allocates its result once.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// canonical returns the canonical bytes of d, ending in a newline.
func canonical(d *Declaration) []byte {
	buf := bufPool.Get().(*[]byte)
	defer bufPool.Put(buf)
	b := append((*buf)[:0], '{')
	b = appendKey(b, 1, true, `"format": `)
	b = strconv.AppendInt(b, int64(d.Format), 10)
	b = appendKey(b, 1, false, `"mesh": `)
	b = appendString(b, d.Mesh)
	b = appendKey(b, 1, false, `"node": `)
	b = appendString(b, d.Node)
	b = appendKey(b, 1, false, `"generation": `)
	b = strconv.AppendUint(b, d.Generation, 10)
	b = appendKey(b, 1, false, `"source": `)
	b = appendString(b, d.Source)
	b = appendKey(b, 1, false, `"resources": `)
	switch {
	case d.Resources == nil:
		b = append(b, "null"...)
	case len(d.Resources) == 0:
		b = append(b, "[]"...)
	default:
		b = append(b, '[')
		for i := range d.Resources {
			b = appendElem(b, 2, i == 0)
			b = appendResource(b, 2, &d.Resources[i])
		}
		b = appendClose(b, 1, ']')
	}
	b = appendClose(b, 0, '}')
	b = append(b, '\n')
	*buf = b
	return slices.Clone(b)
}

// The functions below append to b and return it, rather than keep a writer:
// a store through a pointer costs a write barrier while the collector runs.
// depth is the nesting of what they write; an opened object or array is
// never empty (an empty list is written whole, or left out).

func appendNewline(b []byte, depth int) []byte {
	b = append(b, '\n')
	for range depth {
		b = append(b, "  "...)
	}
	return b
}

// appendElem starts an element of an array (or a field of an object) at
// depth; first is whether it is the first.
func appendElem(b []byte, depth int, first bool) []byte {
	if !first {
		b = append(b, ',')
	}
	return appendNewline(b, depth)
}

// appendKey starts a field; k is its quoted name, a colon and a space.
func appendKey(b []byte, depth int, first bool, k string) []byte {
	return append(appendElem(b, depth, first), k...)
}

// appendClose ends an object or array whose opening is at depth.
func appendClose(b []byte, depth int, c byte) []byte {
	return append(appendNewline(b, depth), c)
}

func appendStrings(b []byte, depth int, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		b = appendElem(b, depth+1, i == 0)
		b = appendString(b, s)
	}
	return appendClose(b, depth, ']')
}

func appendResource(b []byte, depth int, r *Resource) []byte {
	in := depth + 1
	b = append(b, '{')
	b = appendKey(b, in, true, `"id": `)
	b = appendString(b, r.ID)
	b = appendKey(b, in, false, `"kind": `)
	b = appendString(b, string(r.Kind))
	b = appendKey(b, in, false, `"module": `)
	b = appendString(b, r.Module)
	if f := r.File; f != nil {
		b = appendKey(b, in, false, `"file": `)
		b = appendFile(b, in, f)
	}
	if d := r.Directory; d != nil {
		b = appendKey(b, in, false, `"directory": `)
		b = append(b, '{')
		b = appendKey(b, in+1, true, `"path": `)
		b = appendString(b, d.Path)
		b = appendKey(b, in+1, false, `"mode": `)
		b = appendString(b, d.Mode)
		if d.Owner != "" {
			b = appendKey(b, in+1, false, `"owner": `)
			b = appendString(b, d.Owner)
		}
		b = appendClose(b, in, '}')
	}
	if c := r.Container; c != nil {
		b = appendKey(b, in, false, `"container": `)
		b = appendContainer(b, in, c)
	}
	return appendClose(b, depth, '}')
}

func appendFile(b []byte, depth int, f *File) []byte {
	in := depth + 1
	b = append(b, '{')
	b = appendKey(b, in, true, `"path": `)
	b = appendString(b, f.Path)
	b = appendKey(b, in, false, `"mode": `)
	b = appendString(b, f.Mode)
	if f.Owner != "" {
		b = appendKey(b, in, false, `"owner": `)
		b = appendString(b, f.Owner)
	}
	if f.Content != "" {
		b = appendKey(b, in, false, `"content": `)
		b = appendString(b, f.Content)
	}
	if s := f.Secret; s != nil {
		b = appendKey(b, in, false, `"secret": `)
		b = append(b, '{')
		b = appendKey(b, in+1, true, `"name": `)
		b = appendString(b, s.Name)
		b = appendKey(b, in+1, false, `"version": `)
		b = strconv.AppendUint(b, s.Version, 10)
		b = appendKey(b, in+1, false, `"sealed": `)
		b = appendString(b, s.Sealed)
		b = appendKey(b, in+1, false, `"sha256": `)
		b = appendString(b, s.SHA256)
		if s.EnvVar != "" {
			b = appendKey(b, in+1, false, `"envVar": `)
			b = appendString(b, s.EnvVar)
		}
		b = appendClose(b, in, '}')
	}
	if f.CreateOnce {
		b = appendKey(b, in, false, `"createOnce": true`)
	}
	return appendClose(b, depth, '}')
}

func appendContainer(b []byte, depth int, c *Container) []byte {
	in := depth + 1
	b = append(b, '{')
	b = appendKey(b, in, true, `"name": `)
	b = appendString(b, c.Name)
	b = appendKey(b, in, false, `"image": `)
	b = appendString(b, c.Image)
	if len(c.Command) > 0 {
		b = appendKey(b, in, false, `"command": `)
		b = appendStrings(b, in, c.Command)
	}
	if len(c.Env) > 0 {
		b = appendKey(b, in, false, `"env": `)
		keys := make([]string, 0, len(c.Env))
		for k := range c.Env {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			b = appendElem(b, in+1, i == 0)
			b = appendString(b, k)
			b = append(b, ':', ' ')
			b = appendString(b, c.Env[k])
		}
		b = appendClose(b, in, '}')
	}
	if len(c.EnvFiles) > 0 {
		b = appendKey(b, in, false, `"envFiles": `)
		b = append(b, '[')
		for i, ef := range c.EnvFiles {
			b = appendElem(b, in+1, i == 0)
			b = append(b, '{')
			b = appendKey(b, in+2, true, `"file": `)
			b = appendString(b, ef.File)
			b = appendKey(b, in+2, false, `"reason": `)
			b = appendString(b, ef.Reason)
			b = appendClose(b, in+1, '}')
		}
		b = appendClose(b, in, ']')
	}
	if len(c.Mounts) > 0 {
		b = appendKey(b, in, false, `"mounts": `)
		b = append(b, '[')
		for i, m := range c.Mounts {
			b = appendElem(b, in+1, i == 0)
			b = append(b, '{')
			b = appendKey(b, in+2, true, `"source": `)
			b = appendString(b, m.Source)
			b = appendKey(b, in+2, false, `"target": `)
			b = appendString(b, m.Target)
			if m.ReadOnly {
				b = appendKey(b, in+2, false, `"readOnly": true`)
			}
			b = appendClose(b, in+1, '}')
		}
		b = appendClose(b, in, ']')
	}
	if len(c.Ports) > 0 {
		b = appendKey(b, in, false, `"ports": `)
		b = append(b, '[')
		for i, p := range c.Ports {
			b = appendElem(b, in+1, i == 0)
			b = append(b, '{')
			b = appendKey(b, in+2, true, `"host": `)
			b = strconv.AppendInt(b, int64(p.Host), 10)
			b = appendKey(b, in+2, false, `"container": `)
			b = strconv.AppendInt(b, int64(p.Container), 10)
			if p.Protocol != "" {
				b = appendKey(b, in+2, false, `"protocol": `)
				b = appendString(b, p.Protocol)
			}
			b = appendClose(b, in+1, '}')
		}
		b = appendClose(b, in, ']')
	}
	if c.RunOnce {
		b = appendKey(b, in, false, `"runOnce": true`)
	}
	if len(c.RestartOn) > 0 {
		b = appendKey(b, in, false, `"restartOn": `)
		b = appendStrings(b, in, c.RestartOn)
	}
	if c.Answer != "" {
		b = appendKey(b, in, false, `"answer": `)
		b = appendString(b, c.Answer)
	}
	return appendClose(b, depth, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as encoding/json quotes a string without HTML
// escaping: '"' and '\\' escaped, control characters as \b \f \n \r \t or
// \u00XX, invalid UTF-8 as \ufffd, and U+2028 and U+2029 as \u2028 and
// \u2029; everything else, DEL included, as it is.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
