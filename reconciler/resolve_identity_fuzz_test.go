package reconciler

import "testing"

// FuzzDeriveIdentity: for any two different assignments, the logins differ
// and the names differ, every login and second login fits the tightest
// backend, and no second login is another assignment's login or second
// login.
func FuzzDeriveIdentity(f *testing.F) {
	seeds := [][4]string{
		{"a-b", "c", "a", "b-c"},
		{"gitea", "n2", "gitea", "n3"},
		{"a--b", "c", "a", "-b-c"},
		{"mosquitto-exporter", "node-eu-west-17", "mosquitto-exporter", "node-eu-west-18"},
		{"x", "y", "x_", "y"},
		{"m", "x", "m", "x-b"},
		{"m", "x-b", "m", "x"},
		{"store", "a-very-long-node-name-for-this", "store", "a-very-long-node-name-for-thi"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, m1, n1, m2, n2 string) {
		a, b := DeriveIdentity(m1, n1), DeriveIdentity(m2, n2)
		for _, id := range []Identity{a, b} {
			for _, l := range []string{id.Login, SlotLogin(id.Login, "b")} {
				if len(l) > LoginMaxLen || !validLogin(l) {
					t.Fatalf("login %q does not fit", l)
				}
			}
			if len(id.Name) > NameMaxLen || id.Name == "" {
				t.Fatalf("name %q does not fit", id.Name)
			}
		}
		if m1+"@"+n1 == m2+"@"+n2 {
			if a != b {
				t.Fatalf("one assignment, two identities: %+v %+v", a, b)
			}
			return
		}
		if a.Login == b.Login {
			t.Fatalf("%s@%s and %s@%s share login %q", m1, n1, m2, n2, a.Login)
		}
		for _, l := range []string{a.Login, SlotLogin(a.Login, "b")} {
			if l == SlotLogin(b.Login, "b") || l == b.Login {
				t.Fatalf("%s@%s and %s@%s share login %q", m1, n1, m2, n2, l)
			}
		}
		if SlotLogin(a.Login, "b") == a.Login {
			t.Fatalf("%s@%s: its second login is its first", m1, n1)
		}
		if a.Name == b.Name {
			t.Fatalf("%s@%s and %s@%s share name %q", m1, n1, m2, n2, a.Name)
		}
	})
}
