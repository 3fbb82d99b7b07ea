package vaultd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// TestSealBatch seals a batch through the real vaultd: each request is
// answered as a single seal would answer it, refusals per secret keep their
// codes, the records are written once (the generation rises by one per
// record) and a batch of nothing new writes nothing.
func TestSealBatch(t *testing.T) {
	ctx := context.Background()
	prov, reader, stranger := vaulttest.NewNode(t), vaulttest.NewNode(t), vaulttest.NewNode(t)
	p, r := prov.Recipient().String(), reader.Recipient().String()
	v := vaulttest.StartWith(t, vaulttest.Options{Nodes: []string{p, r}})
	rcpt, err := v.Client.Recipient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := client.SealToVault(rcpt, []byte("operator-batch-value-1d1d"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Client.Put(ctx, client.PutRequest{Name: "delivered", Ciphertext: ct}); err != nil {
		t.Fatal(err)
	}
	reqs := []client.SealRequest{
		{Name: "plain", Recipients: []string{r}},
		{Name: "hashed", Spec: client.Spec{Format: client.FormatMosquittoPBKDF2, Rotation: client.TwoParty}, Appliers: []string{p}, Recipients: []string{r}},
		{Name: "delivered", Spec: client.Spec{Operator: true}, Recipients: []string{r}},
		{Name: "missing", Spec: client.Spec{Operator: true}, Recipients: []string{r}},
		{Name: "../bad", Recipients: []string{r}},
		{Name: "strange", Recipients: []string{stranger.Recipient().String()}},
		{Name: "plain", Recipients: []string{p}},
	}
	want := []struct {
		err    error
		status int
		msg    string
		items  int // sealed items when answered
	}{
		{items: 1},
		{items: 3}, // the applier's value and derived form, the reader's value
		{items: 1},
		{err: client.ErrNotDelivered, status: 409, msg: `"missing" is an operator's value and has not been delivered yet`},
		{err: client.ErrBadRequest, status: 400, msg: "secret name is not valid"},
		{err: client.ErrRefusedRecipient, status: 422, msg: "is not a node of the mesh"},
		{err: client.ErrBadRequest, status: 400, msg: `seal "plain": the secret is named twice in one batch`},
	}
	before, err := v.Client.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.Client.SealBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(reqs) {
		t.Fatalf("%d results for %d requests", len(got), len(reqs))
	}
	for i, w := range want {
		res := got[i]
		if w.err != nil {
			var ce *client.Error
			if !errors.Is(res.Err, w.err) || !errors.As(res.Err, &ce) || ce.Status != w.status || !strings.Contains(ce.Message, w.msg) || res.Response != nil {
				t.Errorf("request %d (%s): %v (%+v), want %v %d %q", i, reqs[i].Name, res.Err, res.Response, w.err, w.status, w.msg)
			}
			continue
		}
		if res.Err != nil || res.Response == nil || res.Response.Name != reqs[i].Name || len(res.Response.Sealed) != w.items {
			t.Errorf("request %d (%s): %v %+v, want %d sealed items", i, reqs[i].Name, res.Err, res.Response, w.items)
		}
	}
	if got[2].Response != nil && string(vaulttest.Open(t, reader, got[2].Response.Sealed[0].Ciphertext)) != "operator-batch-value-1d1d" {
		t.Error("the operator's value sealed in a batch is not the value delivered")
	}
	// Three records written: two made, the operator's with its readers.
	after, err := v.Client.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Epoch != before.Epoch || after.Counter != before.Counter+3 {
		t.Fatalf("generation %s after a batch writing 3 records, was %s", after, before)
	}

	// The same ciphertext, byte for byte: a single seal, the batch again,
	// and after a restart.
	same := func(when string, a, b *client.SealResponse) {
		t.Helper()
		if a.Version != b.Version || len(a.Sealed) != len(b.Sealed) {
			t.Fatalf("%s: %+v, want %+v", when, b, a)
		}
		for i := range a.Sealed {
			if !bytes.Equal(a.Sealed[i].Ciphertext, b.Sealed[i].Ciphertext) || a.Sealed[i].Recipient != b.Sealed[i].Recipient {
				t.Fatalf("%s: %s seals to other bytes", when, a.Name)
			}
		}
	}
	for i := range 3 {
		single, err := v.Client.Seal(ctx, reqs[i])
		if err != nil {
			t.Fatal(err)
		}
		same("a single seal after the batch", got[i].Response, single)
	}
	again, err := v.Client.SealBatch(ctx, reqs[:3])
	if err != nil {
		t.Fatal(err)
	}
	for i := range again {
		same("the batch again", got[i].Response, again[i].Response)
	}
	if g, _ := v.Client.Generation(ctx); g != after {
		t.Fatalf("a batch changing nothing moved the generation from %s to %s", after, g)
	}
	v.Stop(t)
	v = vaulttest.StartWith(t, vaulttest.Options{Dir: v.Dir, Nodes: []string{p, r}})
	again, err = v.Client.SealBatch(ctx, reqs[:3])
	if err != nil {
		t.Fatal(err)
	}
	for i := range again {
		same("after a restart", got[i].Response, again[i].Response)
	}

	// One audit line per secret, naming it and its outcome.
	audit, err := os.ReadFile(filepath.Join(v.Dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`"op":"POST /v1/seal-batch","names":["plain"],"recipients":["` + r + `"],"version":1,"outcome":"ok"`,
		`"op":"POST /v1/seal-batch","names":["hashed"],"recipients":["` + p + `","` + r + `"],"version":1,"outcome":"ok"`,
		`"op":"POST /v1/seal-batch","names":["missing"],"recipients":["` + r + `"],"outcome":"not-delivered"`,
		`"op":"POST /v1/seal-batch","names":["(invalid name)"]`,
	} {
		if !bytes.Contains(audit, []byte(line)) {
			t.Errorf("the audit log has no line %s", line)
		}
	}
	if n := bytes.Count(audit, []byte(`"op":"POST /v1/seal-batch"`)); n != len(reqs)+3+3 {
		t.Errorf("%d audit lines of batch seals, want one per secret: %d", n, len(reqs)+3+3)
	}

	// A batch over the limit is refused whole.
	big := make([]client.SealRequest, client.MaxSealBatch+1)
	for i := range big {
		big[i] = client.SealRequest{Name: fmt.Sprintf("big-%d", i), Recipients: []string{r}}
	}
	if _, err := v.Client.SealBatch(ctx, big); !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), "over the 1024 allowed") {
		t.Fatalf("a batch over the limit: %v", err)
	}
	if res, err := v.Client.SealBatch(ctx, nil); res != nil || err != nil {
		t.Fatalf("an empty batch: %v %v", res, err)
	}
}

// TestSealBatchesOverlap seals batches naming the same secrets in opposite
// orders at once, with single seals among them: nothing deadlocks, and
// every secret is made once (every answer seals it to the same bytes).
func TestSealBatchesOverlap(t *testing.T) {
	ctx := context.Background()
	v := vaulttest.Start(t)
	node := vaulttest.NewNode(t).Recipient().String()
	var names []string
	for i := range 40 {
		names = append(names, fmt.Sprintf("shared-%02d", i))
	}
	reversed := slices.Clone(names)
	slices.Reverse(reversed)
	var mu sync.Mutex
	seen := map[string][]byte{}
	check := func(resp *client.SealResponse) error {
		mu.Lock()
		defer mu.Unlock()
		ct := resp.Sealed[0].Ciphertext
		if prev, ok := seen[resp.Name]; ok && !bytes.Equal(prev, ct) {
			return fmt.Errorf("%s was made twice", resp.Name)
		}
		seen[resp.Name] = ct
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 6 {
		wg.Go(func() {
			order := names
			if w%2 == 1 {
				order = reversed
			}
			if w == 5 {
				for _, n := range order {
					resp, err := v.Client.Seal(ctx, client.SealRequest{Name: n, Recipients: []string{node}})
					if err == nil {
						err = check(resp)
					}
					if err != nil {
						errs <- err
						return
					}
				}
				return
			}
			reqs := make([]client.SealRequest, len(order))
			for i, n := range order {
				reqs[i] = client.SealRequest{Name: n, Recipients: []string{node}}
			}
			res, err := v.Client.SealBatch(ctx, reqs)
			if err != nil {
				errs <- err
				return
			}
			for _, r := range res {
				if r.Err != nil {
					errs <- r.Err
					return
				}
				if err := check(r.Response); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(seen) != len(names) {
		t.Fatalf("%d secrets answered, want %d", len(seen), len(names))
	}
}

// TestRefusalsInABatch sends every seal refusal in one batch beside a
// secret that is fine: each is refused as it is alone, with the same code
// and message, and the good one is answered.
func TestRefusalsInABatch(t *testing.T) {
	ctx := context.Background()
	f := &fixture{prov: vaulttest.NewNode(t), reader: vaulttest.NewNode(t), stranger: vaulttest.NewNode(t)}
	v := vaulttest.StartWith(t, vaulttest.Options{Nodes: []string{f.prov.Recipient().String(), "n2 " + f.reader.Recipient().String()}})
	f.setUp(t, ctx, v.Client)
	cases := f.sealRefusals()
	reqs := []client.SealRequest{{Name: "fine", Recipients: []string{f.reader.Recipient().String()}}}
	for _, c := range cases {
		reqs = append(reqs, c.req)
	}
	res, err := v.Client.SealBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[0].Response == nil {
		t.Fatalf("the good secret beside refusals: %v", res[0].Err)
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := res[i+1]
			var ce *client.Error
			if !errors.Is(got.Err, c.want) || !errors.As(got.Err, &ce) || !strings.Contains(got.Err.Error(), c.msg) || got.Response != nil {
				t.Fatalf("error %v, want %v saying %q", got.Err, c.want, c.msg)
			}
			_, alone := v.Client.Seal(ctx, c.req)
			var ae *client.Error
			if !errors.As(alone, &ae) || *ae != *ce {
				t.Fatalf("refused in a batch as %+v, alone as %+v", ce, ae)
			}
		})
	}
}
