package rotation

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/meshgen/meshgen/vaultd/client"
	"pgregory.net/rapid"
)

// TestNobodyIsLeftWithoutACredential drives two-party rotations with random
// steps in random order (confirmations early, late, twice, from the wrong
// party, abandons) and checks after every step that no version a reader may
// still be using has been retired, that two live values never share a slot,
// and that versions only rise (ADR 0114).
func TestNobodyIsLeftWithoutACredential(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		appliers := []string{"p1", "p2"}[:rapid.IntRange(1, 2).Draw(t, "appliers")]
		readers := []string{"r1", "r2", "r3"}[:rapid.IntRange(0, 3).Draw(t, "readers")]
		s := State{Kind: client.TwoParty, Current: Live{Version: 1, Slot: client.SlotA}}
		last := uint64(1)
		// mayUse[r] is every version r may be using: what it was given since
		// it last confirmed.
		mayUse := map[string][]uint64{}
		give := func() {
			rv := s.ReaderVersion().Version
			for _, r := range readers {
				if !slices.Contains(mayUse[r], rv) {
					mayUse[r] = append(mayUse[r], rv)
				}
			}
		}
		give()
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for range steps {
			op := rapid.SampledFrom([]string{"start", "applied", "read", "retired", "abandon"}).Draw(t, "op")
			party := rapid.SampledFrom(append(slices.Clone(appliers), append(readers, "stranger")...)).Draw(t, "party")
			// Versions near the rotation's, to hit right and wrong ones.
			version := rapid.Uint64Range(max(s.From, 1)-1, s.To+1).Draw(t, "version")
			var err error
			switch op {
			case "start":
				last++
				if err = s.Start(Live{Version: last, Slot: s.UnusedSlot()}, appliers, readers, "operator", time.Time{}); err != nil {
					last--
				}
			case "applied":
				err = s.ConfirmApplied(party, version, appliers, readers)
			case "read":
				err = s.ConfirmRead(party, version, appliers, readers)
				if err == nil {
					// It was recreated and authenticated with version:
					// what it was given before is no longer in use.
					mayUse[party] = []uint64{version}
				}
			case "retired":
				err = s.ConfirmRetired(party, version, appliers, readers)
			case "abandon":
				err = s.Abandon(appliers, readers)
			}
			if err != nil && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrNoRotation) {
				t.Fatalf("%s: unexpected error %v", op, err)
			}
			give()

			live := map[uint64]client.Slot{}
			slots := map[client.Slot]bool{}
			for _, l := range s.Live() {
				live[l.Version] = l.Slot
				if slots[l.Slot] {
					t.Fatalf("two live values in slot %q: %+v", l.Slot, s)
				}
				slots[l.Slot] = true
			}
			for _, r := range readers {
				for _, v := range mayUse[r] {
					if _, ok := live[v]; !ok {
						t.Fatalf("version %d was retired while reader %s may still use it: %+v", v, r, s)
					}
				}
			}
			if s.Current.Version > last || (s.Next != nil && s.Next.Version != last) {
				t.Fatalf("versions out of order: last made %d, state %+v", last, s)
			}
		}
	})
}
