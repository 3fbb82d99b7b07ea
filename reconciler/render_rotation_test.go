package reconciler

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/meshgen/meshgen/hostd/declaration"
)

// phaseSealed is a SealedSecrets answering, by secret and role, what every
// node holds in one phase of a rotation: a stand-in for the loop's view of
// vaultd.
type phaseSealed map[string]Held

func (p phaseSealed) Sealed(name, _ string, role Role) (Held, bool) {
	h, ok := p[name+"/"+string(role)]
	return h, ok
}

// TestRenderRotationPhases renders testdata/resolve/rotation.txtar through
// every phase of a two-party rotation of gitea's database credential, and of
// a one-party rotation of postgres's own superuser password, which postgres
// applies (design 27, "Rotation"; ADR 0114).
func TestRenderRotationPhases(t *testing.T) {
	const (
		db        = "postgres-database.gitea@n2.db"
		superuser = "postgres@n1.superuser"
	)
	cred := func(name string, version uint64, slot string) Credential {
		return Credential{Slot: slot, SealedSecret: SealedSecret{Version: version, SHA256: strings.Repeat("1", 64), Path: SealedPath(name, version)},
			Derived: &SealedSecret{Version: version, SHA256: strings.Repeat("2", 64), Path: DerivedPath(name, version)}}
	}
	ptr := func(c Credential) *Credential { return &c }
	reader := func(c Credential) Held { c.Derived = nil; return Held{Current: c} }
	phases := []struct {
		name   string
		sealed phaseSealed
		want   string
	}{
		{"idle", phaseSealed{
			db + "/applier": {Current: cred(db, 1, "a")}, db + "/reader": reader(cred(db, 1, "a")),
			superuser + "/applier": {Current: cred(superuser, 1, "")},
		}, "postgres ensures gitea__n2=1+bcrypt, retires -; superuser 1; gitea presents gitea__n2=1"},
		{"applying", phaseSealed{
			db + "/applier": {Current: cred(db, 1, "a"), Next: ptr(cred(db, 2, "b"))}, db + "/reader": reader(cred(db, 1, "a")),
			superuser + "/applier": {Current: cred(superuser, 1, ""), Next: ptr(cred(superuser, 2, ""))},
		}, "postgres ensures gitea__n2=1+bcrypt gitea__n2__b=2+bcrypt, retires -; superuser 1 next 2 (restarts provision); gitea presents gitea__n2=1"},
		{"reading", phaseSealed{
			db + "/applier": {Current: cred(db, 1, "a"), Next: ptr(cred(db, 2, "b"))}, db + "/reader": reader(cred(db, 2, "b")),
			superuser + "/applier": {Current: cred(superuser, 2, "")},
		}, "postgres ensures gitea__n2=1+bcrypt gitea__n2__b=2+bcrypt, retires -; superuser 2; gitea presents gitea__n2__b=2"},
		{"retiring", phaseSealed{
			db + "/applier": {Current: cred(db, 2, "b"), Retire: "a"}, db + "/reader": reader(cred(db, 2, "b")),
			superuser + "/applier": {Current: cred(superuser, 2, "")},
		}, "postgres ensures gitea__n2__b=2+bcrypt, retires gitea__n2; superuser 2; gitea presents gitea__n2__b=2"},
		{"abandoned while applying", phaseSealed{
			db + "/applier": {Current: cred(db, 1, "a"), Retire: "b"}, db + "/reader": reader(cred(db, 1, "a")),
			superuser + "/applier": {Current: cred(superuser, 1, "")},
		}, "postgres ensures gitea__n2=1+bcrypt, retires gitea__n2__b; superuser 1; gitea presents gitea__n2=1"},
		{"the next rotation, back to slot a", phaseSealed{
			db + "/applier": {Current: cred(db, 2, "b"), Next: ptr(cred(db, 3, "a"))}, db + "/reader": reader(cred(db, 3, "a")),
			superuser + "/applier": {Current: cred(superuser, 2, "")},
		}, "postgres ensures gitea__n2__b=2+bcrypt gitea__n2=3+bcrypt, retires -; superuser 2; gitea presents gitea__n2=3"},
	}
	repo, opts := loadCase(t, "rotation")
	res, err := Resolve(repo, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("retiring the slot in use is refused", func(t *testing.T) {
		_, err := Render(res, phaseSealed{
			db + "/applier": {Current: cred(db, 2, "b"), Retire: "b"}, db + "/reader": reader(cred(db, 2, "b")),
			superuser + "/applier": {Current: cred(superuser, 2, "")},
		})
		if err == nil || !strings.Contains(err.Error(), "would retire login gitea__n2__b while it is in use") {
			t.Fatalf("got %v", err)
		}
	})
	for _, p := range phases {
		t.Run(p.name, func(t *testing.T) {
			decls, err := Render(res, p.sealed)
			if err != nil {
				t.Fatal(err)
			}
			if got := rotationView(t, decls["n1"], decls["n2"]); got != p.want {
				t.Errorf("rendered\n%s\nwant\n%s", got, p.want)
			}
		})
	}
}

// rotationView says what n1 and n2 of the rotation case are declared.
func rotationView(t *testing.T, n1, n2 *declaration.Declaration) string {
	t.Helper()
	byID := map[string]declaration.Resource{}
	for _, r := range n1.Resources {
		byID[r.ID] = r
	}
	var info struct {
		Credentials []struct{ Login, SecretFile, DerivedFile string }
		Retire      []struct{ Login string }
	}
	if err := json.Unmarshal([]byte(byID["postgres/mesh.consumer.gitea__n2.db.json"].File.Content), &info); err != nil {
		t.Fatal(err)
	}
	// file returns the consumers directory's file named name, checking it
	// is declared at that name and restarts the provisioner.
	file := func(name string) *declaration.File {
		r, ok := byID["postgres/mesh.consumer."+name]
		if !ok || path.Base(r.File.Path) != name || r.File.Secret == nil {
			t.Fatalf("no secret file %s beside the consumer's JSON", name)
		}
		if !slices.Contains(byID["postgres/provision"].Container.RestartOn, r.ID) {
			t.Fatalf("%s does not restart the provisioner", r.ID)
		}
		return r.File
	}
	var ensures, retires []string
	for _, c := range info.Credentials {
		e := fmt.Sprintf("%s=%d", c.Login, file(c.SecretFile).Secret.Version)
		if c.DerivedFile != "" {
			if d := file(c.DerivedFile); !strings.HasSuffix(d.Secret.Sealed, ".derived.age") {
				t.Fatalf("%s holds %s, not a derived form", c.DerivedFile, d.Secret.Sealed)
			}
			e += "+" + strings.TrimPrefix(path.Ext(c.DerivedFile), ".")
		}
		ensures = append(ensures, e)
	}
	for _, r := range info.Retire {
		retires = append(retires, r.Login)
	}
	if len(retires) == 0 {
		retires = []string{"-"}
	}
	su := fmt.Sprint(byID["postgres/superuser"].File.Secret.Version)
	if next, ok := byID["postgres/mesh.next.superuser"]; ok {
		if next.File.Path != byID["postgres/superuser"].File.Path+".next" {
			t.Fatalf("the staged superuser password is at %s", next.File.Path)
		}
		su += fmt.Sprintf(" next %d", next.File.Secret.Version)
		if slices.Contains(byID["postgres/provision"].Container.RestartOn, next.ID) {
			su += " (restarts provision)"
		}
	}
	var login string
	var reads uint64
	for _, r := range n2.Resources {
		switch r.ID {
		case "gitea/server":
			login = r.Container.Env["DB_USER"]
			if r.Container.Env["DB_NAME"] != "gitea__n2" {
				t.Fatalf("gitea's database is %q: it must stay named for its identity", r.Container.Env["DB_NAME"])
			}
		case "gitea/db-password":
			reads = r.File.Secret.Version
		}
	}
	return fmt.Sprintf("postgres ensures %s, retires %s; superuser %s; gitea presents %s=%d",
		strings.Join(ensures, " "), strings.Join(retires, " "), su, login, reads)
}

// TestProviderHolds: over two credentials a provider ensures every live
// value; in place it sets the consumer's one login to the newest.
func TestProviderHolds(t *testing.T) {
	v := func(version uint64, slot string) Credential {
		return Credential{Slot: slot, SealedSecret: SealedSecret{Version: version}}
	}
	next := v(2, "b")
	tests := []struct {
		name     string
		held     Held
		twoParty bool
		want     []uint64
	}{
		{"two-party, no rotation", Held{Current: v(1, "a")}, true, []uint64{1}},
		{"two-party, rotating", Held{Current: v(1, "a"), Next: &next}, true, []uint64{1, 2}},
		{"one-party, no rotation", Held{Current: v(1, "")}, false, []uint64{1}},
		{"one-party, staged", Held{Current: v(1, ""), Next: &next}, false, []uint64{2}},
	}
	for _, tt := range tests {
		var got []uint64
		for _, c := range providerHolds(tt.held, tt.twoParty) {
			got = append(got, c.Version)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: ensures versions %v, want %v", tt.name, got, tt.want)
		}
	}
}
