package loop

import (
	"context"
	"io"
	"sync/atomic"
	"testing"

	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// countingVault is the real vaultd's client, counting seals.
type countingVault struct {
	*client.Client
	seals atomic.Int64
}

func (v *countingVault) Seal(ctx context.Context, req client.SealRequest) (*client.SealResponse, error) {
	v.seals.Add(1)
	return v.Client.Seal(ctx, req)
}

// SealBatch counts each secret of the batch as one seal.
func (v *countingVault) SealBatch(ctx context.Context, reqs []client.SealRequest) ([]client.SealResult, error) {
	v.seals.Add(int64(len(reqs)))
	return v.Client.SealBatch(ctx, reqs)
}

// TestSealCache: an unchanged mesh asks vaultd for its status, not for
// every secret again; a rotation, a new recipient or a new version is asked
// again.
func TestSealCache(t *testing.T) {
	ctx := context.Background()
	m := newMesh(t)
	v := vaulttest.Start(t)
	cv := &countingVault{Client: v.Client}
	r := reconcilerOf(t, m.Bare, cv, io.Discard)
	first, err := r.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := cv.seals.Load(); got != int64(first.Sealed) || got == 0 {
		t.Fatalf("first reconcile: %d seal calls for %d secrets", got, first.Sealed)
	}
	before := refs(t, m)
	cv.seals.Store(0)
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if got := cv.seals.Load(); got != 0 {
		t.Errorf("unchanged reconcile sealed %d secrets again", got)
	}
	if refs(t, m) != before {
		t.Error("unchanged reconcile moved branches")
	}

	// A rotation is asked again, and only that secret.
	if _, err := v.Client.Rotate(ctx, "mosquitto@n1.admin"); err != nil {
		t.Fatal(err)
	}
	cv.seals.Store(0)
	out, err := r.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := cv.seals.Load(); got != 1 {
		t.Errorf("after a rotation: %d seal calls, want 1", got)
	}
	if len(out.Written) != 1 || out.Written[0] != "n1" {
		t.Errorf("after rotating n1's secret, wrote %v", out.Written)
	}
	// A restarted reconciler of another build (so the record of inputs
	// does not spare it the work) has an empty cache and seals everything
	// again, to the same bytes: nothing is written.
	before = refs(t, m)
	cv2 := &countingVault{Client: v.Client}
	r2 := reconcilerOf(t, m.Bare, cv2, io.Discard)
	r2.build = buildID(FormatVersion + 1)
	out, err = r2.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out.InputsUnchanged || cv2.seals.Load() != int64(out.Sealed) || out.Sealed == 0 {
		t.Fatalf("a restarted reconciler of another build: %+v, %d seals", out, cv2.seals.Load())
	}
	if len(out.Written) != 0 || refs(t, m) != before {
		t.Errorf("a restarted reconciler wrote %v", out.Written)
	}
}
