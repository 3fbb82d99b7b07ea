// Package vaultd is the vault: the only maker of the mesh's shared secrets
// after genesis (design 27, ADR 0113). It makes a secret when first asked,
// seals it with age to each node that needs it, holds operator and genesis
// values, and rotates secrets without leaving anyone without a working
// credential (ADR 0114).
//
// [Open] opens the vault in a directory; [Vault.Serve] answers the HTTP API
// of package [github.com/meshgen/meshgen/vaultd/client] on a listener made by
// [Listen] (a unix socket, mode 0600, where only the socket's owner's uid is
// answered, checked with SO_PEERCRED) or [ListenTLS] (TCP with mutual TLS).
// The reconciler drives rotations through the same API; the state machine
// and its rules are documented in the client package and in
// vaultd/internal/rotation.
//
// The API, JSON in and out:
//
//	GET  /v1/recipient                   the vault's own age recipient
//	POST /v1/seal                        make if absent, seal to each recipient
//	POST /v1/seal-batch                  many seals, their records written at once
//	POST /v1/put                         an operator's value (sealed to the vault)
//	POST /v1/adopt                       genesis's first secrets (sealed to the vault)
//	POST /v1/rotate                      start a rotation
//	POST /v1/rotation/confirm-applied    an applier ensured the new value
//	POST /v1/rotation/confirm-read       a reader reads the new value
//	POST /v1/rotation/confirm-retired    an applier removed a credential
//	POST /v1/rotation/abandon            give a rotation up, before retiring
//	GET  /v1/status                      every secret and rotation, no value
//	GET  /v1/generation                  a token that changes with every write
//
// Every request is audited (DIR/audit.log, one JSON line: time, uid, pid or
// TLS peer, route, names, recipients, version, outcome); a batch seal with
// one line per secret.
//
// Nothing vaultd writes outside its store carries a value: not its log, not
// its audit log, not an error, not an HTTP error body.
package vaultd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"filippo.io/age"
	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/internal/agefile"
	"github.com/meshgen/meshgen/vaultd/internal/rotation"
	"github.com/meshgen/meshgen/vaultd/internal/store"
	"github.com/meshgen/meshgen/vaultd/internal/x25519"
)

// Options configure a [Vault].
type Options struct {
	// Dir is the vault's directory: its identity, its records, its audit log.
	Dir string
	// NodesFile, when set, lists the mesh's node recipients (one age
	// recipient a line, optionally after a node name; # comments). A seal
	// to any other recipient is refused. It is read again when it changes.
	NodesFile string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Vault holds the secrets. It is safe for concurrent use.
type Vault struct {
	store *store.FileStore
	nodes *nodeList
	audit *auditLog
	now   func() time.Time
	gen   *generation

	// mu guards recs and names. A record in recs is never changed in place:
	// a change is made on a clone, written, then swapped in, so readers
	// need only mu. Changes to one secret are serialised by its lock in
	// names, so writes (and their fsyncs) of different secrets overlap.
	mu    sync.Mutex
	recs  map[string]*record
	names map[string]*sync.Mutex

	// answers are the buffers of the seal batch route's framed answers.
	answers bufPool

	// parsed remembers recipients already parsed (a recipient string
	// always parses to the same key): a reconcile names each node's
	// recipient in thousands of seal requests.
	parsed recipientCache
}

// lock takes the locks of names, in order, and returns their release.
func (v *Vault) lock(names ...string) (unlock func()) {
	names = uniq(names)
	v.mu.Lock()
	ms := make([]*sync.Mutex, len(names))
	for i, n := range names {
		m := v.names[n]
		if m == nil {
			m = &sync.Mutex{}
			v.names[n] = m
		}
		ms[i] = m
	}
	v.mu.Unlock()
	for _, m := range ms {
		m.Lock()
	}
	return func() {
		for i := len(ms) - 1; i >= 0; i-- {
			ms[i].Unlock()
		}
	}
}

// rec returns name's record, nil if none.
func (v *Vault) rec(name string) *record {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.recs[name]
}

// validName reports whether name is a secret's name: letters, digits and
// . _ - @ : /, at most 200 bytes, starting with a letter or digit
// (^[A-Za-z0-9][A-Za-z0-9._@:/-]{0,199}$; a loop, not a regular
// expression, as every seal and audit line checks one).
func validName(name string) bool {
	if len(name) == 0 || len(name) > 200 {
		return false
	}
	for i := range len(name) {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '@' || c == ':' || c == '/' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// Open opens (or, on first start, makes) the vault in opts.Dir and loads
// every record.
func Open(opts Options) (_ *Vault, err error) {
	if opts.Dir == "" {
		return nil, errors.New("vaultd needs a directory (--dir)")
	}
	st, err := store.Open(opts.Dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			st.Close() // release the directory
		}
	}()
	v := &Vault{store: st, now: opts.Now, recs: map[string]*record{}, names: map[string]*sync.Mutex{}}
	if v.now == nil {
		v.now = time.Now
	}
	if opts.NodesFile != "" {
		v.nodes = &nodeList{path: opts.NodesFile}
		if err := v.nodes.refresh(); err != nil {
			return nil, err
		}
	}
	err = st.All(func(data []byte) error {
		var r record
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		if r.Values == nil {
			r.Values = map[uint64]*value{}
		}
		if r.Sealed == nil {
			r.Sealed = map[string][]byte{}
		}
		v.recs[r.Name] = &r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load the vault's records: %w", err)
	}
	if v.gen, err = openGeneration(st); err != nil {
		return nil, err
	}
	if v.audit, err = openAudit(opts.Dir); err != nil {
		return nil, err
	}
	return v, nil
}

// Close records the generation, closes the audit log and releases the
// directory.
func (v *Vault) Close() error {
	return errors.Join(v.gen.close(), v.audit.close(), v.store.Close())
}

// Recipient is the vault's own age recipient; values delivered to the vault
// are sealed to it.
func (v *Vault) Recipient() string { return v.store.Recipient().String() }

func checkName(name string) error {
	if !validName(name) {
		// An invalid name is not echoed: it could be anything, a value pasted
		// in the wrong place included.
		return refuse(client.ErrBadRequest, "", "secret name is not valid (%d bytes): letters, digits and . _ - @ : /, at most 200, starting with a letter or digit", len(name))
	}
	return nil
}

// put writes r and swaps it in. The caller holds r's lock.
func (v *Vault) put(r *record) error {
	if err := v.putAll([]*record{r}); err != nil {
		return fmt.Errorf("store secret %q: %w", r.Name, err)
	}
	return nil
}

// putAll writes rs as one group (all on disk or, after a crash, none: see
// store.FileStore.Write) with one pair of fsyncs, and swaps them in. Each
// record takes its own generation counter, so the token still rises with
// every record written. The caller holds the lock of every record.
func (v *Vault) putAll(rs []*record) error {
	entries := make([]store.Entry, len(rs))
	for i, r := range rs {
		r.prune()
		data, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode record of %q: %w", r.Name, err)
		}
		entries[i] = store.Entry{Key: r.Name, Data: data}
	}
	// The counters are taken before the write and answered only after it
	// ended (see generation): a durable write is never behind the token.
	taken := make([]uint64, 0, len(rs))
	defer func() {
		for _, n := range taken {
			v.gen.end(n)
		}
	}()
	for range rs {
		n, err := v.gen.begin()
		if err != nil {
			return err
		}
		taken = append(taken, n)
	}
	if err := v.store.Write(entries); err != nil {
		return err
	}
	v.mu.Lock()
	for _, r := range rs {
		v.recs[r.Name] = r
	}
	v.mu.Unlock()
	return nil
}

// newRecord makes the first value of a secret.
func (v *Vault) newRecord(name string, origin client.Origin, spec client.Spec, val []byte, derived string) (*record, error) {
	r := &record{Name: name, Origin: origin, Spec: spec, Last: 1, Values: map[uint64]*value{}, Sealed: map[string][]byte{}}
	r.Rot = rotation.State{Kind: spec.Rotation, Current: rotation.Live{Version: 1}}
	if spec.Rotation == client.TwoParty {
		r.Rot.Current.Slot = client.SlotA
	}
	if derived == "" && spec.Format != "" {
		var err error
		if derived, err = derive(spec.Format, val); err != nil {
			return nil, fmt.Errorf("secret %q: %w", name, err)
		}
	}
	r.Values[1] = &value{Value: val, Derived: derived, DerivedFormat: spec.Format, Made: v.now().UTC()}
	return r, nil
}

// Seal makes req.Name if absent and returns what each recipient must hold
// now, sealed to it.
func (v *Vault) Seal(ctx context.Context, req client.SealRequest) (*client.SealResponse, error) {
	c, err := v.checkSeal(req)
	if err != nil {
		return nil, err
	}
	defer v.lock(req.Name)()
	resp, r, err := v.sealLocked(c)
	if err != nil {
		return nil, err
	}
	if r != nil {
		if err := v.put(r); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// checkedSeal is a seal request checked before any lock is taken: its spec
// with defaults, its recipients sorted and parsed.
type checkedSeal struct {
	req               client.SealRequest
	spec              client.Spec
	appliers, readers []string
	// parsed holds the appliers' parsed recipients, then the readers'.
	parsed []age.Recipient
}

// recipient returns r's parsed recipient (r is an applier or a reader:
// both lists are sorted).
func (c *checkedSeal) recipient(r string) age.Recipient {
	if i, ok := slices.BinarySearch(c.appliers, r); ok {
		return c.parsed[i]
	}
	if i, ok := slices.BinarySearch(c.readers, r); ok {
		return c.parsed[len(c.appliers)+i]
	}
	return nil
}

func (v *Vault) checkSeal(req client.SealRequest) (*checkedSeal, error) {
	if err := checkName(req.Name); err != nil {
		return nil, err
	}
	spec, err := normalize(req.Spec)
	if err != nil {
		return nil, fmt.Errorf("seal %q: %w", req.Name, err)
	}
	c := &checkedSeal{req: req, spec: spec, appliers: uniq(req.Appliers), readers: uniq(req.Recipients)}
	if len(c.appliers)+len(c.readers) == 0 {
		return nil, refuse(client.ErrBadRequest, "", "seal %q: no recipients", req.Name)
	}
	c.parsed = make([]age.Recipient, 0, len(c.appliers)+len(c.readers))
	for _, list := range [][]string{c.appliers, c.readers} {
		for _, r := range list {
			p, err := v.checkRecipient(r)
			if err != nil {
				return nil, fmt.Errorf("seal %q: %w", req.Name, err)
			}
			c.parsed = append(c.parsed, p)
		}
	}
	return c, nil
}

// sealLocked answers a checked seal and returns the changed record to
// write, nil when nothing changed. It writes nothing itself. The caller
// holds the lock of c's name.
func (v *Vault) sealLocked(c *checkedSeal) (_ *client.SealResponse, changed *record, err error) {
	req, spec, appliers, readers := c.req, c.spec, c.appliers, c.readers
	old := v.rec(req.Name)
	r := old
	dirty := false
	change := func() {
		if !dirty {
			r, dirty = old.clone(), true
		}
	}
	if old == nil {
		if spec.Operator {
			return nil, nil, refuse(client.ErrNotDelivered, fmt.Sprintf("deliver it with `meshgen vault put %s`", req.Name),
				"secret %q is an operator's value and has not been delivered yet", req.Name)
		}
		if r, err = v.newRecord(req.Name, client.OriginMesh, spec, makeValue(spec), ""); err != nil {
			return nil, nil, err
		}
		dirty = true
	}
	if r.Origin == client.OriginOperator {
		// An operator's value is one value, replaced only by the operator.
		spec.Rotation, spec.MaxAge = client.OneParty, 0
	}
	if r.Spec != spec {
		if r.Rot.Kind != spec.Rotation && !r.Rot.Idle() {
			return nil, nil, refuse(client.ErrConflict, fmt.Sprintf("let the rotation finish or abandon it with `meshgen vault rotate --abandon %s`", req.Name),
				"seal %q: rotation kind changes from %s to %s while a rotation is %s", req.Name, r.Rot.Kind, spec.Rotation, r.Rot.Phase)
		}
		change()
		r.Spec = spec
		setKind(&r.Rot, spec.Rotation)
	}
	if !slices.Equal(r.Appliers, appliers) || !slices.Equal(r.Readers, readers) {
		change()
		r.Appliers, r.Readers = appliers, readers
		r.Rot.Recipients(appliers, readers)
	}
	if v.due(r) {
		change()
		if err := v.start(r, reasonMaxAge); err != nil {
			return nil, nil, err
		}
	}
	// Every live value has the derived form its spec asks for, and no
	// other: a changed format is derived again and sealed again.
	for _, l := range r.Rot.Live() {
		if r.Values[l.Version].DerivedFormat == r.Spec.Format {
			continue
		}
		change()
		val := r.Values[l.Version]
		if val.Derived, err = derive(r.Spec.Format, val.Value); err != nil {
			return nil, nil, fmt.Errorf("seal %q: %w", req.Name, err)
		}
		val.DerivedFormat = r.Spec.Format
		for k := range r.Sealed {
			if versionOf(k) == l.Version && strings.HasSuffix(k, "|"+string(client.ItemDerived)) {
				delete(r.Sealed, k)
			}
		}
	}
	resp := &client.SealResponse{Name: r.Name, Origin: r.Origin, Slots: r.Rot.Slots(), Rotation: r.Rot.Status(r.Name)}
	rv := r.Rot.ReaderVersion()
	resp.Version, resp.Slot = rv.Version, rv.Slot
	for _, d := range r.Rot.Deliveries(appliers, readers) {
		items := []client.Item{client.ItemValue}
		if d.Role == client.RoleApplier && r.Values[d.Live.Version].Derived != "" {
			items = append(items, client.ItemDerived)
		}
		for _, item := range items {
			key := cacheKey(d.Recipient, d.Live.Version, item)
			ct, ok := r.Sealed[key]
			if !ok {
				change()
				val := r.Values[d.Live.Version]
				plain := val.Value
				if item == client.ItemDerived {
					plain = []byte(val.Derived)
				}
				// agefile.Seal writes what age.Encrypt would, without its
				// streaming writer's allocations.
				if ct, err = agefile.Seal(c.recipient(d.Recipient), plain); err != nil {
					return nil, nil, fmt.Errorf("seal %q to %s: %w", r.Name, d.Recipient, err)
				}
				r.Sealed[key] = ct
			}
			resp.Sealed = append(resp.Sealed, client.Sealed{
				Recipient: d.Recipient, Role: d.Role, Slot: d.Live.Slot, Version: d.Live.Version,
				Item: item, Current: d.Current, Ciphertext: ct, SHA256: sha256hex(ct),
			})
		}
	}
	if dirty {
		return resp, r, nil
	}
	return resp, nil, nil
}

// setKind changes an idle secret's rotation kind: a two-party secret's
// current value takes slot A.
func setKind(s *rotation.State, kind string) {
	if s.Kind == kind || !s.Idle() {
		return
	}
	s.Kind = kind
	s.Current.Slot = client.SlotNone
	if kind == client.TwoParty {
		s.Current.Slot = client.SlotA
	}
}

// checkRecipient parses a node's recipient to seal to. The seal is age's
// X25519 stanza made with half the curve work of age's own recipient (see
// vaultd/internal/x25519): on a first reconcile, sealing to every node is
// most of vaultd's CPU.
func (v *Vault) checkRecipient(r string) (age.Recipient, error) {
	p, err := v.parsed.parse(r)
	if err != nil {
		// Not echoed, like an invalid name.
		return nil, refuse(client.ErrBadRequest, "", "a recipient (%d bytes) is not an age X25519 recipient (age1...)", len(r))
	}
	if v.nodes != nil {
		ok, err := v.nodes.has(r)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, refuse(client.ErrRefusedRecipient, "a node's recipient is in nodes/<node>.yaml; enrol the node first",
				"recipient %s is not a node of the mesh", r)
		}
	}
	return p, nil
}

// recipientCache remembers the recipients it parsed, at most
// maxParsedRecipients of them (a mesh's nodes; a caller sending ever new
// recipients grows it no further). A remembered recipient sealed to twice
// keeps a table that makes its seals faster, about 15 KB (see
// internal/x25519): 4,096 of them are at most about 63 MB. A recipient
// past the limit is parsed for each seal and sealed to without a table. A
// recipient that does not parse is not remembered. It is safe for
// concurrent use.
type recipientCache struct {
	m sync.Map // recipient string -> *x25519.Recipient
	n atomic.Int64
}

const maxParsedRecipients = 1 << 12

// parse returns x25519.Parse(s), from the cache when s was parsed before.
func (c *recipientCache) parse(s string) (*x25519.Recipient, error) {
	if p, ok := c.m.Load(s); ok {
		return p.(*x25519.Recipient), nil
	}
	p, err := x25519.Parse(s)
	if err != nil {
		return nil, err
	}
	if c.n.Load() < maxParsedRecipients {
		if _, loaded := c.m.LoadOrStore(s, p); !loaded {
			c.n.Add(1)
		}
	}
	return p, nil
}

// open decrypts a value sealed to the vault's recipient.
func (v *Vault) open(ct []byte) ([]byte, error) {
	if len(ct) == 0 {
		return nil, refuse(client.ErrBadRequest, "", "no value")
	}
	rd, err := age.Decrypt(bytes.NewReader(ct), v.store.Identity())
	if err != nil {
		return nil, refuse(client.ErrBadRequest, "seal the value to the vault's recipient (`meshgen vault put` does)", "the value is not sealed to the vault's recipient")
	}
	val, err := io.ReadAll(io.LimitReader(rd, maxValue+1))
	if err != nil {
		return nil, refuse(client.ErrBadRequest, "", "the sealed value is damaged")
	}
	if len(val) == 0 || len(val) > maxValue {
		return nil, refuse(client.ErrBadRequest, "", "a value is 1 to %d bytes", maxValue)
	}
	return val, nil
}

// Status lists every secret by name.
func (v *Vault) Status() *client.Status {
	v.mu.Lock()
	defer v.mu.Unlock()
	st := &client.Status{Recipient: v.Recipient(), Secrets: []client.SecretStatus{}}
	for _, r := range v.recs {
		st.Secrets = append(st.Secrets, client.SecretStatus{
			Name: r.Name, Origin: r.Origin, Version: r.Rot.ReaderVersion().Version, Kind: r.Rot.Kind,
			Made: r.Values[r.Rot.Current.Version].Made, Slots: r.Rot.Slots(),
			Appliers: slices.Clone(r.Appliers), Readers: slices.Clone(r.Readers),
			NotRotatable: r.Spec.NotRotatable, Rotation: r.Rot.Status(r.Name),
		})
	}
	sort.Slice(st.Secrets, func(i, j int) bool { return st.Secrets[i].Name < st.Secrets[j].Name })
	return st
}

// uniq returns in sorted, without repeats. The result may share in's
// array (when it has one element or none, as most recipient lists do):
// neither is changed in place.
func uniq(in []string) []string {
	if len(in) <= 1 {
		return slices.Clip(in)
	}
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}
