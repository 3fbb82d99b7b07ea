package reconciler

import (
	"fmt"
	"sort"
	"strings"

	schema "github.com/meshgen/meshgen/catalog-schema"
)

// ReasonKind names why a requirement or an assignment was refused.
type ReasonKind string

// The reasons resolution refuses (design 27, "Refusing").
const (
	// UnheldSeat: a requirement names a seat no assignment holds.
	UnheldSeat ReasonKind = "unheld-seat"
	// NoProvider: no assignment provides the requirement's contract.
	NoProvider ReasonKind = "no-provider"
	// SeveralCandidates: several assignments provide it, none is local and
	// no pin chooses one.
	SeveralCandidates ReasonKind = "several-candidates"
	// NoValue: an operator requirement with no value and no default.
	NoValue ReasonKind = "no-value"
	// AssignedTwice: a module assigned twice to one node.
	AssignedTwice ReasonKind = "assigned-twice"
	// SeatHeldTwice: a seat held by two assignments.
	SeatHeldTwice ReasonKind = "seat-held-twice"
	// NameHeld: a public name (an operator value of type hostname) already
	// held by another assignment.
	NameHeld ReasonKind = "name-held"
	// BreakGlass: an ordinary assignment moving or raising mesh-vault or
	// mesh-broker.
	BreakGlass ReasonKind = "break-glass"
	// HostElsewhere: a host requirement pinned to another node.
	HostElsewhere ReasonKind = "host-elsewhere"
	// BadPlacement: a placement that is not an absolute, clean path, or
	// that places something other than a host directory.
	BadPlacement ReasonKind = "bad-placement"
	// BadPin: a pin naming no assignment, one that does not provide the
	// contract, or a pin where none may choose (a secret, a seat).
	BadPin ReasonKind = "bad-pin"
	// BadSeat: an assignment holding a seat its module cannot hold.
	BadSeat ReasonKind = "bad-seat"
	// AnswerOutsideContract: a provider's answer carries a field its
	// contract does not name, or misses one it does; it is not delivered.
	AnswerOutsideContract ReasonKind = "answer-outside-contract"
	// Unanswerable: a requirement the catalog gives no way to answer (an
	// unknown contract, a missing fact, a provider that answers no value for
	// a field, an unknown reference).
	Unanswerable ReasonKind = "unanswerable"
)

// Reason is one thing resolution refused: which assignment and requirement,
// where in the repository, what is missing and what would answer it.
type Reason struct {
	Kind ReasonKind `json:"kind"`
	// Assignment is "<module>@<node>"; empty for a reason about the mesh.
	Assignment string `json:"assignment,omitempty"`
	// Requirement is the requirement's name, when the reason is about one.
	Requirement string `json:"requirement,omitempty"`
	// Pos is where the refused value stands, when known.
	Pos schema.Pos `json:"pos"`
	// Message says what is missing or wrong.
	Message string `json:"message"`
	// Hint says what would answer it.
	Hint string `json:"hint,omitempty"`
	// Candidates lists the assignments or modules that could answer, the
	// holder of a seat that delivers the provision first.
	Candidates []string `json:"candidates,omitempty"`
}

// String is the reason as the CLI prints it: "file:line:col: message".
func (r Reason) String() string {
	var b strings.Builder
	if r.Pos.File != "" {
		b.WriteString(r.Pos.File)
		if r.Pos.Line > 0 {
			fmt.Fprintf(&b, ":%d:%d", r.Pos.Line, r.Pos.Col)
		}
		b.WriteString(": ")
	}
	if r.Assignment != "" {
		fmt.Fprintf(&b, "%s: ", r.Assignment)
	}
	if r.Requirement != "" {
		fmt.Fprintf(&b, "requirement %q: ", r.Requirement)
	}
	b.WriteString(r.Message)
	return b.String()
}

// Refusal is resolution's typed error: every reason the mesh cannot be
// resolved, across the whole mesh, at once (design 27: "says everything at
// once"). Callers reach it with errors.As.
type Refusal struct {
	Reasons []Reason
}

// Error lists every reason, one per line, each followed by its hint.
func (r *Refusal) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "resolution refused (%d %s)", len(r.Reasons), plural(len(r.Reasons), "reason", "reasons"))
	for _, x := range r.Reasons {
		b.WriteString("\n  ")
		b.WriteString(x.String())
		if x.Hint != "" {
			b.WriteString("\n    hint: ")
			b.WriteString(x.Hint)
		}
	}
	return b.String()
}

// Hint returns the first reason's hint, for a CLI that prints one.
func (r *Refusal) Hint() string {
	if len(r.Reasons) == 1 {
		return r.Reasons[0].Hint
	}
	return ""
}

// sortReasons puts reasons in a fixed order: by file position, then
// assignment, requirement, kind and message. Two resolutions of the same
// repository list the same reasons in the same order.
func sortReasons(rs []Reason) {
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.Pos.File != b.Pos.File {
			return a.Pos.File < b.Pos.File
		}
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line < b.Pos.Line
		}
		if a.Pos.Col != b.Pos.Col {
			return a.Pos.Col < b.Pos.Col
		}
		if a.Assignment != b.Assignment {
			return a.Assignment < b.Assignment
		}
		if a.Requirement != b.Requirement {
			return a.Requirement < b.Requirement
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Message < b.Message
	})
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
