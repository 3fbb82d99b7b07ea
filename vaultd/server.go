package vaultd

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/meshgen/meshgen/vaultd/client"
)

// maxBody bounds a request body (an adopt of the foundation's secrets is the
// largest).
const maxBody = 16 << 20

// Listen opens addr: "unix:///path/vault.sock" makes the socket with mode
// 0600, replacing a stale one left by a vaultd that died. A TCP address is
// refused here: it needs mutual TLS ([ListenTLS]).
func Listen(addr string) (net.Listener, error) {
	path, ok := strings.CutPrefix(addr, "unix://")
	if !ok {
		if strings.HasPrefix(addr, "tcp://") {
			return nil, fmt.Errorf("listen %s: a TCP listener needs mutual TLS: give a certificate, its key and the CA of the clients it accepts (--tls-cert, --tls-key, --tls-client-ca)", addr)
		}
		return nil, fmt.Errorf("listen %q: want unix:///path/vault.sock", addr)
	}
	if path == "" || !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("listen %q: the socket path must be absolute", addr)
	}
	if _, err := os.Lstat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("listen %s: another vaultd answers on this socket; stop it first", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("listen %s: remove the stale socket: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	// Owner only. The peer-credential check in the handler answers only the
	// owner's uid even inside the moment before this chmod.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	return ln, nil
}

// TLSOptions are the files of a TCP listener with mutual TLS (PEM).
type TLSOptions struct {
	// CertFile and KeyFile are vaultd's certificate and key.
	CertFile, KeyFile string
	// ClientCAFile is the CA whose certificates vaultd accepts from
	// clients; a client without one is refused during the handshake.
	ClientCAFile string
}

// ListenTLS opens "tcp://host:port" with mutual TLS (TLS 1.3): only a client
// presenting a certificate signed by opts.ClientCAFile gets a connection.
func ListenTLS(addr string, opts TLSOptions) (net.Listener, error) {
	hostport, ok := strings.CutPrefix(addr, "tcp://")
	if !ok {
		return nil, fmt.Errorf("listen %q: want tcp://host:port with TLS", addr)
	}
	if opts.CertFile == "" || opts.KeyFile == "" || opts.ClientCAFile == "" {
		return nil, fmt.Errorf("listen %s: mutual TLS needs a certificate, its key and a client CA", addr)
	}
	cert, err := tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("listen %s: vaultd's certificate: %w", addr, err)
	}
	pem, err := os.ReadFile(opts.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("listen %s: client CA: %w", addr, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("listen %s: client CA %s holds no PEM certificate", addr, opts.ClientCAFile)
	}
	ln, err := net.Listen("tcp", hostport)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return tls.NewListener(ln, &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS13,
	}), nil
}

// ServeOptions configure [Vault.Serve].
type ServeOptions struct {
	// Log receives one line per refused request and failure; never a value.
	// nil discards.
	Log *slog.Logger
	// Owner is the only uid answered; -1 means the process's own.
	Owner int
	// PolicyInterval is how often maximum ages are checked; 0 means a minute.
	PolicyInterval time.Duration
}

type credKey struct{}

// cred is the peer's credentials from SO_PEERCRED.
type cred struct {
	uid, pid int
	ok       bool
}

// Serve answers the API on ln until ctx is done, then shuts down gracefully.
func (v *Vault) Serve(ctx context.Context, ln net.Listener, opts ServeOptions) error {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Owner < 0 {
		opts.Owner = os.Geteuid()
	}
	if opts.PolicyInterval <= 0 {
		opts.PolicyInterval = time.Minute
	}
	srv := &http.Server{
		Handler:           v.handler(opts),
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, credKey{}, peerCred(c))
		},
		ErrorLog: slog.NewLogLogger(opts.Log.Handler(), slog.LevelWarn),
	}
	// The policy timer and the shutdown end with ctx, or when the listener
	// fails.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(opts.PolicyInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				srv.Shutdown(sctx)
				return
			case <-t.C:
				started, err := v.Tick(ctx)
				for _, n := range started {
					opts.Log.Info("rotation started: maximum age passed", "secret", n)
				}
				if err != nil {
					opts.Log.Error("maximum-age rotations", "err", err)
				}
			}
		}
	}()
	err := srv.Serve(ln)
	cancel()
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve: %w", err)
}

// peerCred reads the connecting process's credentials (SO_PEERCRED).
func peerCred(c net.Conn) cred {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return cred{}
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return cred{}
	}
	var out cred
	raw.Control(func(fd uintptr) {
		u, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		if err == nil {
			out = cred{uid: int(u.Uid), pid: int(u.Pid), ok: true}
		}
	})
	return out
}

func (v *Vault) handler(opts ServeOptions) http.Handler {
	mux := http.NewServeMux()
	h := func(pattern string, fn func(*http.Request, *entry) (any, error)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			v.serve(w, r, opts, fn)
		})
	}
	h("GET /v1/recipient", func(r *http.Request, e *entry) (any, error) {
		return client.RecipientResponse{Recipient: v.Recipient()}, nil
	})
	h("GET /v1/status", func(r *http.Request, e *entry) (any, error) {
		return v.Status(), nil
	})
	h("GET /v1/generation", func(r *http.Request, e *entry) (any, error) {
		return v.Generation(), nil
	})
	h("POST /v1/seal", func(r *http.Request, e *entry) (any, error) {
		var req client.SealRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		e.Names, e.Recipients = auditNames(req.Name), v.auditRecipients(req.Appliers, req.Recipients)
		resp, err := v.Seal(r.Context(), req)
		if err != nil {
			return nil, err
		}
		e.Version = resp.Version
		return resp, nil
	})
	h("POST /v1/seal-batch", func(r *http.Request, e *entry) (any, error) {
		var req client.SealBatchRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		results, err := v.SealBatch(r.Context(), req.Requests)
		if err != nil {
			for _, sr := range req.Requests {
				e.Names = append(e.Names, auditNames(sr.Name)...)
			}
			return nil, err
		}
		// One audit line per secret, as if each had been sealed alone.
		resp := client.SealBatchResponse{Items: make([]client.SealBatchItem, len(results))}
		e.items = make([]entry, 0, len(results))
		for i, res := range results {
			sr := req.Requests[i]
			line := *e
			line.items = nil
			line.Names, line.Recipients = auditNames(sr.Name), v.auditRecipients(sr.Appliers, sr.Recipients)
			if res.Err != nil {
				body := errorBody(res.Err)
				line.Outcome, line.Error, line.sync = body.Code, body.Error, true
				resp.Items[i] = client.SealBatchItem{Error: &body, Status: status(body.Code)}
				logRefusal(opts, e.Op, e.UID, body, res.Err)
			} else {
				line.Version = res.Response.Version
				resp.Items[i].Sealed = res.Response
			}
			e.items = append(e.items, line)
		}
		if accepts(r, client.SealBatchFramed) {
			return framedBatch(resp), nil
		}
		return resp, nil
	})
	h("POST /v1/put", func(r *http.Request, e *entry) (any, error) {
		var req client.PutRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		e.Names, e.sync = auditNames(req.Name), true
		resp, err := v.Put(r.Context(), req)
		if err != nil {
			return nil, err
		}
		e.Version = resp.Version
		return resp, nil
	})
	h("POST /v1/adopt", func(r *http.Request, e *entry) (any, error) {
		var req client.AdoptRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		e.sync = true
		for _, s := range req.Secrets {
			e.Names = append(e.Names, auditNames(s.Name)...)
		}
		return v.Adopt(r.Context(), req)
	})
	h("POST /v1/rotate", func(r *http.Request, e *entry) (any, error) {
		var req client.NameRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		e.Names, e.sync = auditNames(req.Name), true
		rot, err := v.Rotate(r.Context(), req.Name)
		if err != nil {
			return nil, err
		}
		e.Version = rot.To
		return rot, nil
	})
	step := func(s Step) func(*http.Request, *entry) (any, error) {
		return func(r *http.Request, e *entry) (any, error) {
			var req client.ConfirmRequest
			if s == StepAbandon {
				var n client.NameRequest
				if err := decode(r, &n); err != nil {
					return nil, err
				}
				req.Name = n.Name
			} else if err := decode(r, &req); err != nil {
				return nil, err
			}
			e.Names, e.Version, e.sync = auditNames(req.Name), req.Version, true
			e.Recipients = v.auditRecipients([]string{req.Recipient})
			rot, err := v.Confirm(r.Context(), s, req)
			if err != nil {
				return nil, err
			}
			return struct {
				Rotation *client.Rotation `json:"rotation"`
			}{rot}, nil
		}
	}
	h("POST /v1/rotation/confirm-applied", step(StepApplied))
	h("POST /v1/rotation/confirm-read", step(StepRead))
	h("POST /v1/rotation/confirm-retired", step(StepRetired))
	h("POST /v1/rotation/abandon", step(StepAbandon))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		v.serve(w, r, opts, func(*http.Request, *entry) (any, error) {
			return nil, refuse(client.ErrNotFound, "the API is under /v1 (see package vaultd/client)", "no such endpoint")
		})
	})
	return mux
}

// serve checks the caller, runs fn, answers and audits, in that order; one
// place does the bookkeeping for every exit.
func (v *Vault) serve(w http.ResponseWriter, r *http.Request, opts ServeOptions, fn func(*http.Request, *entry) (any, error)) {
	c, _ := r.Context().Value(credKey{}).(cred)
	// The route's pattern ("POST /v1/seal"), never the raw path a caller
	// sent.
	op := r.Pattern
	if op == "/" {
		op = r.Method + " (no such endpoint)"
	}
	e := entry{Time: v.now().UTC(), UID: c.uid, PID: c.pid, Op: op, Outcome: "ok"}
	if r.TLS != nil {
		// Over TCP the handshake already required a client certificate
		// signed by the client CA; the audit names it.
		e.UID, e.PID = -1, 0
		if len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
			c = cred{uid: opts.Owner, ok: true}
			e.Peer = r.TLS.VerifiedChains[0][0].Subject.String()
		}
	}
	var out any
	var err error
	if !c.ok || c.uid != opts.Owner {
		err = refuse(client.ErrForbidden, "", "only the socket's owner (uid %d) may talk to vaultd", opts.Owner)
		if !c.ok {
			e.UID = -1
		}
	} else {
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		out, err = fn(r, &e)
	}
	if err != nil {
		e.Outcome, e.Error = client.CodeOf(err), err.Error()
		e.sync = true
	}
	lines := []entry{e}
	if err == nil && e.items != nil {
		lines = e.items
	}
	if aerr := v.audit.write(lines...); aerr != nil {
		// An unaudited answer is not given.
		opts.Log.Error("audit", "err", aerr)
		out, err = nil, fmt.Errorf("vaultd cannot write its audit log: %w", aerr)
		e.Outcome = client.CodeInternal
	}
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		body := errorBody(err)
		logRefusal(opts, e.Op, e.UID, body, err)
		w.WriteHeader(status(body.Code))
		json.NewEncoder(w).Encode(body)
		return
	}
	if fb, ok := out.(framedBatch); ok {
		w.Header().Set("Content-Type", client.SealBatchFramed)
		if err := fb.write(w, &v.answers); err != nil {
			opts.Log.Warn("write response", "op", e.Op, "err", err)
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		opts.Log.Warn("write response", "op", e.Op, "err", err)
	}
}

// errorBody is what a caller is told of err: its code, its message (which
// never carries a value) and its hint.
func errorBody(err error) client.ErrorBody {
	body := client.ErrorBody{Code: client.CodeOf(err), Error: err.Error()}
	var h interface{ Hint() string }
	if errors.As(err, &h) {
		body.Hint = h.Hint()
	}
	return body
}

// logRefusal logs a failed or refused request (or batch item).
func logRefusal(opts ServeOptions, op string, uid int, body client.ErrorBody, err error) {
	if body.Code == client.CodeInternal {
		opts.Log.Error("request failed", "op", op, "err", err)
	} else {
		opts.Log.Info("request refused", "op", op, "uid", uid, "code", body.Code, "err", err)
	}
}

func status(code string) int {
	switch code {
	case client.CodeBadRequest:
		return http.StatusBadRequest
	case client.CodeNotFound:
		return http.StatusNotFound
	case client.CodeForbidden:
		return http.StatusForbidden
	case client.CodeRefused:
		return http.StatusUnprocessableEntity
	case client.CodeNotRotatable, client.CodeOperator, client.CodeNotDelivered, client.CodeConflict:
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// decode reads a JSON body strictly. Its errors name the field, never
// quote the input.
func decode(r *http.Request, into any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		var te *json.UnmarshalTypeError
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &te):
			return refuse(client.ErrBadRequest, "", "request field %q: want %s", te.Field, te.Type)
		case errors.As(err, &mbe):
			return refuse(client.ErrBadRequest, "", "request body over %d bytes", maxBody)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return refuse(client.ErrBadRequest, "", "request has an %s", strings.TrimPrefix(err.Error(), "json: "))
		}
		return refuse(client.ErrBadRequest, "", "request body is not the JSON %s expects", r.URL.Path)
	}
	return nil
}

// auditNames and auditRecipients keep what the audit log records to valid
// names and recipients: anything else a caller sent is not written down (it
// could be a value pasted in the wrong place).
func auditNames(names ...string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if validName(n) {
			out = append(out, n)
		} else {
			out = append(out, "(invalid name)")
		}
	}
	return out
}

func (v *Vault) auditRecipients(lists ...[]string) []string {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for _, rs := range lists {
		for _, r := range rs {
			if r == "" {
				continue
			}
			if _, err := v.parsed.parse(r); err == nil {
				out = append(out, r)
			} else {
				out = append(out, "(invalid recipient)")
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], s[:])
	return string(h[:])
}
