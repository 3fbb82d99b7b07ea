package vaultd

import "sync"

// bufPool keeps byte buffers for reuse. A seal batch's framed answer takes
// hundreds of kilobytes; a first reconcile sends over a hundred batches,
// and in the reconciler's process (a big heap) every megabyte of garbage
// costs collection work. The answers hold ciphertexts, never a value.
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

// put keeps b for a later get. Nothing may use b after.
func (bp *bufPool) put(b []byte) {
	if cap(b) == 0 || cap(b) > maxPooled {
		return
	}
	bp.p.Put(&b)
}
