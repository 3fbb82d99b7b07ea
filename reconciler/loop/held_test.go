package loop

import (
	"reflect"
	"strings"
	"testing"

	"github.com/meshgen/meshgen/reconciler"
	"github.com/meshgen/meshgen/vaultd/client"
)

// TestHeldOf: what vaultd seals to a recipient in a role becomes what the
// renderer declares, in each phase of a rotation.
func TestHeldOf(t *testing.T) {
	const name = "s"
	item := func(version uint64, slot client.Slot, it client.Item, current bool) client.Sealed {
		return client.Sealed{Version: version, Slot: slot, Item: it, Current: current, SHA256: strings.Repeat("0", 64)}
	}
	cred := func(version uint64, slot string) reconciler.Credential {
		return reconciler.Credential{Slot: slot, SealedSecret: reconciler.SealedSecret{Version: version, SHA256: strings.Repeat("0", 64), Path: reconciler.SealedPath(name, version)}}
	}
	withDerived := func(c reconciler.Credential) reconciler.Credential {
		c.Derived = &reconciler.SealedSecret{Version: c.Version, SHA256: strings.Repeat("0", 64), Path: reconciler.DerivedPath(name, c.Version)}
		return c
	}
	ptr := func(c reconciler.Credential) *reconciler.Credential { return &c }
	retiring := func(slot client.Slot) []client.SlotState {
		return []client.SlotState{{Slot: slot, Version: 1, State: "retiring"}}
	}
	tests := []struct {
		name  string
		role  reconciler.Role
		items []client.Sealed
		slots []client.SlotState
		want  reconciler.Held
		err   string
	}{
		{"a reader outside a rotation", reconciler.Reader,
			[]client.Sealed{item(1, client.SlotA, client.ItemValue, true)}, nil,
			reconciler.Held{Current: cred(1, "a")}, ""},
		{"an applier outside a rotation, with the derived form", reconciler.Applier,
			[]client.Sealed{item(1, client.SlotA, client.ItemValue, true), item(1, client.SlotA, client.ItemDerived, true)}, nil,
			reconciler.Held{Current: withDerived(cred(1, "a"))}, ""},
		{"an applier while applying: both values, each with its derived form", reconciler.Applier,
			[]client.Sealed{item(1, client.SlotA, client.ItemValue, true), item(1, client.SlotA, client.ItemDerived, true),
				item(2, client.SlotB, client.ItemValue, false), item(2, client.SlotB, client.ItemDerived, false)}, nil,
			reconciler.Held{Current: withDerived(cred(1, "a")), Next: ptr(withDerived(cred(2, "b")))}, ""},
		{"a reader once readers moved", reconciler.Reader,
			[]client.Sealed{item(2, client.SlotB, client.ItemValue, true)}, nil,
			reconciler.Held{Current: cred(2, "b")}, ""},
		{"an applier while retiring", reconciler.Applier,
			[]client.Sealed{item(2, client.SlotB, client.ItemValue, true)}, retiring(client.SlotA),
			reconciler.Held{Current: cred(2, "b"), Retire: "a"}, ""},
		{"a one-party applier staged", reconciler.Applier,
			[]client.Sealed{item(3, "", client.ItemValue, true), item(4, "", client.ItemValue, false)}, nil,
			reconciler.Held{Current: cred(3, ""), Next: ptr(cred(4, ""))}, ""},
		{"a reader retires nothing", reconciler.Reader,
			[]client.Sealed{item(2, client.SlotB, client.ItemValue, true)}, retiring(client.SlotA),
			reconciler.Held{Current: cred(2, "b")}, ""},
		{"nothing sealed", reconciler.Reader, nil, nil, reconciler.Held{}, "no value in use"},
		{"a reader given two values", reconciler.Reader,
			[]client.Sealed{item(1, client.SlotA, client.ItemValue, true), item(2, client.SlotB, client.ItemValue, false)}, nil,
			reconciler.Held{}, "more values"},
		{"only a staged value", reconciler.Applier,
			[]client.Sealed{item(2, client.SlotB, client.ItemValue, false)}, nil,
			reconciler.Held{}, "no value in use"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := heldOf(name, tt.role, tt.items, tt.slots)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want an error saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
