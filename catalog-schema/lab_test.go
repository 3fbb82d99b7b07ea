package schema

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// loadLab loads the example mesh.
func loadLab(t *testing.T) *Repo {
	t.Helper()
	r, err := LoadDir("../examples/lab")
	if err != nil {
		t.Fatalf("examples/lab:\n%v", err)
	}
	return r
}

// TestLabModulesParse checks every module directory of the example mesh is
// read, with positions for what it declares.
func TestLabModulesParse(t *testing.T) {
	r := loadLab(t)
	dirs, err := os.ReadDir("../examples/lab/catalog/modules")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != len(r.Modules) {
		t.Errorf("%d module directories, %d modules read", len(dirs), len(r.Modules))
	}
	for _, d := range dirs {
		m, ok := r.Modules[d.Name()]
		if !ok {
			t.Errorf("module %s was not read", d.Name())
			continue
		}
		file := filepath.ToSlash(filepath.Join(ModulesDir, d.Name(), ModuleFile))
		if len(m.Resources) == 0 {
			t.Errorf("%s declares no resources", file)
		}
		for _, res := range m.Resources {
			if res.Pos.File != file || res.Pos.Line < 2 {
				t.Errorf("%s: resource %s has position %v", file, res.Name(), res.Pos)
			}
		}
		for _, req := range m.Requires {
			if req.Pos.File != file || req.Pos.Line < 2 {
				t.Errorf("%s: requirement %s has position %v", file, req.Name, req.Pos)
			}
		}
	}
}

// resource returns a module's resource by name and its index.
func resource(t *testing.T, m *Module, name string) (*Resource, int) {
	t.Helper()
	i := slices.IndexFunc(m.Resources, func(r Resource) bool { return r.Name() == name })
	if i < 0 {
		t.Fatalf("module %s has no resource %s", m.Name, name)
	}
	return &m.Resources[i], i
}

// assignment returns the assignment of module on node.
func assignment(t *testing.T, r *Repo, module, node string) *Assignment {
	t.Helper()
	for _, a := range r.Assignments {
		if a.Module == module && a.Node == node {
			return a
		}
	}
	t.Fatalf("%s is not assigned to %s", module, node)
	return nil
}

// TestLabShowsEveryFeature checks the example mesh shows what issue 2 asks
// of it, so a later edit cannot quietly drop a feature.
func TestLabShowsEveryFeature(t *testing.T) {
	r := loadLab(t)
	if len(r.Nodes) != 3 {
		t.Errorf("%d nodes; want 3", len(r.Nodes))
	}
	for name, n := range r.Nodes {
		if !isAgeRecipient(n.Recipient) {
			t.Errorf("node %s: %q is not an age recipient", name, n.Recipient)
		}
	}
	if a := assignment(t, r, "vault", "n1"); !slices.Contains(a.Seats, SeatVault) {
		t.Error("the vault's assignment does not hold mesh-vault")
	}

	// mosquitto: the run-once step seeds before the broker (ADR 0052); the
	// ACL is created once (ADR 0087).
	mq := r.Modules["mosquitto"]
	initStep, initAt := resource(t, mq, "init")
	_, brokerAt := resource(t, mq, "broker")
	if !initStep.RunOnce || initAt > brokerAt {
		t.Error("mosquitto's init is not a run-once step before the broker")
	}
	if acl, _ := resource(t, mq, "acl"); !acl.CreateOnce {
		t.Error("mosquitto's acl is not createOnce")
	}
	// Its consumers' accounts are made through the running broker: a
	// run-once step after it, in the broker's image.
	broker, _ := resource(t, mq, "broker")
	accounts, accountsAt := resource(t, mq, "accounts")
	if !accounts.RunOnce || accountsAt < brokerAt || accounts.Image != broker.Image {
		t.Error("mosquitto's accounts is not a run-once step after the broker, in its image")
	}
	for _, want := range []string{"/run/meshgen/consumers", "createClient", "setClientPassword", "addClientRole"} {
		if !strings.Contains(strings.Join(accounts.Command, " "), want) {
			t.Errorf("mosquitto's accounts does not mention %s", want)
		}
	}

	// postgres provides postgres-database with a per-consumer secret, and
	// gitea on n2 requires it from postgres on n1.
	if c := r.Contracts["postgres-database"]; c == nil || c.PerConsumerSecret == nil || !c.Fields[c.PerConsumerSecret.Field].Secret {
		t.Error("postgres-database has no per-consumer secret field")
	}
	assignment(t, r, "postgres", "n1")
	// postgres applies it: a run-once step after the server (it talks to
	// the server), in the server's image, creates each consumer's login.
	pg := r.Modules["postgres"]
	pgServer, serverAt := resource(t, pg, "server")
	logins, loginsAt := resource(t, pg, "logins")
	if !logins.RunOnce || loginsAt < serverAt {
		t.Errorf("postgres's logins is not a run-once step after the server (at %d, the server at %d)", loginsAt, serverAt)
	}
	if logins.Image != pgServer.Image {
		t.Errorf("postgres's logins runs %s; want the server's image %s", logins.Image, pgServer.Image)
	}
	script := strings.Join(logins.Command, " ")
	for _, want := range []string{"/run/meshgen/consumers", "CREATE ROLE", "CREATE DATABASE", "PASSWORD", "pg_isready"} {
		if !strings.Contains(script, want) {
			t.Errorf("postgres's logins does not mention %s", want)
		}
	}
	if a := assignment(t, r, "gitea", "n2"); a.Pins["db"] != "postgres@n1" {
		t.Errorf("gitea's db is pinned to %q; want postgres@n1", a.Pins["db"])
	}

	// The proxy's gate names its binding under restartOn; its server names
	// the gate (ADR 0099). The authority answers its root at run time.
	px := r.Modules["proxy"]
	gate, _ := resource(t, px, "gate")
	server, _ := resource(t, px, "server")
	if !gate.RunOnce || !slices.Contains(gate.RestartOn, "ca-binding") {
		t.Error("the proxy's gate is not a run-once step naming ca-binding")
	}
	if !slices.Contains(server.RestartOn, "gate") {
		t.Error("the proxy's server does not name the gate")
	}
	if pr := r.Modules["ca"].Provides[0]; pr.Contract != "certificate-authority" || pr.Answer == "" {
		t.Error("the ca does not answer certificate-authority at run time")
	}

	// A placement, an operator default and an operator value.
	placed := 0
	for _, a := range r.Assignments {
		placed += len(a.Placements)
	}
	if placed == 0 {
		t.Error("no assignment places a host directory")
	}
	var withDefault, withValue bool
	for _, a := range r.Assignments {
		for _, req := range r.Modules[a.Module].Requires {
			if req.Provider != ProviderOperator {
				continue
			}
			if req.Default != nil {
				withDefault = true
			}
			if _, ok := a.Values[req.Name]; ok {
				withValue = true
			}
		}
	}
	if !withDefault || !withValue {
		t.Errorf("operator value with a default: %v, given on an assignment: %v; want both", withDefault, withValue)
	}
}

// TestLabResolves applies the rules of design 27 to the example mesh: every
// module requirement has its provider (the seat's holder, a pin, the one
// on the same node, or the only one), every operator requirement without a
// default has a value, and every seat is held once.
func TestLabResolves(t *testing.T) {
	r := loadLab(t)
	held := map[string][]*Assignment{}
	for _, a := range r.Assignments {
		for _, s := range a.Seats {
			held[s] = append(held[s], a)
		}
	}
	for s, as := range held {
		if len(as) != 1 {
			t.Errorf("seat %s is held by %d assignments", s, len(as))
		}
	}
	provides := func(a *Assignment, contract, seat string) bool {
		return slices.ContainsFunc(r.Modules[a.Module].Provides, func(p Provision) bool {
			return p.Contract == contract && (seat == "" || p.Seat == seat)
		})
	}
	for _, a := range r.Assignments {
		for _, req := range r.Modules[a.Module].Requires {
			id := a.ID() + " requirement " + req.Name
			switch req.Provider {
			case ProviderOperator:
				if _, ok := a.Values[req.Name]; !ok && req.Default == nil {
					t.Errorf("%s has no value and no default", id)
				}
			case ProviderHost:
				if !slices.Contains(hostContracts, req.Contract) {
					t.Errorf("%s: the host does not answer %s", id, req.Contract)
				}
			case ProviderModule:
				var found []string
				switch pin := a.Pins[req.Name]; {
				case req.Seat != "":
					for _, h := range held[req.Seat] {
						if provides(h, req.Contract, req.Seat) {
							found = append(found, h.ID())
						}
					}
				case pin != "":
					for _, p := range r.Assignments {
						if p.ID() == pin && provides(p, req.Contract, "") {
							found = append(found, p.ID())
						}
					}
				default:
					var local, all []string
					for _, p := range r.Assignments {
						if provides(p, req.Contract, "") {
							all = append(all, p.ID())
							if p.Node == a.Node {
								local = append(local, p.ID())
							}
						}
					}
					found = all
					if len(local) > 0 {
						found = local
					}
				}
				if len(found) != 1 {
					t.Errorf("%s (%s): providers %v; want exactly one", id, req.Contract, found)
				}
			}
		}
	}
}
