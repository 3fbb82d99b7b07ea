package loop

import (
	"context"
	"io"
	"sync/atomic"
	"testing"

	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// olderVault is the real vaultd's client in front of a vaultd without the
// batch seal: every batch is answered as an unknown route is.
type olderVault struct {
	*client.Client
	batches, seals atomic.Int64
}

func (v *olderVault) SealBatch(ctx context.Context, reqs []client.SealRequest) ([]client.SealResult, error) {
	v.batches.Add(1)
	return nil, &client.Error{Status: 404, Code: client.CodeNotFound, Message: "no such endpoint"}
}

func (v *olderVault) Seal(ctx context.Context, req client.SealRequest) (*client.SealResponse, error) {
	v.seals.Add(1)
	return v.Client.Seal(ctx, req)
}

// TestSealsWithAnOlderVaultd: when vaultd has no batch seal, the loop seals
// one secret per request, and the reconcile is the one a batch would make.
func TestSealsWithAnOlderVaultd(t *testing.T) {
	ctx := context.Background()
	m := newMesh(t)
	v := vaulttest.Start(t)
	ov := &olderVault{Client: v.Client}
	r := reconcilerOf(t, m.Bare, ov, io.Discard)
	out, err := r.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Written) != 3 || out.Sealed == 0 || ov.seals.Load() != int64(out.Sealed) {
		t.Fatalf("wrote %v, sealed %d secrets with %d single seals", out.Written, out.Sealed, ov.seals.Load())
	}
	if ov.batches.Load() == 0 {
		t.Fatal("no batch was tried")
	}
}
