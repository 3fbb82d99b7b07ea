package vaultd

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/internal/rotation"
)

// Put stores an operator's value, sealed to the vault's recipient. A new
// value replaces the operator's previous one at once (a new version, so its
// readers are recreated); the same value again changes nothing. A name the
// mesh owns is refused: the vault rotates those.
func (v *Vault) Put(ctx context.Context, req client.PutRequest) (*client.PutResponse, error) {
	if err := checkName(req.Name); err != nil {
		return nil, err
	}
	spec := req.Spec
	spec.Rotation, spec.MaxAge, spec.Operator = client.OneParty, 0, true
	spec, err := normalize(spec)
	if err != nil {
		return nil, fmt.Errorf("put %q: %w", req.Name, err)
	}
	val, err := v.open(req.Ciphertext)
	if err != nil {
		return nil, fmt.Errorf("put %q: %w", req.Name, err)
	}
	defer v.lock(req.Name)()
	old := v.rec(req.Name)
	if old == nil {
		r, err := v.newRecord(req.Name, client.OriginOperator, spec, val, "")
		if err != nil {
			return nil, err
		}
		if err := v.put(r); err != nil {
			return nil, err
		}
		return &client.PutResponse{Name: r.Name, Version: 1}, nil
	}
	if old.Origin != client.OriginOperator {
		return nil, refuse(client.ErrConflict, fmt.Sprintf("rotate it with `meshgen vault rotate %s`", req.Name),
			"secret %q is the mesh's own (%s); an operator's value cannot replace it", req.Name, old.Origin)
	}
	if bytes.Equal(old.Values[old.Rot.Current.Version].Value, val) {
		return &client.PutResponse{Name: old.Name, Version: old.Rot.Current.Version, Unchanged: true}, nil
	}
	r := old.clone()
	if req.Spec != (client.Spec{}) {
		r.Spec = spec
	}
	derived, err := derive(r.Spec.Format, val)
	if err != nil {
		return nil, fmt.Errorf("put %q: %w", req.Name, err)
	}
	r.Last++
	r.Values[r.Last] = &value{Value: val, Derived: derived, DerivedFormat: r.Spec.Format, Made: v.now().UTC()}
	r.Rot = rotation.State{Kind: client.OneParty, Current: rotation.Live{Version: r.Last}}
	if err := v.put(r); err != nil {
		return nil, err
	}
	return &client.PutResponse{Name: r.Name, Version: r.Last}, nil
}

// Adopt stores the foundation's first secrets made by genesis as the mesh's
// own, so the vault may rotate them (design 27 "Genesis"). Every secret is
// checked before any is stored; adopting the same value again changes
// nothing, and another value for a name already held is refused.
func (v *Vault) Adopt(ctx context.Context, req client.AdoptRequest) (*client.AdoptResponse, error) {
	if len(req.Secrets) == 0 {
		return nil, refuse(client.ErrBadRequest, "", "adopt: no secrets")
	}
	type item struct {
		name    string
		spec    client.Spec
		val     []byte
		derived string
	}
	var items []item
	seen := map[string]bool{}
	for _, s := range req.Secrets {
		if err := checkName(s.Name); err != nil {
			return nil, fmt.Errorf("adopt: %w", err)
		}
		if seen[s.Name] {
			return nil, refuse(client.ErrBadRequest, "", "adopt: secret %q given twice", s.Name)
		}
		seen[s.Name] = true
		if s.Spec.Operator {
			return nil, refuse(client.ErrBadRequest, "", "adopt %q: genesis values are the mesh's own, not an operator's", s.Name)
		}
		spec, err := normalize(s.Spec)
		if err != nil {
			return nil, fmt.Errorf("adopt %q: %w", s.Name, err)
		}
		val, err := v.open(s.Ciphertext)
		if err != nil {
			return nil, fmt.Errorf("adopt %q: %w", s.Name, err)
		}
		it := item{name: s.Name, spec: spec, val: val}
		if len(s.Derived) > 0 {
			if spec.Format == "" {
				return nil, refuse(client.ErrBadRequest, "", "adopt %q: a derived form without a format", s.Name)
			}
			d, err := v.open(s.Derived)
			if err != nil {
				return nil, fmt.Errorf("adopt %q derived form: %w", s.Name, err)
			}
			it.derived = string(d)
		}
		items = append(items, it)
	}
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.name
	}
	defer v.lock(names...)()
	for _, it := range items {
		if old := v.rec(it.name); old != nil && !sameAdopted(old, it.val) {
			return nil, refuse(client.ErrConflict, "raising the vault again is a genesis act (break-glass): deliver the values it holds, or none",
				"adopt %q: the vault already holds another value of it (%s)", it.name, old.Origin)
		}
	}
	resp := &client.AdoptResponse{Adopted: []client.PutResponse{}}
	for _, it := range items {
		if old := v.rec(it.name); old != nil {
			resp.Adopted = append(resp.Adopted, client.PutResponse{Name: it.name, Version: old.Rot.Current.Version, Unchanged: true})
			continue
		}
		r, err := v.newRecord(it.name, client.OriginGenesis, it.spec, it.val, it.derived)
		if err != nil {
			return nil, err
		}
		if err := v.put(r); err != nil {
			return nil, err
		}
		resp.Adopted = append(resp.Adopted, client.PutResponse{Name: it.name, Version: 1})
	}
	slices.SortFunc(resp.Adopted, func(a, b client.PutResponse) int { return strings.Compare(a.Name, b.Name) })
	return resp, nil
}

// sameAdopted reports whether r is an adopted value equal to val, first
// version: adopting it again is a retry.
func sameAdopted(r *record, val []byte) bool {
	if r.Origin != client.OriginGenesis {
		return false
	}
	for _, v := range r.Values {
		if bytes.Equal(v.Value, val) {
			return true
		}
	}
	return false
}
