package vaultd

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/internal/store"
)

// generationFile is the file beside the records that holds the store's
// epoch and the ceiling of the counters handed out (plain JSON: nothing in
// it is secret).
const generationFile = "generation"

// generationBlock is how many counters one durable reservation covers: the
// file is written once per this many record writes, not on each. Writing
// it makes a file (a few hundred microseconds of the kernel's CPU on some
// filesystems, besides two fsyncs), so a first reconcile making tens of
// thousands of secrets writes it once; a crash makes the counter jump by
// at most this much, which readers do not mind.
const generationBlock = 1 << 16

// generation is the vault's change token (GET /v1/generation): an epoch made
// when the store is first opened, and a counter raised by every record
// write.
//
// The counter never goes back, kill -9 included: before a write takes
// counter n, n is under the ceiling written durably to DIR/generation
// (reserved a block at a time), and a vault opened again starts at that
// ceiling. A clean Close writes the ceiling down to the counter, so a
// restart keeps the token; a crash makes it jump, which costs a reader one
// needless look, never a missed change. A counter is answered only once
// every write that took a counter up to it is on disk and in memory (or
// failed), so a token read never stands for a state older than it.
//
// A directory restored from a backup keeps its epoch with an older counter,
// which a later write could take again for another state: delete
// DIR/generation after restoring one, so readers see a new epoch.
type generation struct {
	st *store.FileStore

	mu       sync.Mutex
	done     *sync.Cond // signalled when a write ends
	epoch    string
	counter  uint64 // the last counter taken
	ceiling  uint64 // durably reserved: every counter taken is at most this
	block    uint64 // counters reserved at a time: generationBlock
	inflight map[uint64]bool
}

type generationRecord struct {
	Epoch   string `json:"epoch"`
	Ceiling uint64 `json:"ceiling"`
}

// openGeneration reads the store's epoch and ceiling, making a new epoch
// when the store has none (a new store, or one from before generations).
func openGeneration(st *store.FileStore) (*generation, error) {
	g := &generation{st: st, inflight: map[uint64]bool{}, block: generationBlock}
	g.done = sync.NewCond(&g.mu)
	b, err := st.ReadFile(generationFile)
	if err != nil {
		return nil, fmt.Errorf("read the vault's generation: %w", err)
	}
	if b != nil {
		var rec generationRecord
		if err := json.Unmarshal(b, &rec); err != nil || rec.Epoch == "" {
			return nil, fmt.Errorf("the vault's generation file %s/%s is damaged: delete it (readers of the generation then see a new epoch and look again)", st.Dir(), generationFile)
		}
		g.epoch, g.counter, g.ceiling = rec.Epoch, rec.Ceiling, rec.Ceiling
		return g, nil
	}
	e := make([]byte, 16)
	rand.Read(e)
	g.epoch = hex.EncodeToString(e)
	if err := g.persist(0); err != nil {
		return nil, err
	}
	return g, nil
}

// persist writes ceiling durably. The caller holds mu (or is alone).
func (g *generation) persist(ceiling uint64) error {
	b, _ := json.Marshal(generationRecord{Epoch: g.epoch, Ceiling: ceiling})
	if err := g.st.WriteFile(generationFile, b); err != nil {
		return fmt.Errorf("write the vault's generation: %w", err)
	}
	g.ceiling = ceiling
	return nil
}

// begin takes the next counter for a record write; end(n) must follow
// whether the write succeeded or not.
func (g *generation) begin() (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.counter + 1
	if n > g.ceiling {
		if err := g.persist(n + g.block - 1); err != nil {
			return 0, err
		}
	}
	g.counter = n
	g.inflight[n] = true
	return n, nil
}

// end marks the write that took n finished.
func (g *generation) end(n uint64) {
	g.mu.Lock()
	delete(g.inflight, n)
	g.mu.Unlock()
	g.done.Broadcast()
}

// current is the token: the last counter taken, once every write that took
// a counter up to it has ended.
func (g *generation) current() client.Generation {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.counter
	for g.pending(c) {
		g.done.Wait()
	}
	return client.Generation{Epoch: g.epoch, Counter: c}
}

func (g *generation) pending(upTo uint64) bool {
	for n := range g.inflight {
		if n <= upTo {
			return true
		}
	}
	return false
}

// close writes the ceiling down to the counter, so the next start answers
// the same token. Writes must have ended.
func (g *generation) close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.inflight) > 0 || g.ceiling == g.counter {
		return nil
	}
	return g.persist(g.counter)
}

// Generation is the vault's change token: it changes whenever a record
// changes (a seal that changed anything, a put, an adopt, a rotation
// started by an operator or by the maximum-age policy, every confirmation
// and abandon) and never otherwise.
//
// A maximum age passes without a write: the token moves when the policy
// timer (or a seal of that secret) starts the rotation, not before. A
// reader that skips work while the token is unchanged (the reconciler's
// one-shot no-change skip) therefore relies on the policy timer having
// started the rotations that are due.
func (v *Vault) Generation() client.Generation { return v.gen.current() }
