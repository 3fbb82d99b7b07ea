package vaultd

import "sync"

// bufPool keeps byte buffers for reuse. A seal batch reads its body,
// encodes its records and its answer in buffers of hundreds of kilobytes
// each; a first reconcile sends over a hundred batches, and in the
// reconciler's process (a big heap) every megabyte of garbage costs
// collection work.
type bufPool struct{ p sync.Pool }

// maxPooled is the largest buffer kept: a larger one (a batch of large
// values) is left to the collector.
const maxPooled = 4 << 20

// get returns an empty buffer with room for at least n bytes.
func (bp *bufPool) get(n int) []byte {
	if b, ok := bp.p.Get().(*[]byte); ok && cap(*b) >= n {
		return (*b)[:0]
	}
	return make([]byte, 0, n)
}

// put keeps b for a later get. Nothing may use b after; a buffer that
// held a secret's value is cleared first (see clearAndPut).
func (bp *bufPool) put(b []byte) {
	if cap(b) == 0 || cap(b) > maxPooled {
		return
	}
	bp.p.Put(&b)
}

// clearAndPut zeroes b, which held values, then keeps it.
func (bp *bufPool) clearAndPut(b []byte) {
	clear(b[:cap(b)])
	bp.put(b)
}
