package loop

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshgen/meshgen/reconciler"
	"github.com/meshgen/meshgen/reconciler/branch"
	"github.com/meshgen/meshgen/vaultd/client"
)

// FormatVersion names how this reconciler resolves, renders, seals and
// writes. It is part of every recorded fingerprint of inputs: bump it with
// any change that makes the same inputs give other branches (a renderer's
// new field, another secret layout), so the first reconcile of the new build
// renders everything again instead of trusting the old build's record.
const FormatVersion = 1

// InputsFile is the file on branch meshgen/state that fingerprints every
// input of the last successful reconcile, beside [branch.StateFile].
const InputsFile = "inputs.json"

// inputs fingerprints everything a reconcile's result depends on. When the
// inputs observed now equal the ones recorded by the last successful
// reconcile, resolving and rendering again would give the same branches,
// which are still in place: the reconcile does nothing.
type inputs struct {
	// Build names the reconciler: FormatVersion, its module's version and
	// VCS revision, the Go version, and the executable's size and time.
	Build string `json:"build"`
	// Signer is the sha256 of the signing key's public key.
	Signer string `json:"signer"`
	// Main is the commit of main resolved.
	Main string `json:"main"`
	// Status is every status/<node> branch read (node → commit): hostd's
	// reports carry providers' answers and rotation confirmations.
	Status map[string]string `json:"status"`
	// Vault fingerprints vaultd as the secrets were sealed against it: its
	// generation ("generation EPOCH:COUNTER", raised by every record it
	// writes) or, from a vault without one, the sha256 of its whole status
	// (every secret's version, recipients and rotation).
	Vault string `json:"vault"`
	// Nodes is every node branch as the reconcile left it (node → commit):
	// a branch changed or deleted behind the reconciler's back is repaired.
	Nodes map[string]string `json:"nodes"`
	// State is the sha256 of state.json recorded beside.
	State string `json:"state"`
	// Waiting is what the resolution found waiting for a provider's
	// answer or an operator's secret, reported again by a reconcile that
	// does nothing (meshgen status reads the same from waiting.json).
	Waiting []reconciler.Waiting `json:"waiting,omitempty"`
}

// observed is what a reconcile reads before deciding anything.
type observed struct {
	main   string
	status map[string]string
	nodes  map[string]string // every node/<node> branch
	// vault is vaultd's status when it was read to fingerprint the vault
	// (a vault without a generation); nil when the generation was, or the
	// vault is not a Rotator.
	vault  *client.Status
	digest string  // the vault's fingerprint ([inputs].Vault); "" when none
	prev   *inputs // recorded by the last successful reconcile
	state  []byte  // state.json recorded
}

// generationer is a vault offering a cheap change token; *client.Client is
// one.
type generationer interface {
	Generation(ctx context.Context) (client.Generation, error)
}

// generationPrint is what the record of inputs holds for a vaultd offering a
// generation: "generation EPOCH:COUNTER". A vault without one is recorded by
// the sha256 of its whole status ([vaultDigestOf]), which never looks like
// this, so a record made one way is never taken for the other.
func generationPrint(g client.Generation) string { return "generation " + g.String() }

// observe reads the refs, the vault's fingerprint and the last record;
// vaultd is asked while the repository is read. Whatever a full reconcile
// then reads (main, the reports, vaultd's status) is as new as what observe
// saw or newer, so a record never claims inputs older than what was
// rendered.
//
// The fingerprint is vaultd's generation when it offers one: a token that
// changes with every record vaultd writes, a few bytes instead of the status
// of every secret. A maximum age passing writes nothing; the generation
// moves when vaultd's policy timer starts the due rotation (within its
// interval, a minute by default), and so does the next one-shot reconcile.
func (r *Reconciler) observe(ctx context.Context) (*observed, error) {
	o := &observed{status: map[string]string{}, nodes: map[string]string{}}
	vaultDone := make(chan error, 1)
	rot, isRot := r.opts.Vault.(Rotator)
	gen, isGen := r.opts.Vault.(generationer)
	switch {
	case !isRot:
		vaultDone <- nil
	case isGen:
		go func() {
			g, err := gen.Generation(ctx)
			if err != nil {
				vaultDone <- fmt.Errorf("vault generation: %w", err)
				return
			}
			o.digest = generationPrint(g)
			vaultDone <- nil
		}()
	default:
		go func() {
			var err error
			if o.vault, err = rot.Status(ctx); err != nil {
				vaultDone <- fmt.Errorf("vault status: %w", err)
				return
			}
			o.digest, err = vaultDigestOf(o.vault)
			vaultDone <- err
		}()
	}
	err := r.observeRepo(o)
	if verr := <-vaultDone; err == nil {
		err = verr
	}
	if err != nil {
		return nil, err
	}
	return o, nil
}

// vaultAfterSeals is the vault's fingerprint to record after a reconcile
// rendered against vaultd's status st and sealed asked: the one after the
// seals when they explain every change since st ([sealsExplain]), so the
// next reconcile need not run in full only to see its own seals; else ""
// (keep the one observed before, and the next reconcile runs in full).
//
// With a generation, the token is read before the status it is checked
// against, so it never stands for a state newer than the one checked; when
// the seals wrote nothing it equals the one observed and no status is read.
func (r *Reconciler) vaultAfterSeals(ctx context.Context, obs *observed, st *client.Status, asked map[string]askedSeal) string {
	rot, ok := r.opts.Vault.(Rotator)
	if !ok {
		return ""
	}
	var print string
	if gen, ok := r.opts.Vault.(generationer); ok {
		g, err := gen.Generation(ctx)
		if err != nil {
			return ""
		}
		if print = generationPrint(g); print == obs.digest {
			return print
		}
	}
	after, err := rot.Status(ctx)
	if err != nil || !sealsExplain(st, after, asked) {
		return ""
	}
	if print != "" {
		return print
	}
	d, err := vaultDigestOf(after)
	if err != nil {
		return ""
	}
	return d
}

// observeRepo reads every branch's tip and the record on meshgen/state.
func (r *Reconciler) observeRepo(o *observed) error {
	refs, err := branch.ListRefs(r.dir, "refs/heads/")
	if err != nil {
		return err
	}
	for name, h := range refs {
		if name == branch.MainRef {
			o.main = h.String()
		} else if n, ok := branch.NodeOfStatusRef(name); ok {
			o.status[n] = h.String()
		} else if n, ok := branch.NodeOfRef(name); ok {
			o.nodes[n] = h.String()
		}
	}
	files, err := branch.ReadStateFiles(r.dir)
	if err != nil {
		return err
	}
	o.state = files[branch.StateFile]
	if b, ok := files[InputsFile]; ok {
		var p inputs
		if err := json.Unmarshal(b, &p); err != nil {
			// A record this build cannot read is no record: reconcile in
			// full, which writes a new one.
			r.log.Warn("unreadable record of inputs: reconciling in full", "branch", branch.StateRef, "error", err.Error())
		} else {
			o.prev = &p
		}
	}
	return nil
}

// unchanged reports whether every input equals the recorded ones, so the
// branches the last reconcile left are what this one would write.
func (r *Reconciler) unchanged(o *observed) bool {
	p := o.prev
	if p == nil || o.digest == "" || r.signer == "" {
		return false
	}
	if p.Build != r.build || p.Signer != r.signer || p.Main != o.main || p.Vault != o.digest ||
		p.State != digest(o.state) || !maps.Equal(p.Status, o.status) || len(p.Nodes) == 0 {
		return false
	}
	for node, h := range p.Nodes {
		if o.nodes[node] != h {
			return false
		}
	}
	return true
}

// vaultDigestOf is the sha256 of vaultd's whole status, the fingerprint of
// a vault that offers no generation: any change of a
// secret's version, origin, kind, values' times, slots, recipients,
// rotatability or rotation changes it. It is written field by field, several
// times cheaper than JSON on a mesh of thousands of secrets;
// TestVaultDigestCoversStatus fails when vaultd's status gains a field this
// does not write.
func vaultDigestOf(st *client.Status) (string, error) {
	h := sha256.New()
	w := bufio.NewWriterSize(h, 64<<10)
	str := func(s string) {
		w.WriteString(strconv.Itoa(len(s)))
		w.WriteByte(':')
		w.WriteString(s)
	}
	num := func(n uint64) { str(strconv.FormatUint(n, 10)) }
	list := func(l []string) {
		num(uint64(len(l)))
		for _, s := range l {
			str(s)
		}
	}
	parties := func(l []client.Party) {
		num(uint64(len(l)))
		for _, p := range l {
			str(p.Recipient)
			str(string(p.Role))
		}
	}
	str(st.Recipient)
	num(uint64(len(st.Secrets)))
	for i := range st.Secrets {
		s := &st.Secrets[i]
		str(s.Name)
		str(string(s.Origin))
		num(s.Version)
		str(s.Kind)
		str(s.Made.UTC().Format(time.RFC3339Nano))
		num(uint64(len(s.Slots)))
		for _, sl := range s.Slots {
			str(string(sl.Slot))
			num(sl.Version)
			str(sl.State)
		}
		list(s.Appliers)
		list(s.Readers)
		str(s.NotRotatable)
		if ro := s.Rotation; ro == nil {
			str("")
		} else {
			str("rotation")
			str(ro.Name)
			str(ro.Kind)
			str(string(ro.Phase))
			num(ro.From)
			num(ro.To)
			str(strconv.FormatBool(ro.Abandoned))
			str(ro.Reason)
			str(ro.Started.UTC().Format(time.RFC3339Nano))
			parties(ro.WaitsOn)
			parties(ro.Confirmed)
		}
	}
	if err := w.Flush(); err != nil {
		return "", fmt.Errorf("vault status: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func digest(b []byte) string {
	if b == nil {
		return ""
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// buildID names this reconciler's build for the record of inputs: format,
// then what Go knows of the build, then the executable's size and time,
// which change with every new build even where the version control
// revision does not (a build from a modified tree).
func buildID(format int) string {
	parts := []string{fmt.Sprintf("format %d", format)}
	if bi, ok := debug.ReadBuildInfo(); ok {
		parts = append(parts, bi.GoVersion, bi.Main.Path+"@"+bi.Main.Version)
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" || s.Key == "vcs.modified" {
				parts = append(parts, s.Key+"="+s.Value)
			}
		}
	}
	if exe, err := os.Executable(); err == nil {
		if fi, err := os.Stat(exe); err == nil {
			parts = append(parts, fmt.Sprintf("exe %d %d", fi.Size(), fi.ModTime().UnixNano()))
		}
	}
	return strings.Join(parts, "; ")
}

// signerID names the signer for the record of inputs: what its SignerID
// method says when it has one (a signer that names its key without
// decrypting it, such as by its encrypted file), else the sha256 of its
// public key, or "" when it can say neither (then no reconcile is ever
// skipped).
func signerID(s branch.Signer) string {
	if n, ok := s.(interface{ SignerID() string }); ok {
		return n.SignerID()
	}
	pk, ok := s.(interface{ PublicKey() ([]byte, error) })
	if !ok {
		return ""
	}
	b, err := pk.PublicKey()
	if err != nil || len(b) == 0 {
		return ""
	}
	return digest(b)
}

// sortedKeys returns m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// sealsExplain reports whether every difference between vaultd's status
// before the seals and after them is what the seals did: each secret sealed
// shows the version, slots, rotation and recipients vaultd answered with,
// its version and rotation are as before (or it was made, with no rotation),
// and every other secret is as it was. Then the status after the seals is
// the one the branches hold and may be recorded; otherwise (an operator
// rotated or delivered a value meanwhile) the status before is, and the next
// reconcile runs in full.
func sealsExplain(before, after *client.Status, asked map[string]askedSeal) bool {
	if before == nil || after == nil || before.Recipient != after.Recipient {
		return false
	}
	was := make(map[string]*client.SecretStatus, len(before.Secrets))
	for i := range before.Secrets {
		was[before.Secrets[i].Name] = &before.Secrets[i]
	}
	seen := 0
	for i := range after.Secrets {
		s := &after.Secrets[i]
		if a, ok := asked[s.Name]; ok {
			seen++
			if s.Version != a.resp.Version || s.Origin != a.resp.Origin || !sameJSON(s.Slots, a.resp.Slots) ||
				!sameJSON(s.Rotation, a.resp.Rotation) || !sameSet(s.Appliers, a.req.Appliers) || !sameSet(s.Readers, a.req.Recipients) {
				return false
			}
			// A seal makes a secret and records its recipients; a value or
			// a rotation that moved since the status before (another
			// reconciler's confirmation, a maximum age) may call for a
			// confirmation the reports already allow: not explained.
			if w, ok := was[s.Name]; ok && (w.Version != s.Version || !sameJSON(w.Rotation, s.Rotation)) || !ok && s.Rotation != nil {
				return false
			}
			continue
		}
		if w, ok := was[s.Name]; !ok || !sameJSON(w, s) {
			return false
		}
	}
	if seen != len(asked) {
		return false // a secret sealed is gone
	}
	for name := range was {
		if _, ok := asked[name]; !ok && !slices.ContainsFunc(after.Secrets, func(s client.SecretStatus) bool { return s.Name == name }) {
			return false // a secret vanished
		}
	}
	return true
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
