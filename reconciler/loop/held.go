package loop

import (
	"bytes"
	"fmt"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/reconciler"
	"github.com/meshgen/meshgen/reconciler/branch"
	"github.com/meshgen/meshgen/vaultd/client"
)

// hold records what each node of need holds of vaultd's answer resp, in
// each role it takes the secret in, and every ciphertext that goes on its
// branch. recipientOf maps a node to its age recipient. The caller holds
// the lock on s.
func (s *sealed) hold(need reconciler.SecretNeed, resp *client.SealResponse, recipientOf map[string]string) error {
	for _, rc := range need.Recipients {
		key := reconciler.SealedKey(need.Name, rc.Node, rc.Role)
		if _, done := s.index[key]; done {
			continue // the node holds it in this role for another assignment too
		}
		items := resp.For(recipientOf[rc.Node], clientRole(rc.Role))
		h, err := heldOf(need.Name, rc.Role, items, resp.Slots)
		if err != nil {
			return fmt.Errorf("seal secret %q: node %q: %w", need.Name, rc.Node, err)
		}
		s.index[key] = h
		for _, it := range items {
			path := reconciler.SealedPath(need.Name, it.Version)
			if it.Item == client.ItemDerived {
				path = reconciler.DerivedPath(need.Name, it.Version)
			}
			k := rc.Node + "\x00" + path
			if old, ok := s.ciphertext[k]; ok && !bytes.Equal(old, it.Ciphertext) {
				return fmt.Errorf("seal secret %q: vaultd sealed version %d to node %q twice with different ciphertexts", need.Name, it.Version, rc.Node)
			}
			s.ciphertext[k] = it.Ciphertext
		}
	}
	return nil
}

func clientRole(r reconciler.Role) client.Role {
	if r == reconciler.Applier {
		return client.RoleApplier
	}
	return client.RoleReader
}

// heldOf turns the items vaultd sealed to one recipient in one role into
// what the renderer declares (design 27, "Rotation"; ADR 0114). A reader
// holds one value: the one readers use now, which during a two-party
// rotation becomes the new one only after every applier confirmed it. An
// applier holds every live value: the one in use, and during a rotation
// the new one beside it (current false), each with its derived form; and
// the slot vaultd says appliers retire now.
func heldOf(name string, role reconciler.Role, items []client.Sealed, slots []client.SlotState) (reconciler.Held, error) {
	var h reconciler.Held
	var current, next *reconciler.Credential
	derived := map[uint64]*reconciler.SealedSecret{}
	for _, it := range items {
		switch it.Item {
		case client.ItemDerived:
			derived[it.Version] = &reconciler.SealedSecret{Version: it.Version, SHA256: it.SHA256, Path: reconciler.DerivedPath(name, it.Version)}
		case client.ItemValue:
			c := &reconciler.Credential{Slot: string(it.Slot),
				SealedSecret: reconciler.SealedSecret{Version: it.Version, SHA256: it.SHA256, Path: reconciler.SealedPath(name, it.Version)}}
			switch {
			case it.Current && current == nil:
				current = c
			case !it.Current && next == nil && role == reconciler.Applier:
				next = c
			default:
				return h, fmt.Errorf("vaultd sealed more values to a %s than it holds (version %d)", role, it.Version)
			}
		}
	}
	if current == nil {
		return h, fmt.Errorf("vaultd sealed no value in use to this %s", role)
	}
	if role == reconciler.Reader {
		return reconciler.Held{Current: *current}, nil
	}
	current.Derived = derived[current.Version]
	h.Current = *current
	if next != nil {
		next.Derived = derived[next.Version]
		h.Next = next
	}
	for _, sl := range slots {
		if sl.State == "retiring" {
			h.Retire = string(sl.Slot)
		}
	}
	return h, nil
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
			ct, ok := s.ciphertext[name+"\x00"+rs.File.Secret.Sealed]
			if !ok {
				return nil, fmt.Errorf("node %s: secret %s was rendered but not sealed to it", name, rs.File.Secret.Name)
			}
			n.Secrets[rs.File.Secret.Sealed] = ct
		}
		nodes[name] = n
	}
	return nodes, nil
}
