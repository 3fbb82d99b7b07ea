package workers

import (
	"sync/atomic"
	"testing"
)

// TestEach: every index is called exactly once, never on more goroutines
// than the limit, for limits below, at and above the number of jobs.
func TestEach(t *testing.T) {
	for _, tt := range []struct{ n, limit int }{{0, 4}, {1, 4}, {100, 1}, {100, 3}, {5, 50}, {64, 0}} {
		calls := make([]atomic.Int32, tt.n)
		var running, most atomic.Int32
		Each(tt.n, tt.limit, func(i int) {
			now := running.Add(1)
			for {
				m := most.Load()
				if now <= m || most.CompareAndSwap(m, now) {
					break
				}
			}
			calls[i].Add(1)
			running.Add(-1)
		})
		for i := range calls {
			if got := calls[i].Load(); got != 1 {
				t.Fatalf("n=%d limit=%d: index %d called %d times", tt.n, tt.limit, i, got)
			}
		}
		if tt.limit > 0 && int(most.Load()) > tt.limit {
			t.Errorf("n=%d limit=%d: %d calls ran at once", tt.n, tt.limit, most.Load())
		}
	}
}
