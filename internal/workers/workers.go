// Package workers runs independent jobs on a bounded number of goroutines.
package workers

import (
	"runtime"
	"sync"
)

// Each calls fn(i) for every i in [0, n) on at most limit goroutines, and
// returns once every call has returned. A limit below 1 means one
// goroutine per processor (GOMAXPROCS). Calls run in no particular order;
// fn must be safe to call concurrently.
func Each(n, limit int, fn func(i int)) {
	if limit < 1 {
		limit = runtime.GOMAXPROCS(0)
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(limit, n) {
		wg.Go(func() {
			for i := range work {
				fn(i)
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}
