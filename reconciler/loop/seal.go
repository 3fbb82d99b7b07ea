package loop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshgen/meshgen/internal/workers"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/reconciler"
	"github.com/meshgen/meshgen/vaultd/client"
)

// sealed is every secret's ciphertext per node, and where each goes.
type sealed struct {
	index      reconciler.SealedMap
	ciphertext map[string][]byte // by node and path on its branch
	// asked is, per secret, what was asked of vaultd and what it answered.
	asked map[string]askedSeal
	// undelivered names the operator secrets vaultd has not been given
	// yet (client.ErrNotDelivered): their consumers wait (design 27).
	undelivered map[string]bool
}

type askedSeal struct {
	req  client.SealRequest
	resp *client.SealResponse
}

// BatchSealer is a [Vault] that seals many secrets in one request and one
// durable write; *client.Client is one. The loop asks vaultd in batches
// when its Vault is one, and one secret per request otherwise. It is found
// with a type assertion, as [Rotator] is, so a Vault that only seals (a
// test's counting wrapper, another implementation) keeps working
// unchanged.
type BatchSealer interface {
	SealBatch(ctx context.Context, reqs []client.SealRequest) ([]client.SealResult, error)
}

// Seals sent to a [BatchSealer]: sealBatchSize secrets per request (a
// request's records cost vaultd one pair of fsyncs, whatever their
// number), sealBatchesInFlight requests at once, so vaultd seals one batch
// while it writes another.
const (
	sealBatchSize       = 256
	sealBatchesInFlight = 3
)

// seal asks vaultd for every secret the resolution needs, sealed to its
// recipients' age keys (nodes/<n>.yaml), all at once per secret: vaultd
// records the complete list of parties each time. The same version sealed to
// the same recipients is the same ciphertext, so an unchanged mesh commits
// nothing. An operator secret vaultd answers is not delivered yet is no
// failure: it is listed in undelivered, and the caller resolves again with
// its consumers waiting.
//
// What the cache answers is not asked again; the rest is asked in batches
// of sealBatchSize when the Vault is a [BatchSealer] (and vaultd has the
// batch seal), else one request per secret on SealWorkers workers.
func (r *Reconciler) seal(ctx context.Context, repo *schema.Repo, res *reconciler.Resolution, st *client.Status) (*sealed, error) {
	n := len(res.Secrets)
	out := &sealed{index: make(reconciler.SealedMap, n), ciphertext: make(map[string][]byte, n), asked: make(map[string]askedSeal, n), undelivered: map[string]bool{}}
	held := map[string]*client.SecretStatus{}
	if st != nil {
		for i := range st.Secrets {
			held[st.Secrets[i].Name] = &st.Secrets[i]
		}
	}
	var mu sync.Mutex
	errs := make([]error, len(res.Secrets))
	// Every request is built, and answered from the cache when it can be.
	asks := make([]*sealAsk, len(res.Secrets))
	workers.Each(len(res.Secrets), r.opts.SealWorkers, func(i int) {
		need := res.Secrets[i]
		a, err := sealRequest(repo, need)
		if err != nil {
			errs[i] = err
			return
		}
		if resp, ok := r.cache.get(a.req, held[need.Name]); ok {
			errs[i] = out.answer(&mu, need, a, resp)
			return
		}
		asks[i] = a
	})
	var todo []int
	for i, a := range asks {
		if a != nil {
			todo = append(todo, i)
		}
	}
	single := func(i int) {
		resp, err := r.opts.Vault.Seal(ctx, asks[i].req)
		errs[i] = r.answered(&mu, out, res.Secrets[i], asks[i], resp, err)
	}
	if bs, ok := r.opts.Vault.(BatchSealer); ok {
		batches := slices.Collect(slices.Chunk(todo, sealBatchSize))
		var noBatch atomic.Bool
		workers.Each(len(batches), sealBatchesInFlight, func(b int) {
			batch := batches[b]
			reqs := make([]client.SealRequest, len(batch))
			for j, i := range batch {
				reqs[j] = asks[i].req
			}
			var results []client.SealResult
			var err error
			if !noBatch.Load() {
				results, err = bs.SealBatch(ctx, reqs)
				if err == nil && len(results) != len(reqs) {
					err = fmt.Errorf("vault answered %d of %d secrets of a batch", len(results), len(reqs))
				}
			}
			if noBatch.Load() || errors.Is(err, client.ErrNotFound) {
				// A vaultd older than the batch seal answers its route is
				// not found (it refuses nothing else of a batch so): ask
				// it one secret per request, as before.
				noBatch.Store(true)
				for _, i := range batch {
					single(i)
				}
				return
			}
			for j, i := range batch {
				need := res.Secrets[i]
				if err != nil {
					errs[i] = fmt.Errorf("seal secret %q: %w", need.Name, err)
					continue
				}
				errs[i] = r.answered(&mu, out, need, asks[i], results[j].Response, results[j].Err)
			}
		})
	} else {
		workers.Each(len(todo), r.opts.SealWorkers, func(j int) { single(todo[j]) })
	}
	for i, err := range errs {
		if err != nil && res.Secrets[i].Spec.Operator && errors.Is(err, client.ErrNotDelivered) {
			out.undelivered[res.Secrets[i].Name] = true
			continue
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sealAsk is one secret's request to vaultd, and the age recipient of each
// of its nodes.
type sealAsk struct {
	req         client.SealRequest
	recipientOf map[string]string
}

// sealRequest builds what vaultd is asked for need: its spec and the
// complete lists of its appliers and readers.
func sealRequest(repo *schema.Repo, need reconciler.SecretNeed) (*sealAsk, error) {
	// The loader refused a maxAge that is not a positive duration.
	maxAge, _ := time.ParseDuration(need.Spec.MaxAge)
	req := client.SealRequest{Name: need.Name, Spec: client.Spec{
		Length: need.Spec.Length, Alphabet: need.Spec.Alphabet, Format: need.Spec.Format,
		NotRotatable: need.Spec.NotRotatable, Rotation: need.Rotation,
		Operator: need.Spec.Operator, MaxAge: client.Duration(maxAge),
	}, Recipients: []string{}}
	recipientOf := map[string]string{}
	seen := map[string]bool{}
	for _, rc := range need.Recipients {
		node, ok := repo.Nodes[rc.Node]
		if !ok || node.Recipient == "" {
			return nil, fmt.Errorf("seal secret %q: node %q has no age recipient in nodes/%s.yaml: enrol it with `hostd init`", need.Name, rc.Node, rc.Node)
		}
		recipientOf[rc.Node] = node.Recipient
		key := string(rc.Role) + "\x00" + node.Recipient
		if seen[key] {
			continue
		}
		seen[key] = true
		if rc.Role == reconciler.Applier {
			req.Appliers = append(req.Appliers, node.Recipient)
		} else {
			req.Recipients = append(req.Recipients, node.Recipient)
		}
	}
	return &sealAsk{req: req, recipientOf: recipientOf}, nil
}

// answered takes vaultd's answer to a (its response, or the error it
// answered for that secret alone): it remembers the response in the cache
// and records what each node holds.
func (r *Reconciler) answered(mu *sync.Mutex, out *sealed, need reconciler.SecretNeed, a *sealAsk, resp *client.SealResponse, err error) error {
	if errors.Is(err, client.ErrNotDelivered) {
		return fmt.Errorf("secret %q is an operator's value not delivered yet: deliver it with `meshgen vault put %s`: %w", need.Name, need.Name, err)
	}
	if err != nil {
		return fmt.Errorf("seal secret %q: %w", need.Name, err)
	}
	r.cache.put(a.req, resp)
	return out.answer(mu, need, a, resp)
}

// answer records what was asked for need and what vaultd answered, and
// what each of its nodes holds, under mu.
func (s *sealed) answer(mu *sync.Mutex, need reconciler.SecretNeed, a *sealAsk, resp *client.SealResponse) error {
	mu.Lock()
	defer mu.Unlock()
	s.asked[need.Name] = askedSeal{req: a.req, resp: resp}
	return s.hold(need, resp, a.recipientOf)
}

// sealCache remembers what vaultd sealed, so a reconcile where nothing
// changed asks vaultd once for its status instead of once per secret. An
// answer is reused only while vaultd's status shows the same version, the
// same appliers and readers, and no rotation: the same version sealed to the
// same recipients is the same ciphertext (vaultd's contract), and anything
// else is asked again.
type sealCache struct {
	mu sync.Mutex
	m  map[string]cachedSeal
}

type cachedSeal struct {
	key  sealCacheKey
	resp *client.SealResponse
}

// sealCacheKey is what a cached answer was asked with: the spec (every
// field: client.Spec is comparable) and the sorted lists of parties.
type sealCacheKey struct {
	spec                client.Spec
	appliers, receivers string
}

func sealKey(req client.SealRequest) sealCacheKey {
	return sealCacheKey{spec: req.Spec, appliers: sortedList(req.Appliers), receivers: sortedList(req.Recipients)}
}

// sortedList joins a sorted copy of l with commas (no recipient holds
// one).
func sortedList(l []string) string {
	if len(l) == 1 {
		return l[0]
	}
	l = slices.Clone(l)
	slices.Sort(l)
	return strings.Join(l, ",")
}

func (c *sealCache) get(req client.SealRequest, held *client.SecretStatus) (*client.SealResponse, bool) {
	if held == nil || held.Rotation != nil {
		return nil, false
	}
	c.mu.Lock()
	e, ok := c.m[req.Name]
	c.mu.Unlock()
	if !ok || e.resp.Rotation != nil || e.resp.Version != held.Version || e.key != sealKey(req) ||
		!sameSet(held.Appliers, req.Appliers) || !sameSet(held.Readers, req.Recipients) {
		return nil, false
	}
	return e.resp, true
}

func (c *sealCache) put(req client.SealRequest, resp *client.SealResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]cachedSeal{}
	}
	c.m[req.Name] = cachedSeal{key: sealKey(req), resp: resp}
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}
