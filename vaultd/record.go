package vaultd

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/meshgen/meshgen/vaultd/internal/rotation"
)

// record is one secret as the store holds it, encrypted at rest.
type record struct {
	Name   string        `json:"name"`
	Origin client.Origin `json:"origin"`
	Spec   client.Spec   `json:"spec"`
	// Last is the last version issued; versions only rise.
	Last uint64 `json:"last"`
	// Values holds every live version's value, keyed by version.
	Values map[uint64]*value `json:"values"`
	Rot    rotation.State    `json:"rotation"`
	// Appliers and Readers are the recipients of the latest seal.
	Appliers []string `json:"appliers,omitempty"`
	Readers  []string `json:"readers,omitempty"`
	// Sealed caches ciphertext by cacheKey, so the same version sealed to
	// the same recipient is the same bytes every time, restarts included.
	Sealed map[string][]byte `json:"sealed,omitempty"`
}

// value is one version's value and its derived form.
type value struct {
	Value         []byte    `json:"value"`
	Derived       string    `json:"derived,omitempty"`
	DerivedFormat string    `json:"derivedFormat,omitempty"`
	Made          time.Time `json:"made"`
}

func cacheKey(recipient string, version uint64, item client.Item) string {
	return recipient + "|" + strconv.FormatUint(version, 10) + "|" + string(item)
}

// clone deep-copies r so a change is made on the copy and swapped in only
// once it is on disk.
func (r *record) clone() *record {
	c := *r
	c.Values = make(map[uint64]*value, len(r.Values))
	for k, v := range r.Values {
		vv := *v
		c.Values[k] = &vv
	}
	c.Appliers = slices.Clone(r.Appliers)
	c.Readers = slices.Clone(r.Readers)
	c.Sealed = maps.Clone(r.Sealed)
	if c.Sealed == nil {
		c.Sealed = map[string][]byte{}
	}
	c.Rot = r.Rot.Clone()
	return &c
}

// prune drops values and ciphertexts of versions the rotation no longer
// refers to.
func (r *record) prune() {
	live := r.Rot.Live() // one to three versions
	isLive := func(v uint64) bool {
		return slices.ContainsFunc(live, func(l rotation.Live) bool { return l.Version == v })
	}
	for v := range r.Values {
		if !isLive(v) {
			delete(r.Values, v)
		}
	}
	for k := range r.Sealed {
		if !isLive(versionOf(k)) {
			delete(r.Sealed, k)
		}
	}
}

func versionOf(key string) uint64 {
	// recipient|version|item; a recipient holds no '|' (validRecipient).
	_, rest, ok := strings.Cut(key, "|")
	version, _, ok2 := strings.Cut(rest, "|")
	if !ok || !ok2 {
		return 0
	}
	v, _ := strconv.ParseUint(version, 10, 64)
	return v
}
