package reconciler

import (
	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/hostd/declaration"
)

// PortsFromDeclarations recovers, from the declarations last committed, the
// ports the host assigned to repo's assignments: a container port published
// as ${{ <requirement>.port }} in a definition is read back from the same
// container and position in the node's declaration. It is for a caller that
// keeps no [State]: ports published this way then never move. A port that
// is only read into an environment or a file is not recovered, nor is a
// port whose container or position changed; those are derived anew.
func PortsFromDeclarations(repo *schema.Repo, decls map[string]*declaration.Declaration) map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, a := range repo.Assignments {
		d := decls[a.Node]
		m := repo.Modules[a.Module]
		if d == nil || m == nil {
			continue
		}
		var containers map[string]*declaration.Container
		for _, src := range m.Resources {
			if src.Container == "" || len(src.Ports) == 0 {
				continue
			}
			if containers == nil {
				containers = map[string]*declaration.Container{}
				for _, r := range d.Resources {
					if r.Container != nil && r.Module == a.Module {
						containers[r.ID] = r.Container
					}
				}
			}
			c := containers[a.Module+"/"+src.Container]
			if c == nil || len(c.Ports) != len(src.Ports) {
				continue
			}
			for i, p := range src.Ports {
				refs, err := schema.Refs(p.Host)
				if err != nil || len(refs) != 1 || refs[0].Field != "port" || !isOnlyRef(p.Host) {
					continue
				}
				if !isHostPort(m, refs[0].Requirement) {
					continue
				}
				if out[a.ID()] == nil {
					out[a.ID()] = map[string]int{}
				}
				out[a.ID()][refs[0].Requirement] = c.Ports[i].Host
			}
		}
	}
	return out
}

func isHostPort(m *schema.Module, req string) bool {
	for _, q := range m.Requires {
		if q.Name == req {
			return q.Provider == schema.ProviderHost && q.Contract == schema.ContractHostPort
		}
	}
	return false
}
