package vaultd_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"testing"

	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/vaulttest"
)

// TestSealBatchFramed asks the real vaultd for the same batch as JSON and
// as client.SealBatchFramed, over its socket: the answers are the same
// (the same version sealed to the same recipient is the same bytes), the
// framed one is what client.SealBatchFramed documents, refusals of a
// whole batch stay JSON, and client.SealBatch reads the framed answer into
// what the JSON one says, per-item refusals and their codes included.
func TestSealBatchFramed(t *testing.T) {
	ctx := context.Background()
	prov, reader := vaulttest.NewNode(t), vaulttest.NewNode(t)
	p, r := prov.Recipient().String(), reader.Recipient().String()
	v := vaulttest.StartWith(t, vaulttest.Options{Nodes: []string{p, r}})
	reqs := []client.SealRequest{
		{Name: "plain", Recipients: []string{r}},
		{Name: "hashed", Spec: client.Spec{Format: client.FormatMosquittoPBKDF2, Rotation: client.TwoParty}, Appliers: []string{p}, Recipients: []string{r}},
		{Name: "missing", Spec: client.Spec{Operator: true}, Recipients: []string{r}},
		{Name: "../bad", Recipients: []string{r}},
		{Name: "both", Appliers: []string{p}, Recipients: []string{p, r}},
	}
	// A rotation in progress is answered too.
	if _, err := v.Client.SealBatch(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Client.Rotate(ctx, "hashed"); err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(client.SealBatchRequest{Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", v.Socket)
	}}}
	post := func(accept string, body []byte) (status int, contentType string, data []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, "http://vaultd/v1/seal-batch", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err = io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header.Get("Content-Type"), data
	}

	status, ctype, data := post("", body)
	if status != http.StatusOK || ctype != "application/json" {
		t.Fatalf("a batch without Accept: %d %s, want 200 application/json", status, ctype)
	}
	var asJSON client.SealBatchResponse
	if err := json.Unmarshal(data, &asJSON); err != nil {
		t.Fatal(err)
	}
	if len(asJSON.Items) != len(reqs) || asJSON.Items[0].Sealed == nil || asJSON.Items[2].Error == nil || asJSON.Items[2].Error.Code != client.CodeNotDelivered || asJSON.Items[1].Sealed == nil || asJSON.Items[1].Sealed.Rotation == nil {
		t.Fatalf("JSON answer: %+v", asJSON)
	}
	var values [][]byte
	for _, it := range asJSON.Items {
		if it.Sealed == nil {
			continue
		}
		for _, s := range it.Sealed.Sealed {
			if s.Item != client.ItemValue {
				continue
			}
			id := reader
			if s.Recipient == p {
				id = prov
			}
			values = append(values, vaulttest.Open(t, id, s.Ciphertext))
		}
	}

	tests := []struct {
		accept string
		framed bool
	}{
		{accept: client.SealBatchFramed, framed: true},
		{accept: "application/json, " + client.SealBatchFramed + ";q=0.5", framed: true},
		{accept: client.SealBatchFramed + ";q=0", framed: false},
		{accept: "application/json", framed: false},
		{accept: "*/*", framed: false},
		{accept: "not a media type;;", framed: false},
	}
	for _, tt := range tests {
		status, ctype, data := post(tt.accept, body)
		if status != http.StatusOK {
			t.Fatalf("Accept %q: %d", tt.accept, status)
		}
		var got client.SealBatchResponse
		if !tt.framed {
			if ctype != "application/json" {
				t.Fatalf("Accept %q: answered %s, want application/json", tt.accept, ctype)
			}
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatal(err)
			}
		} else {
			if ctype != client.SealBatchFramed {
				t.Fatalf("Accept %q: answered %s, want %s", tt.accept, ctype, client.SealBatchFramed)
			}
			if json.Valid(data) {
				t.Fatalf("Accept %q: the framed answer is plain JSON", tt.accept)
			}
			for _, val := range values {
				if bytes.Contains(data, val) {
					t.Fatalf("Accept %q: the framed answer carries a value in clear", tt.accept)
				}
			}
			want, err := client.AppendSealBatchFramed(nil, &asJSON)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data, want) {
				t.Fatalf("Accept %q: the framed answer is not the JSON one framed", tt.accept)
			}
			continue
		}
		if !reflect.DeepEqual(got, asJSON) {
			t.Fatalf("Accept %q: the answer differs from the JSON one:\n%+v\nwant\n%+v", tt.accept, got, asJSON)
		}
	}

	// Refusals of the whole batch are JSON, framed or not.
	for _, bad := range [][]byte{[]byte("{not json"), mustJSON(t, client.SealBatchRequest{Requests: make([]client.SealRequest, client.MaxSealBatch+1)})} {
		status, ctype, data := post(client.SealBatchFramed, bad)
		var eb client.ErrorBody
		if status != http.StatusBadRequest || ctype != "application/json" || json.Unmarshal(data, &eb) != nil || eb.Code != client.CodeBadRequest {
			t.Fatalf("a refused framed batch: %d %s %s, want 400 and a JSON bad_request", status, ctype, data)
		}
	}

	// The client asks for the framed answer and reads what JSON says.
	res, err := v.Client.SealBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range asJSON.Items {
		if it.Error != nil {
			var ce *client.Error
			if !errors.As(res[i].Err, &ce) || ce.Code != it.Error.Code || ce.Status != it.Status || ce.Message != it.Error.Error || res[i].Response != nil {
				t.Fatalf("item %d: %v, want %+v", i, res[i].Err, it.Error)
			}
			continue
		}
		if res[i].Err != nil || !reflect.DeepEqual(res[i].Response, it.Sealed) {
			t.Fatalf("item %d: %+v %v, want %+v", i, res[i].Response, res[i].Err, it.Sealed)
		}
		for _, s := range res[i].Response.Sealed {
			if sum := sha256.Sum256(s.Ciphertext); hex.EncodeToString(sum[:]) != s.SHA256 {
				t.Fatalf("item %d: a ciphertext's sha256 is not its SHA256", i)
			}
		}
	}
	if !errors.Is(res[2].Err, client.ErrNotDelivered) {
		t.Fatalf("an operator's value not delivered: %v, want ErrNotDelivered", res[2].Err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
