package reconciler

import (
	"slices"
	"testing"

	schema "github.com/meshgen/meshgen/catalog-schema"
)

// TestUndeliveredOperatorSecretWaits: an operator secret the vault has not
// been given yet ([ResolveOptions.Undelivered]) makes its consumer wait with
// the hint to deliver it; the vault is not asked for it and nothing that
// reads it is rendered. A name that is not an operator secret is made by the
// vault whatever the set says.
func TestUndeliveredOperatorSecretWaits(t *testing.T) {
	const name = "app@n2.key"
	tests := []struct {
		name        string
		operator    bool
		undelivered map[string]bool
		wantWaiting bool
	}{
		{name: "operator secret not delivered", operator: true, undelivered: map[string]bool{name: true}, wantWaiting: true},
		{name: "operator secret delivered", operator: true},
		{name: "another secret not delivered", operator: true, undelivered: map[string]bool{"other@n1.key": true}},
		{name: "vault-made secret named", undelivered: map[string]bool{name: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := goRepo()
			app := repo.Modules["app"]
			for i := range app.Requires {
				if app.Requires[i].Name == "key" {
					app.Requires[i].Spec = &schema.SecretSpec{Operator: tt.operator}
				}
			}
			res := mustResolve(t, repo, ResolveOptions{Undelivered: tt.undelivered})
			i := slices.IndexFunc(res.Waiting, func(w Waiting) bool { return w.Assignment == "app@n2" && w.Requirement == "key" })
			if got := i >= 0; got != tt.wantWaiting {
				t.Fatalf("waiting %+v: app@n2/key waiting %v, want %v", res.Waiting, got, tt.wantWaiting)
			}
			asked := slices.ContainsFunc(res.Secrets, func(s SecretNeed) bool { return s.Name == name })
			if asked == tt.wantWaiting {
				t.Fatalf("secrets %+v: %s asked of the vault %v, want %v", res.Secrets, name, asked, !tt.wantWaiting)
			}
			if !slices.ContainsFunc(res.Secrets, func(s SecretNeed) bool { return s.Name == "db.app@n2.db" }) {
				t.Fatalf("secrets %+v: the database password is no longer asked", res.Secrets)
			}
			a := assignment(res, "app@n2")
			if got := slices.Contains(a.Skipped, "key"); got != tt.wantWaiting {
				t.Fatalf("skipped %v: key skipped %v, want %v", a.Skipped, got, tt.wantWaiting)
			}
			if slices.Contains(a.Skipped, "pw") || slices.Contains(a.Skipped, "server") {
				t.Fatalf("skipped %v: resources not reading the secret were left out", a.Skipped)
			}
			if !tt.wantWaiting {
				return
			}
			if w := res.Waiting[i]; w.Hint != "meshgen vault put "+name || w.Provider != "vault@n1" {
				t.Fatalf("waiting %+v: want provider vault@n1 and hint `meshgen vault put %s`", w, name)
			}
			decls, err := Render(res, Unsealed{})
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			for _, r := range decls["n2"].Resources {
				if r.File != nil && r.File.Secret != nil && r.File.Secret.Name == name {
					t.Fatalf("n2's declaration renders %s before it is delivered", name)
				}
			}
		})
	}
}
