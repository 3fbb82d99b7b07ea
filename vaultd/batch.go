package vaultd

import (
	"context"
	"fmt"

	"github.com/meshgen/meshgen/internal/workers"

	"github.com/meshgen/meshgen/vaultd/client"
)

// BatchResult is one request's outcome in [Vault.SealBatch]: its response,
// or the error a [Vault.Seal] of it alone would have returned.
type BatchResult struct {
	Response *client.SealResponse
	Err      error
}

// SealBatch answers many seal requests at once, each as [Vault.Seal] would,
// and writes every record they change as one group with one pair of fsyncs
// (group commit): all of them are on disk before any is answered, and a
// crash leaves either all of them or none (each secret then as it was).
// A request refused alone (a bad name, an operator's value not delivered
// yet) is refused in its result and changes nothing; the others go on. The
// error is the batch's own: too many requests, or the store failed (then
// nothing is answered). Two
// requests naming the same secret are refused: a batch seals each secret
// once, with its complete lists of recipients.
//
// The batch holds the locks of all its secrets while it seals and writes,
// taken in name order, so batches and single requests never deadlock.
// The sealing itself (age encryption to each recipient) runs on every CPU.
func (v *Vault) SealBatch(ctx context.Context, reqs []client.SealRequest) ([]BatchResult, error) {
	if len(reqs) > client.MaxSealBatch {
		return nil, refuse(client.ErrBadRequest, "send at most client.MaxSealBatch requests per batch", "a batch of %d seal requests is over the %d allowed", len(reqs), client.MaxSealBatch)
	}
	out := make([]BatchResult, len(reqs))
	checked := make([]*checkedSeal, len(reqs))
	seen := make(map[string]bool, len(reqs))
	var names []string
	for i, req := range reqs {
		c, err := v.checkSeal(req)
		if err != nil {
			out[i].Err = err
			continue
		}
		if seen[req.Name] {
			out[i].Err = refuse(client.ErrBadRequest, "seal each secret once per batch, with all its recipients", "seal %q: the secret is named twice in one batch", req.Name)
			continue
		}
		seen[req.Name] = true
		checked[i] = c
		names = append(names, req.Name)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	defer v.lock(names...)()

	changed := make([]*record, len(reqs))
	var todo []int
	for i, c := range checked {
		if c != nil {
			todo = append(todo, i)
		}
	}
	workers.Each(len(todo), 0, func(j int) {
		i := todo[j]
		out[i].Response, changed[i], out[i].Err = v.sealLocked(checked[i])
	})

	var write []*record
	for i, r := range changed {
		if r != nil && out[i].Err == nil {
			write = append(write, r)
		}
	}
	if len(write) == 0 {
		return out, nil
	}
	if err := v.putAll(write); err != nil {
		// The store failed: nothing is answered, and the whole batch
		// fails as a single seal would.
		return nil, fmt.Errorf("store %d secrets of a batch: %w", len(write), err)
	}
	return out, nil
}
