package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/reconciler"
	"github.com/meshgen/meshgen/reconciler/branch"
	"github.com/meshgen/meshgen/reconciler/status"
	"github.com/meshgen/meshgen/vaultd/client"
)

// Rotator is what driving rotations asks of vaultd; *client.Client is one.
// A Vault that is not a Rotator leaves rotations to the operator.
type Rotator interface {
	Status(ctx context.Context) (*client.Status, error)
	ConfirmApplied(ctx context.Context, req client.ConfirmRequest) (*client.Rotation, error)
	ConfirmRead(ctx context.Context, req client.ConfirmRequest) (*client.Rotation, error)
	ConfirmRetired(ctx context.Context, req client.ConfirmRequest) (*client.Rotation, error)
}

// Confirmation is one rotation step the loop confirmed to vaultd for a node.
type Confirmation struct {
	Secret  string       `json:"secret"`
	Node    string       `json:"node"`
	Phase   client.Phase `json:"phase"`
	Version uint64       `json:"version"`
	// Now is the rotation's phase after the confirmation.
	Now client.Phase `json:"now"`
}

// driveRotations confirms to vaultd every rotation step hostd's reports
// show done, so a rotation finishes by itself (design 27 "Rotation", ADR
// 0114):
//
//   - applying: an applier confirmed once its node applied, without a
//     failure, a declaration holding the new version (its step ran with it
//     beside the one in use);
//   - reading: a reader confirmed once its node applied a declaration
//     whose reader reads the version readers move to (its container was
//     recreated with it; the old version when an abandoned rotation reads
//     back);
//   - retiring: an applier confirmed once its node applied a declaration
//     holding the version kept and no longer the one dropped (its step ran
//     with the dropped credential named to retire).
//
// It runs before sealing, so the same reconcile renders the next phase:
// readers get the new value only after every applier confirmed, and the old
// one is retired only after every reader confirmed.
//
// st is vaultd's status when the caller just read it, else nil. It also
// returns the status it used, which still holds when it confirmed nothing.
func (r *Reconciler) driveRotations(ctx context.Context, repo *schema.Repo, reports []status.Node, st *client.Status) ([]Confirmation, *client.Status, error) {
	rot, ok := r.opts.Vault.(Rotator)
	if !ok {
		return nil, nil, nil
	}
	var err error
	if st == nil {
		if st, err = rot.Status(ctx); err != nil {
			return nil, nil, fmt.Errorf("rotations: vault status: %w", err)
		}
	}
	nodeOf := map[string]string{}
	for name, n := range repo.Nodes {
		nodeOf[n.Recipient] = name
	}
	byNode := map[string]*declaration.Report{}
	for _, n := range reports {
		byNode[n.Name] = n.Report
	}
	applied := map[string]*reconciler.Delivered{} // node → what it applied
	var out []Confirmation
	for _, s := range st.Secrets {
		ro := s.Rotation
		if ro == nil || ro.Phase == client.PhaseDone {
			continue
		}
		// kept is the version the rotation keeps, gone the one it drops.
		kept, gone := ro.To, ro.From
		if ro.Abandoned {
			kept, gone = ro.From, ro.To
		}
		for _, p := range ro.WaitsOn {
			node, ok := nodeOf[p.Recipient]
			if !ok {
				continue
			}
			rep := byNode[node]
			if rep == nil || !rep.OK() || rep.Generation != rep.Attempted {
				continue
			}
			if applied[node] == nil {
				if applied[node], err = r.appliedSecrets(node, rep.Generation); err != nil {
					return out, nil, err
				}
			}
			has := applied[node]
			req := client.ConfirmRequest{Name: s.Name, Recipient: p.Recipient}
			var res *client.Rotation
			switch {
			case ro.Phase == client.PhaseApplying && p.Role == client.RoleApplier && has.Holds(s.Name, ro.To):
				// Its step ran with the new value beside the one in use.
				req.Version = ro.To
				res, err = rot.ConfirmApplied(ctx, req)
			case ro.Phase == client.PhaseReading && p.Role == client.RoleReader && has.Reads(s.Name, kept):
				// It was recreated reading the version readers move to.
				req.Version = kept
				res, err = rot.ConfirmRead(ctx, req)
			case ro.Phase == client.PhaseRetiring && p.Role == client.RoleApplier && has.Holds(s.Name, kept) && !has.Holds(s.Name, gone):
				// Its step ran with the dropped credential no longer held
				// and named to retire.
				req.Version = gone
				res, err = rot.ConfirmRetired(ctx, req)
			default:
				continue
			}
			if err != nil {
				return out, nil, fmt.Errorf("rotation of %q: confirm %s for node %s: %w", s.Name, ro.Phase, node, err)
			}
			c := Confirmation{Secret: s.Name, Node: node, Phase: ro.Phase, Version: req.Version, Now: client.PhaseDone}
			if res != nil {
				c.Now = res.Phase
			}
			out = append(out, c)
		}
	}
	if len(out) > 0 {
		st = nil // stale: the confirmations moved phases
	}
	return out, st, nil
}

// appliedSecrets returns what the declaration of generation gen on
// node/<node> delivers: what the node applied.
func (r *Reconciler) appliedSecrets(node string, gen uint64) (*reconciler.Delivered, error) {
	none := &reconciler.Delivered{}
	repo, err := branch.OpenGit(r.dir)
	if err != nil {
		return nil, err
	}
	ref, err := repo.Reference(plumbing.ReferenceName(branch.Ref(node)), true)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return none, nil
	}
	if err != nil {
		return nil, err
	}
	c, err := repo.CommitObject(ref.Hash())
	for err == nil {
		var d declaration.Declaration
		if err := readDecl(c, &d); err != nil {
			return nil, fmt.Errorf("node/%s: %w", node, err)
		}
		if d.Generation == gen {
			return reconciler.DeliveredBy(&d), nil
		}
		if d.Generation < gen || len(c.ParentHashes) == 0 {
			break
		}
		c, err = c.Parent(0)
	}
	if err != nil {
		return nil, fmt.Errorf("node/%s: %w", node, err)
	}
	return none, nil
}

// readDecl reads the declaration a node branch's commit holds.
func readDecl(c *object.Commit, d *declaration.Declaration) error {
	f, err := c.File(branch.DeclarationFile)
	if err != nil {
		return fmt.Errorf("%s at %s: %w", branch.DeclarationFile, c.Hash, err)
	}
	body, err := f.Contents()
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(body), d)
}
