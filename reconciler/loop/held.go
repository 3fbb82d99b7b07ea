package loop

import (
	"fmt"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/reconciler"
	"github.com/meshgen/meshgen/reconciler/branch"
	"github.com/meshgen/meshgen/vaultd/client"
)

// hold records what each node of need holds of vaultd's answer resp:
// recipientOf maps a node to its age recipient. The caller holds the lock
// on s.
func (s *sealed) hold(need reconciler.SecretNeed, resp *client.SealResponse, recipientOf map[string]string) error {
	reader := map[string]bool{}
	for _, rc := range need.Recipients {
		if rc.Role == reconciler.Reader {
			reader[rc.Node] = true
		}
	}
	for _, node := range need.Nodes() {
		it, ok := pick(resp, recipientOf[node], reader[node])
		if !ok {
			return fmt.Errorf("seal secret %q: vaultd returned nothing for node %q", need.Name, node)
		}
		key := reconciler.SealedKey(need.Name, node)
		s.index[key] = reconciler.SealedSecret{Version: it.Version, SHA256: it.SHA256, Path: reconciler.SealedPath(need.Name)}
		s.ciphertext[key] = it.Ciphertext
	}
	return nil
}

// pick chooses the one ciphertext a node's secret file holds (the renderer
// declares one file per secret and node). A reader gets the value vaultd
// says readers use now: during a rotation, the old one until every applier
// confirmed. An applier gets the newest live value: during a rotation, the
// new one, which its step ensures before readers move (ADR 0114). A node
// that is both reads the readers' value, so its reader never breaks; its
// step then ensures the new value only once readers moved.
//
// Not yet: a one-party applier that must authenticate with the current
// value while it sets the new one, and a two-party derived form, need a
// second file the renderer does not declare.
func pick(resp *client.SealResponse, recipient string, isReader bool) (client.Sealed, bool) {
	if isReader {
		for _, s := range resp.For(recipient, client.RoleReader) {
			if s.Item == client.ItemValue && s.Current {
				return s, true
			}
		}
	}
	var best client.Sealed
	found := false
	for _, s := range resp.For(recipient, client.RoleApplier) {
		if s.Item == client.ItemValue && (!found || s.Version > best.Version) {
			best, found = s, true
		}
	}
	return best, found
}

// nodes pairs each rendered declaration with the ciphertext of every secret
// file it declares: what the branch writer commits to node/<name>.
func (s *sealed) nodes(decls map[string]*declaration.Declaration) (map[string]*branch.Node, error) {
	nodes := make(map[string]*branch.Node, len(decls))
	for name, d := range decls {
		n := &branch.Node{Declaration: d, Secrets: map[string][]byte{}}
		for _, rs := range d.Resources {
			if rs.File == nil || rs.File.Secret == nil {
				continue
			}
			ct, ok := s.ciphertext[reconciler.SealedKey(rs.File.Secret.Name, name)]
			if !ok {
				return nil, fmt.Errorf("node %s: secret %s was rendered but not sealed to it", name, rs.File.Secret.Name)
			}
			n.Secrets[rs.File.Secret.Sealed] = ct
		}
		nodes[name] = n
	}
	return nodes, nil
}
