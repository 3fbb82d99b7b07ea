package vaultd

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/meshgen/meshgen/vaultd/client"
)

// decodeSealBatch reads a seal batch's body into req as decode would, and
// answers what decode answers. Most bodies (every one the client package
// sends) are read by parseSealBatch, without encoding/json's reflection:
// on a first reconcile that was a sixth of vaultd's CPU outside the
// sealing itself. Anything it does not take (an escape in a string,
// invalid UTF-8, a key in another case, a null but for a list, a number
// that is not a plain integer, a repeated key, bytes after the object, a
// body over the limit) goes to decode's encoding/json as it came, so what
// is accepted, what is refused and every error message are
// encoding/json's. The fuzz test holds the parser to encoding/json on
// arbitrary bodies.
//
// The body's buffer comes from bodies and goes back there: both readers
// copy what they keep out of it.
func decodeSealBatch(r *http.Request, req *client.SealBatchRequest, bodies *bufPool) error {
	size := 512
	if r.ContentLength > 0 {
		size = int(min(r.ContentLength, maxBody)) + 1 // + 1: the read that sees EOF
	}
	data, err := readBody(r.Body, bodies.get(size))
	defer func() { bodies.put(data) }()
	if err == nil {
		if reqs, ok := parseSealBatch(data); ok {
			req.Requests = reqs
			return nil
		}
	}
	// encoding/json reads the same bytes, and the same read error after
	// them, as it would have from the body.
	var body io.Reader = bytes.NewReader(data)
	if err != nil {
		body = io.MultiReader(body, errReader{err})
	}
	return decodeFrom(body, r.URL.Path, req)
}

// readBody appends r to b, to r's end or its first error.
func readBody(r io.Reader, b []byte) ([]byte, error) {
	if cap(b) == len(b) {
		b = append(b, 0)[:len(b)]
	}
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// parseSealBatch parses data as a [client.SealBatchRequest] when it is
// in the common subset of JSON it knows (see decodeSealBatch), reporting
// false for anything else.
func parseSealBatch(data []byte) ([]client.SealRequest, bool) {
	p := &batchParser{b: data}
	// Room for as many requests as the body has names (each request
	// names its secret once), up to a batch's most: no copy as the list
	// grows.
	reqs := make([]client.SealRequest, 0, min(bytes.Count(data, []byte(`"name"`)), client.MaxSealBatch))
	p.ws()
	if !p.take('{') || p.key() != 0 || !p.take('[') {
		return nil, false
	}
	if p.ws(); p.peek() == ']' {
		p.i++
	} else {
		for {
			req, ok := p.request()
			if !ok {
				return nil, false
			}
			reqs = append(reqs, req)
			if p.ws(); p.peek() == ',' {
				p.i++
				continue
			}
			if !p.take(']') {
				return nil, false
			}
			break
		}
	}
	if !p.take('}') {
		return nil, false
	}
	if p.ws(); p.i != len(p.b) {
		return nil, false
	}
	return reqs, true
}

// batchParser walks a body; every method reports or leaves a failure the
// caller checks, and a failure gives the body up whole.
type batchParser struct {
	b []byte
	i int
}

func (p *batchParser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *batchParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// take skips white space and c, reporting whether c was there.
func (p *batchParser) take(c byte) bool {
	p.ws()
	if p.peek() != c {
		return false
	}
	p.i++
	return true
}

// raw reads a string without escapes, in valid UTF-8 (which encoding/json
// takes as it is), and returns its bytes; ok is false for any other
// string, or none.
func (p *batchParser) raw() (_ []byte, ok bool) {
	if !p.take('"') {
		return nil, false
	}
	start := p.i
	ascii := true
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '"' {
			p.i++
			s := p.b[start : p.i-1]
			return s, ascii || utf8.Valid(s)
		}
		if c < 0x20 || c == '\\' {
			return nil, false
		}
		ascii = ascii && c < utf8.RuneSelf
		p.i++
	}
	return nil, false
}

func (p *batchParser) str() (string, bool) {
	b, ok := p.raw()
	return string(b), ok
}

// keys are the keys parseSealBatch knows, of the batch, a request and a
// spec.
var keys = [...]string{"requests", "name", "spec", "appliers", "recipients", "length", "alphabet", "format", "notRotatable", "rotation", "maxAge", "operator"}

// key reads an object's key and its colon, and returns the key's index in
// keys, or -1 for any other key or none.
func (p *batchParser) key() int {
	b, ok := p.raw()
	if !ok || !p.take(':') {
		return -1
	}
	for i, k := range keys {
		if string(b) == k {
			return i
		}
	}
	return -1
}

// object reads an object's members, calling member with each key (each
// at most once: a repeated key is given up) to read its value.
func (p *batchParser) object(member func(key string) bool) bool {
	if !p.take('{') {
		return false
	}
	if p.ws(); p.peek() == '}' {
		p.i++
		return true
	}
	var seen uint32
	for {
		k := p.key()
		if k < 0 || seen&(1<<k) != 0 || !member(keys[k]) {
			return false
		}
		seen |= 1 << k
		if p.ws(); p.peek() == ',' {
			p.i++
			continue
		}
		return p.take('}')
	}
}

func (p *batchParser) request() (req client.SealRequest, ok bool) {
	ok = p.object(func(k string) bool {
		var ok bool
		switch k {
		case "name":
			req.Name, ok = p.str()
		case "spec":
			req.Spec, ok = p.spec()
		case "appliers":
			req.Appliers, ok = p.recipientList()
		case "recipients":
			req.Recipients, ok = p.recipientList()
		}
		return ok
	})
	return req, ok
}

func (p *batchParser) spec() (s client.Spec, ok bool) {
	ok = p.object(func(k string) bool {
		var ok bool
		switch k {
		case "length":
			s.Length, ok = p.integer()
		case "alphabet":
			s.Alphabet, ok = p.str()
		case "format":
			s.Format, ok = p.str()
		case "notRotatable":
			s.NotRotatable, ok = p.str()
		case "rotation":
			s.Rotation, ok = p.str()
		case "maxAge":
			var text string
			if text, ok = p.str(); ok {
				d, err := time.ParseDuration(text)
				s.MaxAge, ok = client.Duration(d), err == nil
			}
		case "operator":
			s.Operator, ok = p.boolean()
		}
		return ok
	})
	return s, ok
}

// recipientList reads an array of strings, or null: nil, as encoding/json
// reads it (the key is read once, so null cannot undo an earlier list).
func (p *batchParser) recipientList() ([]string, bool) {
	if p.ws(); bytes.HasPrefix(p.b[p.i:], []byte("null")) {
		p.i += len("null")
		return nil, true
	}
	if !p.take('[') {
		return nil, false
	}
	list := []string{}
	if p.ws(); p.peek() == ']' {
		p.i++
		return list, true
	}
	for {
		s, ok := p.str()
		if !ok {
			return nil, false
		}
		list = append(list, s)
		if p.ws(); p.peek() == ',' {
			p.i++
			continue
		}
		return list, p.take(']')
	}
}

// integer reads -?(0|[1-9][0-9]*), at most 18 digits, followed by no
// fraction or exponent.
func (p *batchParser) integer() (int, bool) {
	p.ws()
	neg := p.peek() == '-'
	if neg {
		p.i++
	}
	start := p.i
	n := 0
	for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
		n = n*10 + int(p.b[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 18 || digits > 1 && p.b[start] == '0' {
		return 0, false
	}
	if c := p.peek(); c == '.' || c == 'e' || c == 'E' {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

func (p *batchParser) boolean() (bool, bool) {
	p.ws()
	switch {
	case bytes.HasPrefix(p.b[p.i:], []byte("true")):
		p.i += len("true")
		return true, true
	case bytes.HasPrefix(p.b[p.i:], []byte("false")):
		p.i += len("false")
		return false, true
	}
	return false, false
}
