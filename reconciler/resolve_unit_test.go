package reconciler

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/hostd/declaration"
)

// These tests build repositories in Go, for the refusals the loader already
// makes itself (so no YAML repository reaches resolution with them) and for
// properties of single functions.

const digest = "@sha256:0000000000000000000000000000000000000000000000000000000000000000"

// goRepo is a small mesh: a vault, a database provider, a consumer with a
// host directory and port.
func goRepo() *schema.Repo {
	return &schema.Repo{
		Mesh: schema.Mesh{Name: "unit"},
		Nodes: map[string]*schema.Node{
			"n1": {Name: "n1", Facts: schema.NodeFacts{Address: "10.0.0.1"}},
			"n2": {Name: "n2", Facts: schema.NodeFacts{Address: "10.0.0.2"}},
		},
		Contracts: map[string]*schema.Contract{
			"db": {Name: "db", Fields: map[string]schema.Field{
				"host":     {Type: schema.TypeHost},
				"user":     {Type: schema.TypeString},
				"password": {Type: schema.TypeString, Secret: true, MinLength: 24},
			}, PerConsumerSecret: &schema.PerConsumerSecret{Field: "password", Spec: schema.SecretSpec{Length: 16, Alphabet: "alnum"}}},
		},
		Modules: map[string]*schema.Module{
			"vault": {Name: "vault", Seats: []string{schema.SeatVault},
				Provides: []schema.Provision{{Contract: schema.ContractSecret, Seat: schema.SeatVault}}},
			"pg": {Name: "pg", Seats: []string{schema.SeatStore},
				Provides: []schema.Provision{{Contract: "db", Seat: schema.SeatStore, Values: map[string]string{"host": "${{ f.address }}"}}},
				Requires: []schema.Requirement{{Name: "f", Provider: schema.ProviderHost, Contract: schema.ContractHostFacts}}},
			"app": {Name: "app",
				Requires: []schema.Requirement{
					{Name: "db", Provider: schema.ProviderModule, Contract: "db", Narrow: map[string]schema.Field{"password": {MinLength: 40}}},
					{Name: "data", Provider: schema.ProviderHost, Contract: schema.ContractHostDir},
					{Name: "web", Provider: schema.ProviderHost, Contract: schema.ContractHostPort},
					{Name: "api", Provider: schema.ProviderHost, Contract: schema.ContractHostPort},
					{Name: "key", Provider: schema.ProviderModule, Contract: schema.ContractSecret, Seat: schema.SeatVault},
				},
				Resources: []schema.Resource{
					{Directory: "data", Path: "${{ data.path }}"},
					{File: "pw", Path: "${{ data.path }}/pw", Secret: "${{ db.password }}"},
					{File: "key", Path: "${{ data.path }}/key", Secret: "${{ key.value }}"},
					{Container: "server", Image: "example.org/app" + digest,
						Env:    map[string]string{"DB_HOST": "${{ db.host }}"},
						Mounts: []schema.Mount{{Source: "${{ data.path }}", Target: "/data"}},
						Ports:  []schema.Port{{Host: "${{ web.port }}", Container: 80}}},
				}},
		},
		Assignments: []*schema.Assignment{
			{Node: "n1", Module: "vault", Seats: []string{schema.SeatVault}},
			{Node: "n1", Module: "pg"},
			{Node: "n2", Module: "app"},
		},
	}
}

func mustResolve(t *testing.T, repo *schema.Repo, opts ResolveOptions) *Resolution {
	t.Helper()
	res, err := Resolve(repo, opts)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	return res
}

func assignment(res *Resolution, id string) *Resolved {
	for _, a := range res.Assignments {
		if a.ID == id {
			return a
		}
	}
	return nil
}

// TestRefusalsTheLoaderMakesFirst covers the refusals resolution makes
// again for repositories built without the loader.
func TestRefusalsTheLoaderMakesFirst(t *testing.T) {
	tests := []struct {
		name   string
		change func(*schema.Repo)
		want   ReasonKind
		says   string
	}{
		{"module assigned twice to a node", func(r *schema.Repo) {
			r.Assignments = append(r.Assignments, &schema.Assignment{Node: "n1", Module: "pg", Pos: schema.Pos{File: "assignments/n1/pg.yml"}})
		}, AssignedTwice, `module "pg" is assigned twice to node "n1"`},
		{"host requirement placed elsewhere", func(r *schema.Repo) {
			r.Assignments[2].Pins = map[string]string{"data": "pg@n1"}
		}, HostElsewhere, `answered by the module's own node "n2", not by pg@n1`},
		{"placement not absolute", func(r *schema.Repo) {
			r.Assignments[2].Placements = map[string]string{"data": "srv/app"}
		}, BadPlacement, `placement "srv/app" is not an absolute, clean path`},
		{"placement not clean", func(r *schema.Repo) {
			r.Assignments[2].Placements = map[string]string{"data": "/srv/../etc"}
		}, BadPlacement, `is not an absolute, clean path`},
		{"placement of a port", func(r *schema.Repo) {
			r.Assignments[2].Placements = map[string]string{"web": "/srv/web"}
		}, BadPlacement, "placement names no host-directory requirement"},
		{"placement onto another assignment's directory", func(r *schema.Repo) {
			r.Modules["other"] = r.Modules["app"]
			r.Assignments = append(r.Assignments, &schema.Assignment{Node: "n2", Module: "other",
				Placements: map[string]string{"data": "/var/lib/meshgen/app/data"}})
		}, BadPlacement, `directory /var/lib/meshgen/app/data is also app@n2's "data" on node "n2"`},
		{"pin on a secret", func(r *schema.Repo) {
			r.Assignments[2].Pins = map[string]string{"key": "pg@n1"}
		}, BadPin, "a pin cannot choose another provider"},
		{"pin naming no assignment", func(r *schema.Repo) {
			r.Assignments[2].Pins = map[string]string{"db": "pg@n9"}
		}, BadPin, `pin "pg@n9" names no assignment`},
		{"pin on a provider of another contract", func(r *schema.Repo) {
			r.Assignments[2].Pins = map[string]string{"db": "vault@n1"}
		}, BadPin, `pinned vault@n1 does not provide "db"`},
		{"seat the module cannot hold", func(r *schema.Repo) {
			r.Assignments[2].Seats = []string{schema.SeatStore}
		}, BadSeat, `module "app" cannot hold seat "mesh-store"`},
		{"missing fact", func(r *schema.Repo) {
			r.Nodes["n1"].Facts.Address = ""
		}, Unanswerable, `node "n1" states no address fact`},
		{"no vault for a secret", func(r *schema.Repo) {
			r.Assignments = r.Assignments[1:]
		}, UnheldSeat, `seat "mesh-vault" is held by no assignment`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := goRepo()
			tt.change(repo)
			_, err := Resolve(repo, ResolveOptions{})
			var ref *Refusal
			if !errors.As(err, &ref) {
				t.Fatalf("want a refusal, got %v", err)
			}
			for _, r := range ref.Reasons {
				if r.Kind == tt.want && strings.Contains(r.String(), tt.says) {
					if r.Hint == "" {
						t.Errorf("reason %q has no hint", r)
					}
					return
				}
			}
			t.Fatalf("no %s reason saying %q in:\n%v", tt.want, tt.says, err)
		})
	}
}

// TestPortsAreStableAndUnique: a port the last resolution assigned never
// moves, even when a new assignment would hash onto it; no two on a node are
// alike; the same repository gives the same ports without a previous state.
func TestPortsAreStableAndUnique(t *testing.T) {
	repo := goRepo()
	first := mustResolve(t, repo, ResolveOptions{})
	app := assignment(first, "app@n2")
	web, api := app.Values[schema.Ref{Requirement: "web", Field: "port"}].Text, app.Values[schema.Ref{Requirement: "api", Field: "port"}].Text
	if web == api {
		t.Fatalf("two ports on n2 are both %s", web)
	}
	again := mustResolve(t, goRepo(), ResolveOptions{})
	if !reflect.DeepEqual(again.State.Ports, first.State.Ports) {
		t.Fatalf("ports differ between two resolutions of one repository: %v, %v", first.State.Ports, again.State.Ports)
	}

	// A previous state holding a port the hash would not pick is kept.
	prev := first.State
	prev.Ports = map[string]map[string]int{"app@n2": {"web": 20001, "api": first.State.Ports["app@n2"]["api"]}}
	kept := mustResolve(t, goRepo(), ResolveOptions{Previous: &prev})
	if got := kept.State.Ports["app@n2"]["web"]; got != 20001 {
		t.Fatalf("web port moved from 20001 to %d", got)
	}

	// Many assignments on one node, each with two ports: all distinct, and
	// adding one more moves none of the earlier ones.
	big := goRepo()
	for i := 0; i < 300; i++ {
		name := fmt.Sprintf("app%03d", i)
		big.Modules[name] = big.Modules["app"]
		big.Assignments = append(big.Assignments, &schema.Assignment{Node: "n1", Module: name})
	}
	res := mustResolve(t, big, ResolveOptions{})
	seen := map[int]string{}
	for id, ports := range res.State.Ports {
		if !strings.HasSuffix(id, "@n1") {
			continue
		}
		for q, p := range ports {
			if other, dup := seen[p]; dup {
				t.Fatalf("port %d given to both %s and %s/%s", p, other, id, q)
			}
			if p < PortBase || p >= PortBase+PortSpan {
				t.Fatalf("port %d outside [%d, %d)", p, PortBase, PortBase+PortSpan)
			}
			seen[p] = id + "/" + q
		}
	}
	big.Modules["aaa"] = big.Modules["app"]
	big.Assignments = append(big.Assignments, &schema.Assignment{Node: "n1", Module: "aaa"})
	st := res.State
	res2 := mustResolve(t, big, ResolveOptions{Previous: &st})
	for id, ports := range res.State.Ports {
		for q, p := range ports {
			if res2.State.Ports[id][q] != p {
				t.Fatalf("%s/%s moved from %d to %d when aaa@n1 was added", id, q, p, res2.State.Ports[id][q])
			}
		}
	}
}

// TestDeriveIdentity checks logins fit the tightest backend and never
// collide, and that plain names stay readable.
func TestDeriveIdentity(t *testing.T) {
	tests := []struct{ module, node, login, name string }{
		{"gitea", "n2", "gitea__n2", "gitea.n2"},
		{"route-proxy", "eu-west-1", "route_proxy__eu_west_1", "route-proxy.eu-west-1"},
	}
	for _, tt := range tests {
		got := DeriveIdentity(tt.module, tt.node)
		if got.Login != tt.login || got.Name != tt.name {
			t.Errorf("DeriveIdentity(%q, %q) = %+v, want login %q name %q", tt.module, tt.node, got, tt.login, tt.name)
		}
	}
	// Pairs a naive join would make equal, and long names.
	pairs := [][2]string{
		{"a-b", "c"}, {"a", "b-c"}, {"a--b", "c"}, {"a", "-b-c"}, {"a_b", "c"},
		{strings.Repeat("x", 63), "n1"}, {strings.Repeat("x", 63), "n2"},
		{"mosquitto-exporter", "node-eu-west-17"}, {"mosquitto-exporter", "node-eu-west-18"},
		{"9lives", "n1"}, {"Upper", "n1"},
		// A second login "m__x__b" must not be m@x-b's login "m__x_b".
		{"m", "x"}, {"m", "x-b"}, {"m", "x--b"},
	}
	logins, names := map[string]string{}, map[string]string{}
	for _, p := range pairs {
		id := DeriveIdentity(p[0], p[1])
		who := p[0] + "@" + p[1]
		second := SlotLogin(id.Login, "b")
		for _, l := range []string{id.Login, second} {
			if len(l) > LoginMaxLen || !validLogin(l) {
				t.Errorf("%s: login %q does not fit: at most %d bytes of [a-z0-9_] starting with a letter", who, l, LoginMaxLen)
			}
		}
		if len(id.Name) > NameMaxLen {
			t.Errorf("%s: name %q is longer than %d", who, id.Name, NameMaxLen)
		}
		if other, dup := logins[id.Login]; dup {
			t.Errorf("%s and %s share login %q", who, other, id.Login)
		}
		if other, dup := names[id.Name]; dup {
			t.Errorf("%s and %s share name %q", who, other, id.Name)
		}
		if other, dup := logins[second]; dup || second == id.Login {
			t.Errorf("%s's second login %q is %s's", who, second, other)
		}
		logins[id.Login], logins[second], names[id.Name] = who, who+" (second)", who
	}
}

func validLogin(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// TestCheckAnswer: an answer must carry exactly the contract's fields the
// provider answers at run time, of the right type, and never a secret one.
func TestCheckAnswer(t *testing.T) {
	c := &schema.Contract{Fields: map[string]schema.Field{
		"url":  {Type: schema.TypeString},
		"port": {Type: schema.TypePort},
		"key":  {Type: schema.TypeString, Secret: true},
	}}
	want := []string{"port", "url"}
	tests := []struct {
		name string
		ans  map[string]string
		err  string
	}{
		{"exact", map[string]string{"url": "u", "port": "443"}, ""},
		{"extra field", map[string]string{"url": "u", "port": "443", "root": "x"}, "does not name: root"},
		{"missing field", map[string]string{"url": "u"}, "misses fields the contract names: port"},
		{"secret field", map[string]string{"url": "u", "port": "1", "key": "s3cret"}, "does not name: key"},
		{"wrong type", map[string]string{"url": "u", "port": "https"}, `wrong type: port ("https" is not a number)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkAnswer(c, want, tt.ans)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("got %v, want an error saying %q", err, tt.err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the error carries a secret's value: %v", err)
			}
		})
	}
}

// TestPerConsumerSecretBothRecipients: requiring a database expands into a
// secret named for the consumer, answered by the vault and sealed to the
// provider's node (which applies it) and the consumer's (which reads it).
func TestPerConsumerSecretBothRecipients(t *testing.T) {
	res := mustResolve(t, goRepo(), ResolveOptions{})
	var need *SecretNeed
	for i := range res.Secrets {
		if res.Secrets[i].Name == "db.app@n2.db" {
			need = &res.Secrets[i]
		}
	}
	if need == nil {
		t.Fatalf("no secret db.app@n2.db among %+v", res.Secrets)
	}
	if need.Spec.Length != 40 || need.Spec.Alphabet != "alnum" {
		t.Fatalf("spec %+v: want the consumer's narrowing (length 40) over the contract's 24 and the spec's 16", need.Spec)
	}
	want := []Recipient{{Node: "n1", Role: Applier, Assignment: "pg@n1"}, {Node: "n2", Role: Reader, Assignment: "app@n2"}}
	if !reflect.DeepEqual(need.Recipients, want) {
		t.Fatalf("recipients %+v, want %+v", need.Recipients, want)
	}
	app := assignment(res, "app@n2")
	if got := app.Values[schema.Ref{Requirement: "db", Field: "password"}]; got.Secret != "db.app@n2.db" || got.Text != "" {
		t.Fatalf("app's db.password = %+v, want a reference to db.app@n2.db", got)
	}
	if app.Providers["key"] != "vault@n1" {
		t.Fatalf("app's own secret is provided by %q, want vault@n1", app.Providers["key"])
	}
	if got := app.Values[schema.Ref{Requirement: "db", Field: "user"}].Text; got != "app__n2" {
		t.Fatalf("app's db.user = %q, want its login app__n2 (a per-consumer contract's unstated string field)", got)
	}
	pg := assignment(res, "pg@n1")
	if len(pg.Serves) != 1 || pg.Serves[0].Secret != "db.app@n2.db" || pg.Serves[0].Identity.Login != "app__n2" {
		t.Fatalf("pg serves %+v", pg.Serves)
	}
}

// TestRestartsAreDerived: a secret read at start, in a directory a container
// mounts, recreates the container without a declared restartOn; an applied
// secret (taken by a provisioner) restarts nothing (design 27, "Rotation").
func TestRestartsAreDerived(t *testing.T) {
	repo := goRepo()
	app := repo.Modules["app"]
	app.Requires[4].Restart = "applied" // key: applied; db: read at start
	res := mustResolve(t, repo, ResolveOptions{})
	decls, err := Render(res, Unsealed{})
	if err != nil {
		t.Fatal(err)
	}
	var server *declaration.Container
	for _, r := range decls["n2"].Resources {
		if r.ID == "app/server" {
			server = r.Container
		}
	}
	if server == nil {
		t.Fatal("no app/server on n2")
	}
	if !reflect.DeepEqual(server.RestartOn, []string{"app/pw"}) {
		t.Fatalf("app/server restartOn = %v, want [app/pw]: the read-at-start secret only", server.RestartOn)
	}
	var key *Recipient
	for _, s := range res.Secrets {
		if s.Name == "app@n2.key" {
			key = &s.Recipients[0]
		}
	}
	if key == nil || key.Role != Applier {
		t.Fatalf("app@n2.key recipient %+v, want an applier", key)
	}
}

// TestFifthProviderKindIsRefused: the four kinds are a closed set.
func TestFifthProviderKindIsRefused(t *testing.T) {
	repo := goRepo()
	repo.Modules["app"].Requires = append(repo.Modules["app"].Requires, schema.Requirement{Name: "x", Provider: "oracle"})
	_, err := Resolve(repo, ResolveOptions{})
	var ref *Refusal
	if !errors.As(err, &ref) || len(ref.Reasons) != 1 || !strings.Contains(ref.Reasons[0].Message, `provider kind "oracle" is not one of module, host, mesh, operator`) {
		t.Fatalf("got %v", err)
	}
}

// TestWaitingHoldsBackWhatMountsIt: a container that mounts a file held back
// for a missing answer is held back too, however the path is spelled; what
// does not depend on the answer is delivered.
func TestWaitingHoldsBackWhatMountsIt(t *testing.T) {
	repo := goRepo()
	repo.Contracts["root"] = &schema.Contract{Name: "root", Fields: map[string]schema.Field{"fp": {Type: schema.TypeString}}}
	repo.Modules["ca"] = &schema.Module{Name: "ca",
		Provides:  []schema.Provision{{Contract: "root", Answer: "init"}},
		Resources: []schema.Resource{{Container: "init", Image: "example.org/ca" + digest, RunOnce: true, Answer: "/out/answer.json"}}}
	repo.Modules["web"] = &schema.Module{Name: "web",
		Requires: []schema.Requirement{
			{Name: "ca", Provider: schema.ProviderModule, Contract: "root"},
			{Name: "conf", Provider: schema.ProviderHost, Contract: schema.ContractHostDir},
		},
		Resources: []schema.Resource{
			{Directory: "conf", Path: "${{conf.path}}"},
			{File: "trust", Path: "${{conf.path}}/trust", Content: "${{ ca.fp }}"},
			{Container: "server", Image: "example.org/web" + digest,
				Mounts: []schema.Mount{{Source: "${{ conf.path }}/trust", Target: "/trust"}}},
			{Container: "sidecar", Image: "example.org/web" + digest},
		}}
	repo.Assignments = append(repo.Assignments, &schema.Assignment{Node: "n1", Module: "ca"}, &schema.Assignment{Node: "n2", Module: "web"})
	res := mustResolve(t, repo, ResolveOptions{})
	web := assignment(res, "web@n2")
	if !reflect.DeepEqual(web.Skipped, []string{"trust", "server"}) {
		t.Fatalf("held back %v, want [trust server]", web.Skipped)
	}
	decls, err := Render(res, Unsealed{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range decls["n2"].Resources {
		if r.Module == "web" {
			ids = append(ids, r.ID)
		}
	}
	if !reflect.DeepEqual(ids, []string{"web/conf", "web/sidecar"}) {
		t.Fatalf("delivered %v, want [web/conf web/sidecar]", ids)
	}
}
