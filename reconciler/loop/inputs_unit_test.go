package loop

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/reconciler/branch"
	"github.com/meshgen/meshgen/vaultd/client"
)

// fullStatus is a vaultd status with every field set, so a change to any
// of them can be seen.
func fullStatus() *client.Status {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	party := func(r string, role client.Role) client.Party { return client.Party{Recipient: r, Role: role} }
	return &client.Status{Recipient: "age1vault", Secrets: []client.SecretStatus{
		{Name: "a", Origin: client.OriginMesh, Version: 1, Kind: client.OneParty, Made: t0,
			Slots: []client.SlotState{{Version: 1, State: "current"}}, Appliers: []string{"age1n1"}, Readers: []string{"age1n2"},
			Rotation: &client.Rotation{Name: "a", Kind: client.OneParty, Phase: client.PhaseReading, From: 1, To: 2, Reason: "max-age",
				Started: t0, WaitsOn: []client.Party{party("age1n2", client.RoleReader)}, Confirmed: []client.Party{party("age1n1", client.RoleApplier)}}},
		{Name: "b", Origin: client.OriginGenesis, Version: 3, Kind: client.TwoParty, Made: t0.Add(time.Hour),
			Slots:    []client.SlotState{{Slot: client.SlotA, Version: 3, State: "current"}, {Slot: client.SlotB, Version: 4, State: "next"}},
			Appliers: []string{"age1n1", "age1n3"}, Readers: []string{"age1n2", "age1n3"}, NotRotatable: "initialised once",
			Rotation: &client.Rotation{Name: "b", Kind: client.TwoParty, Phase: client.PhaseApplying, From: 3, To: 4, Abandoned: true,
				Reason: "operator", Started: t0.Add(2 * time.Hour),
				WaitsOn:   []client.Party{party("age1n1", client.RoleApplier), party("age1n3", client.RoleApplier)},
				Confirmed: []client.Party{party("age1n2", client.RoleReader), party("age1n3", client.RoleReader)}}},
	}}
}

// TestVaultDigestCoversStatus: changing any field of vaultd's status, at any
// depth (a new field included, once fullStatus sets it), changes the digest
// a reconcile is skipped on; equal statuses have equal digests.
func TestVaultDigestCoversStatus(t *testing.T) {
	st := fullStatus()
	base, err := vaultDigestOf(st)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := vaultDigestOf(fullStatus()); again != base {
		t.Fatal("equal statuses have different digests")
	}
	seen := map[string]bool{base: true}
	checked := 0
	check := func(path string) {
		checked++
		d, err := vaultDigestOf(st)
		if err != nil {
			t.Fatal(err)
		}
		if seen[d] {
			t.Errorf("changing %s leaves the digest as another status's", path)
		}
		seen[d] = true
	}
	visit(t, reflect.ValueOf(st).Elem(), "Status", check)
	if d, _ := vaultDigestOf(st); d != base {
		t.Fatal("the walk did not restore the status")
	}
	if checked < 40 {
		t.Fatalf("only %d changes were tried", checked)
	}
}

// visit changes each leaf of v in turn, calls check, and restores it;
// shortening each slice counts as a change too.
func visit(t *testing.T, v reflect.Value, path string, check func(string)) {
	t.Helper()
	switch v.Kind() {
	case reflect.Struct:
		if tm, ok := v.Interface().(time.Time); ok {
			v.Set(reflect.ValueOf(tm.Add(time.Nanosecond)))
			check(path)
			v.Set(reflect.ValueOf(tm))
			return
		}
		for i := range v.NumField() {
			visit(t, v.Field(i), path+"."+v.Type().Field(i).Name, check)
		}
	case reflect.Pointer:
		if v.IsNil() {
			t.Fatalf("%s is nil in fullStatus: set it", path)
		}
		old := v.Interface()
		v.SetZero()
		check(path + " (removed)")
		v.Set(reflect.ValueOf(old))
		visit(t, v.Elem(), path, check)
	case reflect.Slice:
		if v.Len() == 0 {
			t.Fatalf("%s is empty in fullStatus: add an element", path)
		}
		for i := range v.Len() {
			visit(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i), check)
		}
		old := v.Interface()
		v.Set(v.Slice(0, v.Len()-1))
		check(path + " (shorter)")
		v.Set(reflect.ValueOf(old))
	case reflect.String:
		old := v.String()
		v.SetString(old + "x")
		check(path)
		v.SetString(old)
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		old := v.Uint()
		v.SetUint(old + 1)
		check(path)
		v.SetUint(old)
	case reflect.Int, reflect.Int64:
		old := v.Int()
		v.SetInt(old + 1)
		check(path)
		v.SetInt(old)
	case reflect.Bool:
		v.SetBool(!v.Bool())
		check(path)
		v.SetBool(!v.Bool())
	default:
		t.Fatalf("%s: a field of kind %s: teach visit and vaultDigestOf about it", path, v.Kind())
	}
}

// TestSealsExplain: the status after the seals is recorded only when what
// the seals answered explains every difference from the status before.
func TestSealsExplain(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	secret := func(name string, version uint64) client.SecretStatus {
		return client.SecretStatus{Name: name, Origin: client.OriginMesh, Version: version, Kind: client.OneParty, Made: t0,
			Slots: []client.SlotState{{Version: version, State: "current"}}, Appliers: []string{"age1n1"}, Readers: []string{"age1n2"}}
	}
	asked := func(name string, version uint64, rot *client.Rotation) askedSeal {
		return askedSeal{
			req:  client.SealRequest{Name: name, Appliers: []string{"age1n1"}, Recipients: []string{"age1n2"}},
			resp: &client.SealResponse{Name: name, Origin: client.OriginMesh, Version: version, Slots: []client.SlotState{{Version: version, State: "current"}}, Rotation: rot},
		}
	}
	status := func(s ...client.SecretStatus) *client.Status {
		return &client.Status{Recipient: "age1vault", Secrets: s}
	}
	rotating := secret("a", 1)
	rotating.Rotation = &client.Rotation{Name: "a", Kind: client.OneParty, Phase: client.PhaseApplying, From: 1, To: 2, Started: t0}
	readers := secret("a", 1)
	readers.Readers = []string{"age1n2", "age1n3"}
	for _, tt := range []struct {
		name          string
		before, after *client.Status
		asked         map[string]askedSeal
		want          bool
	}{
		{"nothing changed", status(secret("a", 1), secret("b", 1)), status(secret("a", 1), secret("b", 1)),
			map[string]askedSeal{"a": asked("a", 1, nil)}, true},
		{"the seal made the secret", status(secret("b", 1)), status(secret("a", 1), secret("b", 1)),
			map[string]askedSeal{"a": asked("a", 1, nil)}, true},
		{"a rotation started after the seal", status(secret("a", 1)), status(rotating),
			map[string]askedSeal{"a": asked("a", 1, nil)}, false},
		{"a rotation started between the status and the seal", status(secret("a", 1)), status(rotating),
			map[string]askedSeal{"a": asked("a", 1, rotating.Rotation)}, false},
		{"the seal made the secret and started its rotation", status(), status(rotating),
			map[string]askedSeal{"a": asked("a", 1, rotating.Rotation)}, false},
		{"a rotation in progress, unmoved", status(rotating), status(rotating),
			map[string]askedSeal{"a": asked("a", 1, rotating.Rotation)}, true},
		{"a new value between the status and the seal", status(secret("a", 1)), status(secret("a", 2)),
			map[string]askedSeal{"a": asked("a", 2, nil)}, false},
		{"a new value after the seal", status(secret("a", 1)), status(secret("a", 2)),
			map[string]askedSeal{"a": asked("a", 1, nil)}, false},
		{"recipients other than asked", status(secret("a", 1)), status(readers),
			map[string]askedSeal{"a": asked("a", 1, nil)}, false},
		{"a secret not sealed changed", status(secret("a", 1), secret("b", 1)), status(secret("a", 1), secret("b", 2)),
			map[string]askedSeal{"a": asked("a", 1, nil)}, false},
		{"a secret not sealed appeared", status(secret("a", 1)), status(secret("a", 1), secret("b", 1)),
			map[string]askedSeal{"a": asked("a", 1, nil)}, false},
		{"a secret not sealed vanished", status(secret("a", 1), secret("b", 1)), status(secret("a", 1)),
			map[string]askedSeal{"a": asked("a", 1, nil)}, false},
		{"a sealed secret vanished", status(secret("a", 1)), status(),
			map[string]askedSeal{"a": asked("a", 1, nil)}, false},
		{"another vault", status(secret("a", 1)), &client.Status{Recipient: "age1other", Secrets: []client.SecretStatus{secret("a", 1)}},
			map[string]askedSeal{"a": asked("a", 1, nil)}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := sealsExplain(tt.before, tt.after, tt.asked); got != tt.want {
				t.Errorf("sealsExplain = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestInputsOfRefusesToRecord: a reconcile that confirmed a rotation step,
// or whose render was superseded, records no inputs, so the next reconcile
// runs in full (the step confirmed moved vaultd; a newer main was rendered).
func TestInputsOfRefusesToRecord(t *testing.T) {
	st := fullStatus()
	obs := &observed{main: "m", status: map[string]string{}, nodes: map[string]string{}, vault: st, digest: "d"}
	// Observed by generation: no status was read before the reconcile's own.
	byGen := &observed{main: "m", status: map[string]string{}, nodes: map[string]string{}, digest: "d"}
	r := &Reconciler{build: "b", signer: "s"}
	wr := &branch.Result{Nodes: []branch.NodeResult{{Node: "n1", Commit: "c1"}}}
	repo := &schema.Repo{Source: "m"}
	for _, tt := range []struct {
		name   string
		obs    *observed
		st     *client.Status
		signer string
		out    Outcome
		record bool
	}{
		{"settled", obs, st, "s", Outcome{}, true},
		{"a step confirmed", obs, st, "s", Outcome{Confirmed: []Confirmation{{Secret: "a", Node: "n1"}}}, false},
		{"superseded", obs, st, "s", Outcome{Superseded: []string{"n1"}}, false},
		{"vaultd read again", obs, fullStatus(), "s", Outcome{}, false},
		{"nothing observed", nil, st, "s", Outcome{}, false},
		{"a signer without a public key", obs, st, "", Outcome{}, false},
		{"settled, by generation", byGen, fullStatus(), "s", Outcome{}, true},
		{"a step confirmed, by generation", byGen, st, "s", Outcome{Confirmed: []Confirmation{{Secret: "a", Node: "n1"}}}, false},
		{"no status, by generation", byGen, nil, "s", Outcome{}, false},
		{"the vault not fingerprinted", &observed{main: "m", status: map[string]string{}, nodes: map[string]string{}}, st, "s", Outcome{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r.signer = tt.signer
			rec := r.inputsOf(tt.obs, repo, tt.st, wr, &tt.out)
			if (rec != nil) != tt.record {
				t.Fatalf("recorded %+v; want a record: %v", rec, tt.record)
			}
			if rec != nil && (rec.Main != "m" || rec.Vault != "d" || rec.Nodes["n1"] != "c1" || rec.Build != "b" || rec.Signer != "s") {
				t.Errorf("record %+v", rec)
			}
		})
	}
}
