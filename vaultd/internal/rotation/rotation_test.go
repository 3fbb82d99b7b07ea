package rotation

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/meshgen/meshgen/vaultd/client"
)

const (
	prov = "age1provider"
	r1   = "age1reader1"
	r2   = "age1reader2"
)

// step is one transition and what must hold after it.
type step struct {
	op      string // start, applied, read, retired, abandon, recipients
	who     string
	version uint64
	wantErr error
	// after the step:
	phase   client.Phase
	reader  uint64 // the version readers hold
	waits   []string
	current uint64
	// appliers' versions, in order (in use first)
	applier []uint64
	retire  uint64 // the version listed retiring, 0 for none
}

func TestRotation(t *testing.T) {
	twoParty := func() State { return State{Kind: client.TwoParty, Current: Live{Version: 1, Slot: client.SlotA}} }
	oneParty := func() State { return State{Kind: client.OneParty, Current: Live{Version: 1}} }
	tests := []struct {
		name     string
		state    func() State
		appliers []string
		readers  []string
		steps    []step
	}{
		{
			name:  "two-party: readers move only after the applier, the old slot goes only after every reader",
			state: twoParty, appliers: []string{prov}, readers: []string{r1, r2},
			steps: []step{
				{op: "start", version: 2, phase: client.PhaseApplying, reader: 1, current: 1, waits: []string{prov}, applier: []uint64{1, 2}},
				{op: "read", who: r1, version: 2, wantErr: ErrConflict, phase: client.PhaseApplying, reader: 1, current: 1, waits: []string{prov}, applier: []uint64{1, 2}},
				{op: "applied", who: prov, version: 2, phase: client.PhaseReading, reader: 2, current: 1, waits: []string{r1, r2}, applier: []uint64{1, 2}},
				{op: "applied", who: prov, version: 2, phase: client.PhaseReading, reader: 2, current: 1, waits: []string{r1, r2}, applier: []uint64{1, 2}}, // replay
				{op: "read", who: r1, version: 2, phase: client.PhaseReading, reader: 2, current: 1, waits: []string{r2}, applier: []uint64{1, 2}},
				{op: "retired", who: prov, version: 1, wantErr: ErrConflict, phase: client.PhaseReading, reader: 2, current: 1, waits: []string{r2}, applier: []uint64{1, 2}},
				{op: "read", who: r2, version: 2, phase: client.PhaseRetiring, reader: 2, current: 2, waits: []string{prov}, applier: []uint64{2}, retire: 1},
				{op: "abandon", wantErr: ErrConflict, phase: client.PhaseRetiring, reader: 2, current: 2, waits: []string{prov}, applier: []uint64{2}, retire: 1},
				{op: "retired", who: prov, version: 1, phase: "", reader: 2, current: 2, applier: []uint64{2}},
				{op: "read", who: r2, version: 2, phase: "", reader: 2, current: 2, applier: []uint64{2}}, // replay after done
			},
		},
		{
			name:  "two-party: an unreachable reader keeps the old credential until it returns",
			state: twoParty, appliers: []string{prov}, readers: []string{r1, r2},
			steps: []step{
				{op: "start", version: 2, phase: client.PhaseApplying, reader: 1, current: 1, waits: []string{prov}, applier: []uint64{1, 2}},
				{op: "applied", who: prov, version: 2, phase: client.PhaseReading, reader: 2, current: 1, waits: []string{r1, r2}, applier: []uint64{1, 2}},
				{op: "read", who: r1, version: 2, phase: client.PhaseReading, reader: 2, current: 1, waits: []string{r2}, applier: []uint64{1, 2}},
				// r2 does not answer: nothing is retired, whatever else happens.
				{op: "retired", who: prov, version: 1, wantErr: ErrConflict, phase: client.PhaseReading, reader: 2, current: 1, waits: []string{r2}, applier: []uint64{1, 2}},
				{op: "read", who: r2, version: 2, phase: client.PhaseRetiring, reader: 2, current: 2, waits: []string{prov}, applier: []uint64{2}, retire: 1},
			},
		},
		{
			name:  "two-party: abandoned while applying retires the new slot",
			state: twoParty, appliers: []string{prov}, readers: []string{r1},
			steps: []step{
				{op: "start", version: 2, phase: client.PhaseApplying, reader: 1, current: 1, waits: []string{prov}, applier: []uint64{1, 2}},
				{op: "abandon", phase: client.PhaseRetiring, reader: 1, current: 1, waits: []string{prov}, applier: []uint64{1}, retire: 2},
				{op: "retired", who: prov, version: 1, wantErr: ErrConflict, phase: client.PhaseRetiring, reader: 1, current: 1, waits: []string{prov}, applier: []uint64{1}, retire: 2},
				{op: "retired", who: prov, version: 2, phase: "", reader: 1, current: 1, applier: []uint64{1}},
			},
		},
		{
			name:  "two-party: abandoned while reading waits for readers to be back on the old slot",
			state: twoParty, appliers: []string{prov}, readers: []string{r1},
			steps: []step{
				{op: "start", version: 2, phase: client.PhaseApplying, reader: 1, current: 1, waits: []string{prov}, applier: []uint64{1, 2}},
				{op: "applied", who: prov, version: 2, phase: client.PhaseReading, reader: 2, current: 1, waits: []string{r1}, applier: []uint64{1, 2}},
				{op: "abandon", phase: client.PhaseReading, reader: 1, current: 1, waits: []string{r1}, applier: []uint64{1, 2}},
				{op: "read", who: r1, version: 2, wantErr: ErrConflict, phase: client.PhaseReading, reader: 1, current: 1, waits: []string{r1}, applier: []uint64{1, 2}},
				{op: "read", who: r1, version: 1, phase: client.PhaseRetiring, reader: 1, current: 1, waits: []string{prov}, applier: []uint64{1}, retire: 2},
				{op: "retired", who: prov, version: 2, phase: "", reader: 1, current: 1, applier: []uint64{1}},
			},
		},
		{
			name:  "two-party: a rotation needs an applier",
			state: twoParty, readers: []string{r1},
			steps: []step{
				{op: "start", version: 2, wantErr: ErrConflict, phase: "", reader: 1, current: 1},
			},
		},
		{
			name:  "two-party: a reader dropped from the recipients is no longer waited on",
			state: twoParty, appliers: []string{prov}, readers: []string{r1, r2},
			steps: []step{
				{op: "start", version: 2, phase: client.PhaseApplying, reader: 1, current: 1, waits: []string{prov}, applier: []uint64{1, 2}},
				{op: "applied", who: prov, version: 2, phase: client.PhaseReading, reader: 2, current: 1, waits: []string{r1, r2}, applier: []uint64{1, 2}},
				{op: "read", who: r1, version: 2, phase: client.PhaseReading, reader: 2, current: 1, waits: []string{r2}, applier: []uint64{1, 2}},
				{op: "recipients", who: r2, phase: client.PhaseRetiring, reader: 2, current: 2, waits: []string{prov}, applier: []uint64{2}, retire: 1},
			},
		},
		{
			name:  "one-party applied: staged beside the current value, current only after the applier",
			state: oneParty, appliers: []string{prov}, readers: []string{r1},
			steps: []step{
				{op: "start", version: 2, phase: client.PhaseApplying, reader: 1, current: 1, waits: []string{prov}, applier: []uint64{1, 2}},
				{op: "start", version: 3, wantErr: ErrConflict, phase: client.PhaseApplying, reader: 1, current: 1, waits: []string{prov}, applier: []uint64{1, 2}},
				{op: "applied", who: r1, version: 2, wantErr: ErrConflict, phase: client.PhaseApplying, reader: 1, current: 1, waits: []string{prov}, applier: []uint64{1, 2}},
				{op: "applied", who: prov, version: 2, phase: client.PhaseReading, reader: 2, current: 2, waits: []string{r1}, applier: []uint64{2}},
				{op: "abandon", wantErr: ErrConflict, phase: client.PhaseReading, reader: 2, current: 2, waits: []string{r1}, applier: []uint64{2}},
				{op: "read", who: r1, version: 2, phase: "", reader: 2, current: 2, applier: []uint64{2}},
			},
		},
		{
			name:  "one-party read at start: current at once, its reader recreated",
			state: oneParty, readers: []string{r1},
			steps: []step{
				{op: "start", version: 2, phase: client.PhaseReading, reader: 2, current: 2, waits: []string{r1}},
				{op: "read", who: r1, version: 1, wantErr: ErrConflict, phase: client.PhaseReading, reader: 2, current: 2, waits: []string{r1}},
				{op: "read", who: r1, version: 2, phase: "", reader: 2, current: 2},
			},
		},
		{
			name:  "one-party: abandoned while applying drops the staged value",
			state: oneParty, appliers: []string{prov}, readers: []string{r1},
			steps: []step{
				{op: "start", version: 2, phase: client.PhaseApplying, reader: 1, current: 1, waits: []string{prov}, applier: []uint64{1, 2}},
				{op: "abandon", phase: "", reader: 1, current: 1, applier: []uint64{1}},
				{op: "abandon", wantErr: ErrNoRotation, phase: "", reader: 1, current: 1, applier: []uint64{1}},
				{op: "applied", who: prov, version: 2, wantErr: ErrNoRotation, phase: "", reader: 1, current: 1, applier: []uint64{1}},
			},
		},
		{
			name:  "one-party with nobody to wait on is done at once",
			state: oneParty,
			steps: []step{
				{op: "start", version: 2, phase: "", reader: 2, current: 2},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.state()
			appliers, readers := tt.appliers, tt.readers
			for i, st := range tt.steps {
				var err error
				switch st.op {
				case "start":
					next := Live{Version: st.version}
					if s.Kind == client.TwoParty {
						next.Slot = s.UnusedSlot()
					}
					err = s.Start(next, appliers, readers, "operator", time.Unix(0, 0))
				case "applied":
					err = s.ConfirmApplied(st.who, st.version, appliers, readers)
				case "read":
					err = s.ConfirmRead(st.who, st.version, appliers, readers)
				case "retired":
					err = s.ConfirmRetired(st.who, st.version, appliers, readers)
				case "abandon":
					err = s.Abandon(appliers, readers)
				case "recipients":
					var keep []string
					for _, r := range readers {
						if r != st.who {
							keep = append(keep, r)
						}
					}
					readers = keep
					s.Recipients(appliers, readers)
				}
				if !errors.Is(err, st.wantErr) || (st.wantErr == nil) != (err == nil) {
					t.Fatalf("step %d %s %s v%d: error %v, want %v", i, st.op, st.who, st.version, err, st.wantErr)
				}
				check(t, i, &s, st, appliers, readers)
				// The state is persisted as JSON: a round trip changes nothing.
				b, err := json.Marshal(s)
				if err != nil {
					t.Fatal(err)
				}
				var back State
				if err := json.Unmarshal(b, &back); err != nil {
					t.Fatal(err)
				}
				b2, _ := json.Marshal(back)
				if string(b) != string(b2) {
					t.Fatalf("step %d: state does not survive a round trip:\n%s\n%s", i, b, b2)
				}
				s = back
			}
		})
	}
}

func check(t *testing.T, i int, s *State, st step, appliers, readers []string) {
	t.Helper()
	if s.Phase != st.phase {
		t.Fatalf("step %d: phase %q, want %q", i, s.Phase, st.phase)
	}
	if s.Current.Version != st.current {
		t.Fatalf("step %d: current version %d, want %d", i, s.Current.Version, st.current)
	}
	var waits []string
	for _, p := range s.Waiting {
		waits = append(waits, p.Recipient)
	}
	if !equal(waits, st.waits) {
		t.Fatalf("step %d: waits on %v, want %v", i, waits, st.waits)
	}
	var got []uint64
	for _, d := range s.Deliveries(appliers, readers) {
		switch d.Role {
		case client.RoleReader:
			if d.Live.Version != st.reader {
				t.Fatalf("step %d: reader %s holds version %d, want %d", i, d.Recipient, d.Live.Version, st.reader)
			}
		case client.RoleApplier:
			got = append(got, d.Live.Version)
		}
	}
	if len(appliers) > 0 && !equal(got, st.applier) {
		t.Fatalf("step %d: applier holds %v, want %v", i, got, st.applier)
	}
	var retire uint64
	if s.Retiring != nil {
		retire = s.Retiring.Version
	}
	if retire != st.retire {
		t.Fatalf("step %d: retiring version %d, want %d", i, retire, st.retire)
	}
	if s.Kind == client.TwoParty {
		// Two slots, never the same one for two live values.
		seen := map[client.Slot]bool{}
		for _, l := range s.Live() {
			if seen[l.Slot] {
				t.Fatalf("step %d: slot %q used twice in %+v", i, l.Slot, s.Live())
			}
			seen[l.Slot] = true
		}
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCloneIsDeep: changing a clone leaves the original as it was (vaultd
// changes a clone and swaps it in only once it is on disk).
func TestCloneIsDeep(t *testing.T) {
	s := State{Kind: client.TwoParty, Current: Live{Version: 1, Slot: client.SlotA}}
	if err := s.Start(Live{Version: 2, Slot: client.SlotB}, []string{prov}, []string{r1}, "operator", time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(s)
	c := s.Clone()
	if err := c.ConfirmApplied(prov, 2, []string{prov}, []string{r1}); err != nil {
		t.Fatal(err)
	}
	c.Next.Version = 99
	if err := c.Abandon([]string{prov}, []string{r1}); err != nil {
		t.Fatal(err)
	}
	after, _ := json.Marshal(s)
	if string(before) != string(after) {
		t.Fatalf("changing a clone changed the original:\n%s\n%s", before, after)
	}
}
