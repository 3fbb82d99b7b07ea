package vaultd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/internal/rotation"
)

// Reasons a rotation started.
const (
	reasonOperator = "operator"
	reasonMaxAge   = "max-age"
)

// Rotate starts a rotation of name, asked by an operator.
func (v *Vault) Rotate(ctx context.Context, name string) (*client.Rotation, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	defer v.lock(name)()
	old, err := v.get(name)
	if err != nil {
		return nil, err
	}
	r := old.clone()
	if err := v.start(r, reasonOperator); err != nil {
		return nil, err
	}
	if err := v.put(r); err != nil {
		return nil, err
	}
	return statusOrDone(r), nil
}

func (v *Vault) get(name string) (*record, error) {
	r := v.rec(name)
	if r == nil {
		return nil, refuse(client.ErrNotFound, "`meshgen vault status` lists the secrets", "secret %q does not exist", name)
	}
	return r, nil
}

// start makes the new value and starts r's rotation.
func (v *Vault) start(r *record, reason string) error {
	switch {
	case r.Origin == client.OriginOperator:
		return refuse(client.ErrOperatorValue, fmt.Sprintf("`meshgen vault put %s`", r.Name),
			"secret %q is an operator's value, which the vault never replaces: an operator delivers a new value with meshgen vault put", r.Name)
	case r.Spec.NotRotatable != "":
		return refuse(client.ErrNotRotatable, "", "secret %q is not rotatable: %s", r.Name, r.Spec.NotRotatable)
	case !r.Rot.Idle():
		return refuse(client.ErrConflict, "`meshgen vault status` shows whom it waits on",
			"secret %q: a rotation to version %d is already %s", r.Name, r.Rot.To, r.Rot.Phase)
	}
	val := makeValue(r.Spec)
	derived, err := derive(r.Spec.Format, val)
	if err != nil {
		return fmt.Errorf("rotate %q: %w", r.Name, err)
	}
	next := rotation.Live{Version: r.Last + 1}
	if r.Rot.Kind == client.TwoParty {
		next.Slot = r.Rot.UnusedSlot()
	}
	now := v.now().UTC()
	if err := r.Rot.Start(next, r.Appliers, r.Readers, reason, now); err != nil {
		return stateErr(r.Name, err)
	}
	r.Last = next.Version
	r.Values[next.Version] = &value{Value: val, Derived: derived, DerivedFormat: r.Spec.Format, Made: now}
	return nil
}

// due reports whether r's current value is older than its spec's MaxAge and
// the vault's own policy should start a rotation.
func (v *Vault) due(r *record) bool {
	if r.Spec.MaxAge <= 0 || r.Origin == client.OriginOperator || r.Spec.NotRotatable != "" || !r.Rot.Idle() {
		return false
	}
	if r.Rot.Kind == client.TwoParty && len(r.Appliers) == 0 {
		return false // nobody to ensure the new credential yet
	}
	cur := r.Values[r.Rot.Current.Version]
	return cur != nil && v.now().Sub(cur.Made) >= time.Duration(r.Spec.MaxAge)
}

// Tick starts the rotations whose maximum age passed. vaultd calls it on a
// timer; Seal also checks the secret it seals.
func (v *Vault) Tick(ctx context.Context) ([]string, error) {
	v.mu.Lock()
	names := slices.Sorted(maps.Keys(v.recs))
	v.mu.Unlock()
	var started []string
	var errs []error
	for _, name := range names {
		ok, err := v.tick(name)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			started = append(started, name)
		}
	}
	return started, errors.Join(errs...)
}

// tick starts name's rotation if its maximum age passed, and reports
// whether it did.
func (v *Vault) tick(name string) (bool, error) {
	defer v.lock(name)()
	old := v.rec(name)
	if old == nil || !v.due(old) {
		return false, nil
	}
	r := old.clone()
	if err := v.start(r, reasonMaxAge); err != nil {
		return false, err
	}
	if err := v.put(r); err != nil {
		return false, err
	}
	return true, nil
}

// Step is one rotation step the reconciler confirms.
type Step string

// The steps of [Vault.Confirm].
const (
	StepApplied Step = "applied"
	StepRead    Step = "read"
	StepRetired Step = "retired"
	StepAbandon Step = "abandon"
)

// Confirm records one step of name's rotation and returns the rotation
// after it (Phase "done" when it ended).
func (v *Vault) Confirm(ctx context.Context, step Step, req client.ConfirmRequest) (*client.Rotation, error) {
	if err := checkName(req.Name); err != nil {
		return nil, err
	}
	if step != StepAbandon {
		if _, err := v.checkRecipient(req.Recipient); err != nil {
			return nil, err
		}
	}
	defer v.lock(req.Name)()
	old, err := v.get(req.Name)
	if err != nil {
		return nil, err
	}
	r := old.clone()
	a, rd := r.Appliers, r.Readers
	switch step {
	case StepApplied:
		err = r.Rot.ConfirmApplied(req.Recipient, req.Version, a, rd)
	case StepRead:
		err = r.Rot.ConfirmRead(req.Recipient, req.Version, a, rd)
	case StepRetired:
		err = r.Rot.ConfirmRetired(req.Recipient, req.Version, a, rd)
	case StepAbandon:
		err = r.Rot.Abandon(a, rd)
	default:
		return nil, refuse(client.ErrBadRequest, "", "unknown rotation step %q", step)
	}
	if err != nil {
		return nil, stateErr(r.Name, err)
	}
	before, _ := json.Marshal(old.Rot)
	after, _ := json.Marshal(r.Rot)
	if !bytes.Equal(before, after) { // a replayed confirmation writes nothing
		if err := v.put(r); err != nil {
			return nil, err
		}
	}
	return statusOrDone(r), nil
}

func statusOrDone(r *record) *client.Rotation {
	if s := r.Rot.Status(r.Name); s != nil {
		return s
	}
	return &client.Rotation{Name: r.Name, Kind: r.Rot.Kind, Phase: client.PhaseDone, To: r.Rot.Current.Version, WaitsOn: []client.Party{}}
}

func stateErr(name string, err error) error {
	switch {
	case errors.Is(err, rotation.ErrNoRotation):
		return refuse(client.ErrNotFound, "", "secret %q: %v", name, err)
	case errors.Is(err, rotation.ErrConflict):
		return refuse(client.ErrConflict, "`meshgen vault status` shows the rotation and whom it waits on", "secret %q: %v", name, err)
	}
	return fmt.Errorf("secret %q: %w", name, err)
}
