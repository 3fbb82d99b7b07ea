package vaultd

import (
	"regexp"
	"strings"
	"testing"
)

// nameRE is the rule validName implements.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@:/-]{0,199}$`)

// FuzzValidName: validName takes exactly the names nameRE matches.
func FuzzValidName(f *testing.F) {
	for _, s := range []string{"", "a", "db/password", "mesh@n1:x.y_z-w", "-a", ".a", "a b", "a\n", "é", "a\x00",
		strings.Repeat("a", 200), strings.Repeat("a", 201), "A" + strings.Repeat("/", 199), "a|b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validName(s), nameRE.MatchString(s); got != want {
			t.Fatalf("validName(%q) = %v, the rule says %v", s, got, want)
		}
	})
}
