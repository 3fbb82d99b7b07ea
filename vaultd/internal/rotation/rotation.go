// Package rotation is vaultd's rotation state machine (design 27 "Rotation",
// ADR 0114), kept apart from the store and the socket so each rule is tested
// on its own. A [State] is plain data, persisted inside the secret's record;
// its methods are the only transitions. It never holds a value: it names
// versions and slots, and the vault keeps the values they refer to.
//
// Two-party (two credential slots with the same rights):
//
//	idle ──Start──▶ applying ──every applier confirmed──▶ reading
//	reading ──every reader confirmed──▶ retiring ──every applier retired──▶ idle
//	applying ──Abandon──▶ retiring (the new slot)
//	reading ──Abandon──▶ reading back (readers confirm the old version) ──▶ retiring (the new slot)
//
// One-party (in place, staged):
//
//	idle ──Start──▶ applying (with appliers) ──every applier confirmed──▶ reading
//	idle ──Start──▶ reading (no applier: the new value is current at once)
//	reading ──every reader confirmed──▶ idle
//	applying ──Abandon──▶ idle
//
// A phase waiting on nobody advances at once. Confirmations are idempotent:
// a step confirmed twice, or confirmed after its phase passed, is accepted
// and changes nothing; a confirmation naming another version, or a party
// the phase does not wait on, is refused with [ErrConflict].
package rotation

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/meshgen/meshgen/vaultd/client"
)

// Errors the transitions return; vaultd maps them to client codes.
var (
	// ErrConflict: the step does not fit the state.
	ErrConflict = errors.New("conflict")
	// ErrNoRotation: no rotation is in progress.
	ErrNoRotation = errors.New("no rotation in progress")
)

// Live is one value by version, and its slot for two-party secrets.
type Live struct {
	Version uint64      `json:"version"`
	Slot    client.Slot `json:"slot,omitempty"`
}

// State is one secret's rotation state.
type State struct {
	// Kind is client.OneParty or client.TwoParty.
	Kind string `json:"kind"`
	// Current is the value readers use when no rotation moved them.
	Current Live `json:"current"`
	// Next is the new value of a rotation, until it becomes Current.
	Next *Live `json:"next,omitempty"`
	// Retiring is the credential appliers must remove (two-party).
	Retiring *Live `json:"retiring,omitempty"`
	// Phase is "" when idle.
	Phase client.Phase `json:"phase,omitempty"`
	// Abandoned is set when the rotation was abandoned and is unwinding.
	Abandoned bool   `json:"abandoned,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// Started is when the rotation began.
	Started time.Time `json:"started,omitzero"`
	// From and To are the versions replaced and introduced.
	From uint64 `json:"from,omitempty"`
	To   uint64 `json:"to,omitempty"`
	// Waiting are the parties the phase still waits on; Confirmed those
	// that confirmed it.
	Waiting   []client.Party `json:"waiting,omitempty"`
	Confirmed []client.Party `json:"confirmed,omitempty"`
}

// Clone returns a deep copy of s.
func (s *State) Clone() State {
	c := *s
	if s.Next != nil {
		n := *s.Next
		c.Next = &n
	}
	if s.Retiring != nil {
		r := *s.Retiring
		c.Retiring = &r
	}
	c.Waiting = slices.Clone(s.Waiting)
	c.Confirmed = slices.Clone(s.Confirmed)
	return c
}

// Idle reports whether no rotation is in progress.
func (s *State) Idle() bool { return s.Phase == "" }

// UnusedSlot returns the two-party slot Current does not use.
func (s *State) UnusedSlot() client.Slot {
	if s.Current.Slot == client.SlotA {
		return client.SlotB
	}
	return client.SlotA
}

// Start begins a rotation to next (its slot, for two-party, must be
// [State.UnusedSlot]). appliers and readers are the secret's recipients
// now; the phases wait on them.
func (s *State) Start(next Live, appliers, readers []string, reason string, now time.Time) error {
	if !s.Idle() {
		return conflictf("a rotation to version %d is already %s", s.To, s.Phase)
	}
	if next.Version <= s.Current.Version {
		return conflictf("new version %d is not after current %d", next.Version, s.Current.Version)
	}
	switch s.Kind {
	case client.TwoParty:
		if len(appliers) == 0 {
			return conflictf("a two-party rotation needs an applier (the provider's step) to ensure the new credential, and none is known yet")
		}
		if next.Slot != s.UnusedSlot() {
			return conflictf("new value must use slot %q, not %q", s.UnusedSlot(), next.Slot)
		}
	case client.OneParty:
		next.Slot = client.SlotNone
	default:
		return conflictf("unknown rotation kind %q", s.Kind)
	}
	n := next
	s.Next, s.Abandoned, s.Reason, s.Started = &n, false, reason, now
	s.From, s.To = s.Current.Version, next.Version
	if len(appliers) > 0 {
		s.enter(client.PhaseApplying, client.RoleApplier, appliers)
		return nil
	}
	// One-party with no applier: a value read at start becomes current at
	// once, and its readers are recreated.
	s.Current, s.Next = *s.Next, nil
	s.enter(client.PhaseReading, client.RoleReader, readers)
	s.settle(appliers, readers)
	return nil
}

// enter moves to phase, waiting on who in role.
func (s *State) enter(phase client.Phase, role client.Role, who []string) {
	s.Phase = phase
	s.Waiting, s.Confirmed = nil, nil
	for _, r := range uniq(who) {
		s.Waiting = append(s.Waiting, client.Party{Recipient: r, Role: role})
	}
}

// settle advances past every phase that waits on nobody.
func (s *State) settle(appliers, readers []string) {
	for !s.Idle() && len(s.Waiting) == 0 {
		s.advance(appliers, readers)
	}
}

// advance leaves the current phase, all its parties having confirmed.
func (s *State) advance(appliers, readers []string) {
	switch {
	case s.Phase == client.PhaseApplying && s.Kind == client.TwoParty:
		s.enter(client.PhaseReading, client.RoleReader, readers)
	case s.Phase == client.PhaseApplying: // one-party: the staged value becomes current
		s.Current, s.Next = *s.Next, nil
		s.enter(client.PhaseReading, client.RoleReader, readers)
	case s.Phase == client.PhaseReading && s.Kind == client.TwoParty && s.Abandoned:
		// Every reader is back on the old slot: the new one can go.
		s.Retiring, s.Next = s.Next, nil
		s.enter(client.PhaseRetiring, client.RoleApplier, appliers)
	case s.Phase == client.PhaseReading && s.Kind == client.TwoParty:
		// Every reader moved: only now is the old credential retired.
		old := s.Current
		s.Current, s.Next, s.Retiring = *s.Next, nil, &old
		s.enter(client.PhaseRetiring, client.RoleApplier, appliers)
	case s.Phase == client.PhaseReading, s.Phase == client.PhaseRetiring:
		s.finish()
	}
}

func (s *State) finish() {
	*s = State{Kind: s.Kind, Current: s.Current}
}

// ReaderVersion returns the value readers must hold now.
func (s *State) ReaderVersion() Live {
	if s.Kind == client.TwoParty && s.Phase == client.PhaseReading && !s.Abandoned && s.Next != nil {
		return *s.Next
	}
	return s.Current
}

// Delivery is what one recipient must hold now.
type Delivery struct {
	Recipient string
	Role      client.Role
	Live      Live
	// Current is false for a value an applier holds beside the one in use.
	Current bool
}

// Deliveries returns, for each applier and reader, every value it must
// hold now: readers one; appliers every live value (the one in use first).
func (s *State) Deliveries(appliers, readers []string) []Delivery {
	var out []Delivery
	for _, a := range uniq(appliers) {
		out = append(out, Delivery{Recipient: a, Role: client.RoleApplier, Live: s.Current, Current: true})
		if s.Next != nil {
			out = append(out, Delivery{Recipient: a, Role: client.RoleApplier, Live: *s.Next})
		}
	}
	rv := s.ReaderVersion()
	for _, r := range uniq(readers) {
		out = append(out, Delivery{Recipient: r, Role: client.RoleReader, Live: rv, Current: true})
	}
	return out
}

// Live returns every version the state still refers to; the vault keeps
// those values and drops the others.
func (s *State) Live() []Live {
	out := []Live{s.Current}
	if s.Next != nil {
		out = append(out, *s.Next)
	}
	if s.Retiring != nil {
		out = append(out, *s.Retiring)
	}
	return out
}

// Slots describes the live values for status.
func (s *State) Slots() []client.SlotState {
	out := []client.SlotState{{Slot: s.Current.Slot, Version: s.Current.Version, State: "current"}}
	if s.Next != nil {
		st := "next"
		if s.Phase == client.PhaseReading && !s.Abandoned {
			st = "reading"
		}
		out = append(out, client.SlotState{Slot: s.Next.Slot, Version: s.Next.Version, State: st})
	}
	if s.Retiring != nil {
		out = append(out, client.SlotState{Slot: s.Retiring.Slot, Version: s.Retiring.Version, State: "retiring"})
	}
	return out
}

// ConfirmApplied records that applier ensured version.
func (s *State) ConfirmApplied(applier string, version uint64, appliers, readers []string) error {
	return s.confirm(client.PhaseApplying, client.RoleApplier, applier, version, s.To, appliers, readers)
}

// ConfirmRead records that reader reads version: the new one, or the old
// one after an abandon.
func (s *State) ConfirmRead(reader string, version uint64, appliers, readers []string) error {
	want := s.To
	if s.Abandoned {
		want = s.From
	}
	return s.confirm(client.PhaseReading, client.RoleReader, reader, version, want, appliers, readers)
}

// ConfirmRetired records that applier removed the credential of version.
func (s *State) ConfirmRetired(applier string, version uint64, appliers, readers []string) error {
	want := s.From
	if s.Abandoned {
		want = s.To
	}
	return s.confirm(client.PhaseRetiring, client.RoleApplier, applier, version, want, appliers, readers)
}

var order = map[client.Phase]int{client.PhaseApplying: 1, client.PhaseReading: 2, client.PhaseRetiring: 3}

func (s *State) confirm(phase client.Phase, role client.Role, who string, version, want uint64, appliers, readers []string) error {
	if s.Idle() {
		if version == s.Current.Version {
			return nil // a replayed confirmation of a rotation that is done
		}
		return ErrNoRotation
	}
	if version != want {
		return conflictf("%s %s confirmed version %d, the rotation %s needs version %d", role, who, version, s.Phase, want)
	}
	p := client.Party{Recipient: who, Role: role}
	if s.Phase != phase {
		if order[s.Phase] > order[phase] {
			return nil // that phase is passed: a replay
		}
		return conflictf("the rotation is %s, not %s yet", s.Phase, phase)
	}
	if slices.Contains(s.Confirmed, p) {
		return nil
	}
	i := slices.Index(s.Waiting, p)
	if i < 0 {
		return conflictf("the rotation %s does not wait on %s %s", s.Phase, role, who)
	}
	s.Waiting = slices.Delete(s.Waiting, i, i+1)
	s.Confirmed = append(s.Confirmed, p)
	s.settle(appliers, readers)
	return nil
}

// Abandon gives up the rotation. It is refused once the old credential is
// being retired, and for one-party once the new value replaced the old one.
func (s *State) Abandon(appliers, readers []string) error {
	switch {
	case s.Idle():
		return ErrNoRotation
	case s.Abandoned:
		return nil
	case s.Phase == client.PhaseRetiring:
		return conflictf("the old credential (version %d) is being retired; a rotation can be abandoned only before", s.From)
	case s.Kind == client.OneParty && (s.Phase == client.PhaseReading || len(s.Confirmed) > 0):
		return conflictf("version %d already replaced version %d in place; a one-party rotation can be abandoned only before an applier confirmed", s.To, s.From)
	}
	s.Abandoned = true
	switch {
	case s.Kind == client.OneParty: // applying: the staged value is dropped
		s.finish()
	case s.Phase == client.PhaseApplying:
		// Readers never had the new slot: retire it at once.
		s.Retiring, s.Next = s.Next, nil
		s.enter(client.PhaseRetiring, client.RoleApplier, appliers)
	default:
		// Some readers may already use the new slot: every reader confirms
		// it is back on the old one before the new one is retired.
		s.enter(client.PhaseReading, client.RoleReader, readers)
	}
	s.settle(appliers, readers)
	return nil
}

// Recipients updates the parties after a seal named new recipient lists: a
// party no longer a recipient holds nothing and is no longer waited on. It
// reports whether the state changed.
func (s *State) Recipients(appliers, readers []string) bool {
	if s.Idle() {
		return false
	}
	keep := s.Waiting[:0:0]
	for _, p := range s.Waiting {
		list := readers
		if p.Role == client.RoleApplier {
			list = appliers
		}
		if slices.Contains(list, p.Recipient) {
			keep = append(keep, p)
		}
	}
	if len(keep) == len(s.Waiting) {
		return false
	}
	s.Waiting = keep
	s.settle(appliers, readers)
	return true
}

// Status returns the rotation for status, or nil when idle.
func (s *State) Status(name string) *client.Rotation {
	if s.Idle() {
		return nil
	}
	return &client.Rotation{
		Name: name, Kind: s.Kind, Phase: s.Phase, From: s.From, To: s.To,
		Abandoned: s.Abandoned, Reason: s.Reason, Started: s.Started,
		WaitsOn:   append([]client.Party{}, s.Waiting...),
		Confirmed: append([]client.Party(nil), s.Confirmed...),
	}
}

func uniq(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

// stepError is a refused step: its message, and the sentinel it wraps.
type stepError struct {
	msg  string
	kind error
}

func (e *stepError) Error() string { return e.msg }
func (e *stepError) Unwrap() error { return e.kind }

func conflictf(format string, args ...any) error {
	return &stepError{msg: fmt.Sprintf(format, args...), kind: ErrConflict}
}
