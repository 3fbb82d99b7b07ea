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
	live := map[uint64]bool{}
	for _, l := range r.Rot.Live() {
		live[l.Version] = true
	}
	for v := range r.Values {
		if !live[v] {
			delete(r.Values, v)
		}
	}
	for k := range r.Sealed {
		if !live[versionOf(k)] {
			delete(r.Sealed, k)
		}
	}
}

func versionOf(key string) uint64 {
	// recipient|version|item; a recipient holds no '|' (validRecipient).
	parts := strings.SplitN(key, "|", 3)
	if len(parts) != 3 {
		return 0
	}
	v, _ := strconv.ParseUint(parts[1], 10, 64)
	return v
}
