// Package client talks to vaultd, the only maker of the mesh's shared secrets,
// over its unix socket: HTTP with JSON bodies on versioned paths (/v1/...).
// A vaultd on another machine is reached over TCP with mutual TLS
// ([DialTLS]). The reconciler, genesis and the meshgen CLI import it; it imports nothing
// of theirs and nothing of vaultd's internals.
//
// # Sealing
//
// [Client.Seal] makes a secret if absent and returns, for every recipient,
// what it must hold now as age ciphertext. The same version sealed to the
// same recipient is the same bytes every time (vaultd keeps the ciphertext),
// so an unchanged mesh commits nothing. The caller never sees a plaintext.
// [Client.SealBatch] seals many secrets in one request and one durable
// write: what a reconcile making every secret of a new mesh uses. Its
// answer comes in the compact [SealBatchFramed] form, not JSON, when the
// caller asks for it (this client does); every other answer, and every
// refusal, is JSON.
//
// # Delivering values
//
// [Client.Put] stores an operator's value and [Client.Adopt] the foundation's
// first secrets made by genesis. Both are sealed on the client side to the
// vault's own recipient ([Client.Recipient]), so no value crosses the socket
// in clear. An operator's value is never replaced by vaultd; an adopted one
// is the mesh's own and rotatable.
//
// # Rotation
//
// [Client.Rotate] starts a rotation (design 27 "Rotation", ADR 0114); vaultd
// also starts one by itself when a value is older than [Spec.MaxAge]. A
// rotation is a persisted state machine the reconciler drives from what hostd
// reports on status/<node> branches:
//
// Two-party (a consumer and its provider, two credential slots A and B):
//
//	applying  the new value is made for the unused slot; appliers receive
//	          both slots, readers the old one. Each applier's run-once step
//	          ensures the new credential, then: ConfirmApplied(applier, to).
//	reading   readers receive the new slot and are recreated (a changed
//	          version). Each reader, once it authenticated with the new one:
//	          ConfirmRead(reader, to). A reader that is unreachable keeps
//	          the old credential, which stays valid until it confirms.
//	retiring  the old slot is listed "retiring": appliers remove that
//	          credential (never the consumer's resource or data), then
//	          ConfirmRetired(applier, from). The rotation is done.
//
// One-party (a provider's administrative credential, a module's own secret):
//
//	applying  (only when there are appliers) the new value is staged:
//	          appliers receive it beside the current one (Current false)
//	          and change the backend with the current one, then
//	          ConfirmApplied(applier, to). Readers keep the current value.
//	reading   the new value is current; readers receive it and are
//	          recreated, then ConfirmRead(reader, to). Then it is done.
//
// [Client.Abandon] is possible until the old credential is retired: readers
// go back to the old value and, for two-party, appliers retire the new slot
// (ConfirmRetired(applier, to)). A rotation of a secret whose Spec names
// NotRotatable fails with [ErrNotRotatable], naming why; of an operator's
// value with [ErrOperatorValue]. [Client.Status] shows every rotation and the
// parties it waits on.
//
// # Errors
//
// A refused request returns an [*Error] wrapping one of the sentinel errors
// ([ErrNotFound], [ErrRefusedRecipient], [ErrConflict], ...); compare with
// errors.Is. Transport failures are returned wrapped as they are.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// Client talks to one vaultd. It is safe for concurrent use.
type Client struct {
	// addr is the socket path, or host:port for mutual TLS.
	addr string
	base string
	http *http.Client
}

// Dial returns a client for the vaultd listening on the unix socket at
// socketPath ("unix://" prefix allowed). It connects lazily, per request.
func Dial(socketPath string) *Client {
	path := strings.TrimPrefix(socketPath, "unix://")
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConns:        16,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
	}
	return &Client{addr: path, base: "http://vaultd", http: &http.Client{Transport: tr}}
}

// DialTLS returns a client for a vaultd listening with mutual TLS on addr
// ("host:port", "tcp://" prefix allowed). cfg must carry the client's
// certificate and the CA that signed vaultd's; see [LoadTLS].
func DialTLS(addr string, cfg *tls.Config) *Client {
	addr = strings.TrimPrefix(addr, "tcp://")
	tr := &http.Transport{
		TLSClientConfig:     cfg,
		MaxIdleConns:        16,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
		ForceAttemptHTTP2:   false,
	}
	return &Client{addr: addr, base: "https://" + addr, http: &http.Client{Transport: tr}}
}

// LoadTLS reads a client certificate and key and the CA that signed
// vaultd's certificate (PEM files) into a config for [DialTLS].
func LoadTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("vault client certificate: %w", err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("vault CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("vault CA %s holds no PEM certificate", caFile)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13}, nil
}

// Addr returns the socket path (or host:port) the client talks to.
func (c *Client) Addr() string { return c.addr }

// Close drops idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Recipient returns the vault's own age recipient: what [Client.Put] and
// [Client.Adopt] values are sealed to.
func (c *Client) Recipient(ctx context.Context) (string, error) {
	var r RecipientResponse
	if err := c.do(ctx, http.MethodGet, "/v1/recipient", nil, &r); err != nil {
		return "", err
	}
	return r.Recipient, nil
}

// Seal makes the secret req.Name if absent and returns what every recipient
// must hold now, sealed to it.
func (c *Client) Seal(ctx context.Context, req SealRequest) (*SealResponse, error) {
	var r SealResponse
	if err := c.do(ctx, http.MethodPost, "/v1/seal", req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// SealBatch seals many secrets in one request, each as [Client.Seal] would
// (at most [MaxSealBatch], each naming a different secret). vaultd writes
// the records they change together, with one pair of fsyncs for the whole
// batch, so a reconcile making thousands of secrets pays for a few writes
// instead of one per secret. Every record is durable before the answer.
//
// It returns one result per request, in order. A request vaultd refuses
// alone (a bad name, an operator's value not delivered yet) is that
// result's Err, an [*Error] wrapping the sentinel as [Client.Seal] would
// return; the others are answered. The error is non-nil only when the
// batch as a whole failed (transport, a refused caller, a malformed batch,
// vaultd's store), and then no result is returned: records may or may not
// have been written, and sealing again is safe (the same version sealed to
// the same recipient is the same bytes). A vaultd older than the batch seal
// answers [ErrNotFound] for the whole batch: seal with [Client.Seal] then.
//
// It asks for the compact answer [SealBatchFramed] (no JSON, ciphertexts
// as raw bytes) and reads a JSON answer as well, so it works with a
// vaultd that answers only JSON.
func (c *Client) SealBatch(ctx context.Context, reqs []SealRequest) ([]SealResult, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	var r SealBatchResponse
	err := c.roundTrip(ctx, http.MethodPost, "/v1/seal-batch", SealBatchRequest{Requests: reqs}, SealBatchFramed, func(contentType string, data []byte) error {
		if t, _, _ := mime.ParseMediaType(contentType); t == SealBatchFramed {
			return decodeFramed(data, &r)
		}
		// A vaultd that does not frame its answer answers JSON.
		return json.Unmarshal(data, &r)
	})
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Code == CodeNotFound {
			return nil, fmt.Errorf("vaultd at %s has no batch seal (it is older than this client; seal one secret at a time): %w", c.addr, err)
		}
		return nil, err
	}
	if len(r.Items) != len(reqs) {
		return nil, fmt.Errorf("vaultd /v1/seal-batch: %d answers to %d requests", len(r.Items), len(reqs))
	}
	out := make([]SealResult, len(reqs))
	for i, it := range r.Items {
		switch {
		case it.Error != nil:
			out[i].Err = &Error{Status: it.Status, Code: it.Error.Code, Message: it.Error.Error, HintText: it.Error.Hint}
		case it.Sealed != nil:
			out[i].Response = it.Sealed
		default:
			return nil, fmt.Errorf("vaultd /v1/seal-batch: answer %d is empty", i)
		}
	}
	return out, nil
}

// Put stores an operator's value; req.Ciphertext is the value sealed to
// [Client.Recipient] (see [SealToVault]).
func (c *Client) Put(ctx context.Context, req PutRequest) (*PutResponse, error) {
	var r PutResponse
	if err := c.do(ctx, http.MethodPost, "/v1/put", req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Adopt stores the secrets genesis made, recorded as the mesh's own. Adopting
// the same value again is a no-op; a different value for a name already held
// is refused with [ErrConflict].
func (c *Client) Adopt(ctx context.Context, req AdoptRequest) (*AdoptResponse, error) {
	var r AdoptResponse
	if err := c.do(ctx, http.MethodPost, "/v1/adopt", req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Rotate starts a rotation of name, asked by an operator.
func (c *Client) Rotate(ctx context.Context, name string) (*Rotation, error) {
	var r Rotation
	if err := c.do(ctx, http.MethodPost, "/v1/rotate", NameRequest{Name: name}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Abandon abandons name's rotation; refused with [ErrConflict] once the old
// credential is being retired.
func (c *Client) Abandon(ctx context.Context, name string) (*Rotation, error) {
	return c.step(ctx, "/v1/rotation/abandon", NameRequest{Name: name})
}

// ConfirmApplied records that the applier req.Recipient ensured version
// req.Version. It returns the rotation after the step, or nil when the
// rotation is done.
func (c *Client) ConfirmApplied(ctx context.Context, req ConfirmRequest) (*Rotation, error) {
	return c.step(ctx, "/v1/rotation/confirm-applied", req)
}

// ConfirmRead records that the reader req.Recipient reads version
// req.Version (it was recreated and authenticated with it).
func (c *Client) ConfirmRead(ctx context.Context, req ConfirmRequest) (*Rotation, error) {
	return c.step(ctx, "/v1/rotation/confirm-read", req)
}

// ConfirmRetired records that the applier req.Recipient removed the
// credential of version req.Version (never the consumer's resource).
func (c *Client) ConfirmRetired(ctx context.Context, req ConfirmRequest) (*Rotation, error) {
	return c.step(ctx, "/v1/rotation/confirm-retired", req)
}

func (c *Client) step(ctx context.Context, path string, req any) (*Rotation, error) {
	var r struct {
		Rotation *Rotation `json:"rotation"`
	}
	if err := c.do(ctx, http.MethodPost, path, req, &r); err != nil {
		return nil, err
	}
	return r.Rotation, nil
}

// Generation returns the vault's change token: equal tokens mean no record
// changed between them (see [Generation]).
func (c *Client) Generation(ctx context.Context) (Generation, error) {
	var g Generation
	err := c.do(ctx, http.MethodGet, "/v1/generation", nil, &g)
	return g, err
}

// Status returns every secret, its origin, version and rotation.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var r Status
	if err := c.do(ctx, http.MethodGet, "/v1/status", nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	return c.roundTrip(ctx, method, path, in, "", func(_ string, data []byte) error {
		if out == nil {
			return nil
		}
		return json.Unmarshal(data, out)
	})
}

// roundTrip sends in as JSON, asking for the media type accept when it is
// not "", and gives a successful answer's content type and body to decode.
// A refusal is returned as an [*Error].
func (c *Client) roundTrip(ctx context.Context, method, path string, in any, accept string, decode func(contentType string, data []byte) error) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("vaultd %s: encode request: %w", path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("vaultd %s: %w", path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("vaultd at %s: %w (is vaultd running there?)", c.addr, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if resp.ContentLength > 0 && resp.ContentLength <= maxResponse {
		buf.Grow(int(resp.ContentLength) + bytes.MinRead)
	}
	_, err = buf.ReadFrom(io.LimitReader(resp.Body, maxResponse))
	data := buf.Bytes()
	if err != nil {
		return fmt.Errorf("vaultd %s: read response: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var eb ErrorBody
		if json.Unmarshal(data, &eb) != nil || eb.Error == "" {
			return &Error{Status: resp.StatusCode, Code: CodeInternal, Message: fmt.Sprintf("%s: %s", path, resp.Status)}
		}
		return &Error{Status: resp.StatusCode, Code: eb.Code, Message: eb.Error, HintText: eb.Hint}
	}
	if err := decode(resp.Header.Get("Content-Type"), data); err != nil {
		return fmt.Errorf("vaultd %s: decode response: %w", path, err)
	}
	return nil
}

// maxResponse bounds an answer's body.
const maxResponse = 256 << 20
