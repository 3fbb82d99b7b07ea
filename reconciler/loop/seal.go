package loop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/reconciler"
	"github.com/meshgen/meshgen/vaultd/client"
)

// sealed is every secret's ciphertext per node, and where each goes.
type sealed struct {
	index      reconciler.SealedMap
	ciphertext map[string][]byte // by reconciler.SealedKey
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

// seal asks vaultd for every secret the resolution needs, sealed to its
// recipients' age keys (nodes/<n>.yaml), all at once per secret: vaultd
// records the complete list of parties each time. The same version sealed to
// the same recipients is the same ciphertext, so an unchanged mesh commits
// nothing. An operator secret vaultd answers is not delivered yet is no
// failure: it is listed in undelivered, and the caller resolves again with
// its consumers waiting.
func (r *Reconciler) seal(ctx context.Context, repo *schema.Repo, res *reconciler.Resolution, st *client.Status) (*sealed, error) {
	out := &sealed{index: reconciler.SealedMap{}, ciphertext: map[string][]byte{}, asked: map[string]askedSeal{}, undelivered: map[string]bool{}}
	held := map[string]*client.SecretStatus{}
	if st != nil {
		for i := range st.Secrets {
			held[st.Secrets[i].Name] = &st.Secrets[i]
		}
	}
	var mu sync.Mutex
	errs := make([]error, len(res.Secrets))
	work := make(chan int)
	var wg sync.WaitGroup
	for range r.opts.SealWorkers {
		wg.Go(func() {
			for i := range work {
				errs[i] = r.sealOne(ctx, repo, res.Secrets[i], held[res.Secrets[i].Name], out, &mu)
			}
		})
	}
	for i := range res.Secrets {
		work <- i
	}
	close(work)
	wg.Wait()
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

func (r *Reconciler) sealOne(ctx context.Context, repo *schema.Repo, need reconciler.SecretNeed, held *client.SecretStatus, out *sealed, mu *sync.Mutex) error {
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
			return fmt.Errorf("seal secret %q: node %q has no age recipient in nodes/%s.yaml: enrol it with `hostd init`", need.Name, rc.Node, rc.Node)
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
	resp, ok := r.cache.get(req, held)
	if !ok {
		var err error
		resp, err = r.opts.Vault.Seal(ctx, req)
		if errors.Is(err, client.ErrNotDelivered) {
			return fmt.Errorf("secret %q is an operator's value not delivered yet: deliver it with `meshgen vault put %s`: %w", need.Name, need.Name, err)
		}
		if err != nil {
			return fmt.Errorf("seal secret %q: %w", need.Name, err)
		}
		r.cache.put(req, resp)
	}
	mu.Lock()
	defer mu.Unlock()
	out.asked[need.Name] = askedSeal{req: req, resp: resp}
	return out.hold(need, resp, recipientOf)
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
	key  string
	resp *client.SealResponse
}

func sealKey(req client.SealRequest) string {
	a := slices.Clone(req.Appliers)
	rd := slices.Clone(req.Recipients)
	slices.Sort(a)
	slices.Sort(rd)
	return fmt.Sprintf("%+v\x00%s\x00%s", req.Spec, strings.Join(a, ","), strings.Join(rd, ","))
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
