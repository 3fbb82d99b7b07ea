package schema

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Problem is one refusal: where it stands, the field it concerns, what is
// wrong, and what would fix it.
type Problem struct {
	Pos Pos
	// Field is the YAML path of the offending value inside its file, such
	// as "requires[1].provider"; empty when the whole file is concerned.
	Field string
	// Message says what is wrong and names the field.
	Message string
	// Hint says what would fix it; it may be empty.
	Hint string
}

// String returns the problem as "file:line:col: message" (or "file: message"
// when the problem has no line, such as a missing file).
func (p Problem) String() string {
	if p.Pos.Line == 0 {
		return fmt.Sprintf("%s: %s", p.Pos.File, p.Message)
	}
	return fmt.Sprintf("%s:%d:%d: %s", p.Pos.File, p.Pos.Line, p.Pos.Col, p.Message)
}

// Problems is every refusal found in a repository, sorted by file, line and
// column. The loader returns all of them at once, never only the first.
type Problems []Problem

// Error returns every problem, one per line.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Sort orders the problems by file, line, column, then message.
func (ps Problems) Sort() {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(
			cmp.Compare(a.Pos.File, b.Pos.File),
			cmp.Compare(a.Pos.Line, b.Pos.Line),
			cmp.Compare(a.Pos.Col, b.Pos.Col),
			cmp.Compare(a.Message, b.Message),
		)
	})
}

// String returns the position as "file:line:col".
func (p Pos) String() string {
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// problems collects refusals while a repository is read.
type problems struct{ list Problems }

func (ps *problems) add(pos Pos, field, hint, format string, args ...any) {
	ps.list = append(ps.list, Problem{Pos: pos, Field: field, Message: fmt.Sprintf(format, args...), Hint: hint})
}
