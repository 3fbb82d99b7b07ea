package declaration

import (
	"bytes"
	"encoding/json"
	"sync"
)

// indentStep is the indentation of one nesting level in the canonical bytes.
const indentStep = "  "

// compactPool holds the buffers the compact encoding is written to before it
// is indented; only the indented copy leaves [Marshal].
var compactPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// marshalIndent returns what a json.Encoder with SetEscapeHTML(false) and
// SetIndent("", "  ") writes for v, in one pass over the compact encoding
// rather than the Encoder's second scan with the validating state machine.
func marshalIndent(v any) ([]byte, error) {
	buf := compactPool.Get().(*bytes.Buffer)
	defer compactPool.Put(buf)
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	src := buf.Bytes()
	return appendIndent(make([]byte, 0, len(src)+len(src)/4), src), nil
}

// appendIndent appends to dst src indented as encoding/json's Indent does
// with no prefix and [indentStep]. src must be encoding/json's own compact
// output: valid JSON with no space outside strings (a trailing newline is
// copied). So it only has to know where strings end, not validate.
func appendIndent(dst, src []byte) []byte {
	depth := 0
	open := false // after '{' or '[': indent unless the value is empty
	for i := 0; i < len(src); i++ {
		c := src[i]
		if open && c != '}' && c != ']' {
			open = false
			depth++
			dst = appendNewline(dst, depth)
		}
		switch c {
		case '"':
			end := stringEnd(src, i)
			dst = append(dst, src[i:end]...)
			i = end - 1
		case '{', '[':
			open = true
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			dst = appendNewline(dst, depth)
		case ':':
			dst = append(dst, c, ' ')
		case '}', ']':
			if open {
				open = false // an empty object or array stays {} or []
			} else {
				depth--
				dst = appendNewline(dst, depth)
			}
			dst = append(dst, c)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// stringEnd returns the index just past the closing quote of the JSON string
// that starts at src[start]. A quote closes the string unless an odd run of
// backslashes precedes it (the last of them escapes it).
func stringEnd(src []byte, start int) int {
	j := start + 1
	for {
		k := bytes.IndexByte(src[j:], '"')
		if k < 0 {
			return len(src) // not reached on encoding/json's output
		}
		q := j + k
		n := 0
		for p := q - 1; p > start && src[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

func appendNewline(dst []byte, depth int) []byte {
	dst = append(dst, '\n')
	for range depth {
		dst = append(dst, indentStep...)
	}
	return dst
}
