package schema

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"
)

func TestRefs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Ref
		err  string
	}{
		{in: "", want: nil},
		{in: "no placeholder", want: nil},
		{in: "${{ db.host }}", want: []Ref{{"db", "host"}}},
		{in: "${{db.host}}", want: []Ref{{"db", "host"}}},
		{in: "${{   db.host\t}}", want: []Ref{{"db", "host"}}},
		{in: "postgres://${{ db.user }}@${{ db.host }}:${{ db.port }}/x", want: []Ref{{"db", "user"}, {"db", "host"}, {"db", "port"}}},
		{in: "${{ secret-key.value }}", want: []Ref{{"secret-key", "value"}}},
		{in: "$${{ a.b }}", want: []Ref{{"a", "b"}}},
		{in: "${ db.host }", want: nil},
		{in: "${{ db }}", err: `malformed placeholder "${{ db }}"`},
		{in: "${{ db.host.port }}", err: "malformed placeholder"},
		{in: "${{ .host }}", err: "malformed placeholder"},
		{in: "${{ DB.host }}", err: "malformed placeholder"},
		{in: "${{ db.host", err: `unclosed "${{"`},
		{in: "${{ a.b }} ${{", err: `unclosed "${{"`},
		{in: "${{}}", err: "malformed placeholder"},
	} {
		got, err := Refs(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Refs(%q) = %v, %v; want error %q", tc.in, got, err, tc.err)
			}
		case err != nil:
			t.Errorf("Refs(%q): %v", tc.in, err)
		case !slices.Equal(got, tc.want):
			t.Errorf("Refs(%q) = %v; want %v", tc.in, got, tc.want)
		}
	}
}

func TestExpand(t *testing.T) {
	values := map[Ref]string{{"db", "host"}: "10.0.0.1", {"db", "port"}: "5432", {"me", "login"}: "gitea-n2"}
	lookup := func(r Ref) (string, error) {
		v, ok := values[r]
		if !ok {
			return "", fmt.Errorf("no value for %s", r)
		}
		return v, nil
	}
	for _, tc := range []struct{ in, want, err string }{
		{in: "plain", want: "plain"},
		{in: "${{ db.host }}", want: "10.0.0.1"},
		{in: "${{db.host}}:${{ db.port }}", want: "10.0.0.1:5432"},
		{in: "user=${{ me.login }} end", want: "user=gitea-n2 end"},
		{in: "${{ db.nope }}", err: "expand ${{ db.nope }}: no value for ${{ db.nope }}"},
		{in: "${{ db }}", err: "malformed placeholder"},
	} {
		got, err := Expand(tc.in, lookup)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Expand(%q) = %q, %v; want error %q", tc.in, got, err, tc.err)
			}
		case err != nil:
			t.Errorf("Expand(%q): %v", tc.in, err)
		case got != tc.want:
			t.Errorf("Expand(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
	// A lookup's error is wrapped, so callers can tell it apart.
	sentinel := errors.New("waiting for the provider")
	_, err := Expand("${{ ca.root }}", func(Ref) (string, error) { return "", sentinel })
	if !errors.Is(err, sentinel) {
		t.Errorf("Expand does not wrap the lookup's error: %v", err)
	}
}

func TestBuiltinContracts(t *testing.T) {
	want := map[string][]string{
		ContractSecret:       {"value"},
		ContractHostDir:      {"path"},
		ContractHostPort:     {"port"},
		ContractHostFacts:    {"address", "machines"},
		ContractMeshIdentity: {"login", "name"},
	}
	if got := BuiltinContracts(); !slices.Equal(got, sortedKeys(want)) {
		t.Errorf("BuiltinContracts() = %v", got)
	}
	for name, fields := range want {
		c, ok := BuiltinContract(name)
		if !ok || c.Name != name || !slices.Equal(sortedKeys(c.Fields), fields) {
			t.Errorf("BuiltinContract(%s) = %+v, %v; want fields %v", name, c, ok, fields)
		}
		// Each call returns a copy: changing it changes nothing else.
		c.Fields["extra"] = Field{}
		if again, _ := BuiltinContract(name); len(again.Fields) != len(fields) {
			t.Errorf("BuiltinContract(%s) shares its fields", name)
		}
	}
	if c, _ := BuiltinContract(ContractSecret); !c.Fields["value"].Secret {
		t.Error("the secret contract's value is not secret")
	}
	if _, ok := BuiltinContract("postgres-database"); ok {
		t.Error("postgres-database is not built in")
	}
	r := &Repo{Contracts: map[string]*Contract{"route": {Name: "route"}}}
	if c, ok := r.Contract("route"); !ok || c.Name != "route" {
		t.Error("Repo.Contract does not find the repository's contract")
	}
	if c, ok := r.Contract(ContractHostPort); !ok || c.Fields["port"].Type != TypePort {
		t.Error("Repo.Contract does not find a built-in contract")
	}
	if _, ok := r.Contract("nothing"); ok {
		t.Error("Repo.Contract found a contract that does not exist")
	}
}

// TestAgeRecipients checks the recipient check against real age keys.
func TestAgeRecipients(t *testing.T) {
	for i := 0; i < 20; i++ {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		r := id.Recipient().String()
		if !isAgeRecipient(r) {
			t.Errorf("a real age recipient is refused: %s", r)
		}
		// Any one changed character breaks the checksum.
		for _, pos := range []int{5, len(r) / 2, len(r) - 1} {
			b := []byte(r)
			b[pos] = bech32Charset[(strings.IndexByte(bech32Charset, b[pos])+1)%len(bech32Charset)]
			if isAgeRecipient(string(b)) {
				t.Errorf("a changed recipient is accepted: %s", b)
			}
		}
		if isAgeRecipient(strings.ToUpper(r)) || isAgeRecipient(r[:len(r)-1]) || isAgeRecipient(id.String()) {
			t.Errorf("an upper-case, truncated or identity string is accepted for %s", r)
		}
	}
}

func TestNames(t *testing.T) {
	for s, want := range map[string]bool{
		"a": true, "n1": true, "gitea": true, "mesh-vault": true, "a-b-c9": true,
		strings.Repeat("a", 63): true, strings.Repeat("a", 64): false,
		"": false, "1a": false, "-a": false, "a-": false, "A": false, "a_b": false, "a.b": false, "é": false,
	} {
		if got := isName(s); got != want {
			t.Errorf("isName(%q) = %v; want %v", s, got, want)
		}
	}
}
