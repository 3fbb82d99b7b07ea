package loop

import (
	"context"
	"io"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// pollCountingVault is the real vaultd client, counting the calls a watch
// makes to notice a change: its whole status, and its change token. Each
// call of either is a look, signalled on looks.
type pollCountingVault struct {
	*client.Client
	statuses atomic.Int64
	looks    chan struct{} // one send per call, never blocking
}

func (c *pollCountingVault) look() {
	select {
	case c.looks <- struct{}{}:
	default:
	}
}

func (c *pollCountingVault) Status(ctx context.Context) (*client.Status, error) {
	c.statuses.Add(1)
	c.look()
	return c.Client.Status(ctx)
}

func (c *pollCountingVault) Generation(ctx context.Context) (client.Generation, error) {
	c.look()
	return c.Client.Generation(ctx)
}

// TestWatchPollsTheVaultToken: an idle watch asks vaultd only for its change
// token, never for the status of every secret; when the token moves (an
// operator rotates a secret, changing no ref) it reconciles and renders the
// rotation.
func TestWatchPollsTheVaultToken(t *testing.T) {
	m := newMesh(t)
	v := vaulttest.Start(t)
	cv := &pollCountingVault{Client: v.Client, looks: make(chan struct{}, 1)}
	r := reconcilerOf(t, m.Bare, cv, io.Discard)
	outcomes, stop := watching(t, r, WatchOptions{Interval: 20 * time.Millisecond})
	if first := <-outcomes; len(first.Written) != 3 {
		t.Fatalf("first reconcile wrote %v", first.Written)
	}
	before := cv.statuses.Load()
	// Several idle looks: each asks for the token, none for the status,
	// and none reconciles.
	for range 5 {
		<-cv.looks
	}
	if n := cv.statuses.Load() - before; n != 0 {
		t.Fatalf("an idle watch asked vaultd for its whole status %d times; want only its change token", n)
	}
	if n := len(outcomes); n != 0 {
		t.Fatalf("an idle watch reconciled %d times", n)
	}

	if _, err := v.Client.Rotate(context.Background(), "mosquitto@n1.admin"); err != nil {
		t.Fatal(err)
	}
	o := <-outcomes
	stop()
	if !slices.Equal(o.Written, []string{"n1"}) {
		t.Fatalf("after the rotation wrote %v, want [n1]", o.Written)
	}
}
