package schema

import (
	"fmt"
	"strings"
)

// Ref is one use of the one placeholder form, ${{ requirement.field }}: a
// requirement of the module and a field of its contract (design 27).
type Ref struct {
	Requirement string
	Field       string
}

// String returns the reference in its canonical form, "${{ req.field }}".
func (r Ref) String() string { return "${{ " + r.Requirement + "." + r.Field + " }}" }

const (
	openMark  = "${{"
	closeMark = "}}"
)

// Refs returns every ${{ requirement.field }} in s, in order. Spaces inside
// the braces are optional. It returns an error for a malformed form: an
// unclosed "${{", or braces that do not hold exactly a requirement name and
// a field name joined by one dot (such as "${{ db }}").
func Refs(s string) ([]Ref, error) {
	var refs []Ref
	_, err := scan(s, func(_ string, r Ref) error {
		refs = append(refs, r)
		return nil
	})
	return refs, err
}

// Expand replaces every ${{ requirement.field }} in s with what lookup
// returns for it. It stops at the first malformed form or lookup error.
func Expand(s string, lookup func(Ref) (string, error)) (string, error) {
	var b strings.Builder
	tail, err := scan(s, func(before string, r Ref) error {
		b.WriteString(before)
		v, err := lookup(r)
		if err != nil {
			return fmt.Errorf("expand %s: %w", r, err)
		}
		b.WriteString(v)
		return nil
	})
	if err != nil {
		return "", err
	}
	b.WriteString(tail)
	return b.String(), nil
}

// scan calls fn with the text before each reference and the reference, and
// returns the text after the last one.
func scan(s string, fn func(before string, r Ref) error) (string, error) {
	for {
		i := strings.Index(s, openMark)
		if i < 0 {
			return s, nil
		}
		before := s[:i]
		rest := s[i+len(openMark):]
		j := strings.Index(rest, closeMark)
		if j < 0 {
			return "", fmt.Errorf("unclosed %q: close it with %q", openMark, closeMark)
		}
		inner := strings.TrimSpace(rest[:j])
		req, field, ok := strings.Cut(inner, ".")
		if !ok || !isName(req) || !isName(field) {
			return "", fmt.Errorf("malformed placeholder %q: want ${{ requirement.field }}", openMark+rest[:j]+closeMark)
		}
		if err := fn(before, Ref{Requirement: req, Field: field}); err != nil {
			return "", err
		}
		s = rest[j+len(closeMark):]
	}
}
