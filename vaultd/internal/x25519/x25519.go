// Package x25519 seals to age X25519 recipients ("age1...") with less than
// half the curve work of age's own [age.X25519Recipient], and the same
// result: a standard age "X25519" stanza any age implementation opens with
// the recipient's identity.
//
// age's Wrap makes its ephemeral key with curve25519.X25519(e, Basepoint)
// and the shared secret with curve25519.X25519(e, theirs); through
// crypto/ecdh each of those calls computes e's public key again before its
// own scalar multiplication, so one wrap costs four Montgomery ladders.
// Here the ephemeral public key is e times the base point, computed on the
// birationally equivalent Edwards curve with filippo.io/edwards25519's
// precomputed tables (about a third of a ladder) and read back as its
// Montgomery u-coordinate. The shared secret is, for a recipient's first
// wrap, one ladder, the standard library's RFC 7748 ladder over the same
// field arithmetic.
//
// A recipient wrapped to again gets its own precomputed table (comb.go):
// its point on the Edwards curve P and the multiples j·2^(16t)·P,
// j = 1..8, t = 0..15, as 128 affine points, 15,360 bytes held as long as
// the *Recipient is. The second Wrap builds it, in about one and a half
// ladders' time; from then on the shared secret is 64 table additions and
// 12 doublings, less than half a ladder. A recipient used once never pays
// for a table, and a key with no point on the Edwards curve (on the
// twist: age takes any 32 bytes) never gets one and keeps the ladder.
// Everything that touches the ephemeral scalar is constant time, and the
// tests check every path against curve25519.X25519.
//
// The rest is age's X25519 stanza as the age specification and age's code
// write it: salt = ephemeral public key || recipient public key, wrapping
// key = HKDF-SHA-256(shared secret, salt, "age-encryption.org/v1/X25519"),
// body = ChaCha20-Poly1305(wrapping key, zero nonce, file key), which is
// safe because every wrapping key is used once (it depends on a fresh
// ephemeral key).
//
// vaultd seals every secret to every node that needs it; on a first
// reconcile this is most of vaultd's CPU.
package x25519

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"filippo.io/age"
	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
	"golang.org/x/crypto/chacha20poly1305"
)

// label is age's HKDF info string for X25519 stanzas.
const label = "age-encryption.org/v1/X25519"

// Recipient is an age X25519 recipient. It is an [age.Recipient], safe
// for concurrent use by many goroutines; keep one per key and wrap to it
// again, as a cache of parsed recipients does, for the table's speed.
type Recipient struct {
	their [32]byte
	// wraps counts the Wraps made by the ladder; the second builds comb.
	wraps atomic.Uint64
	// comb is the recipient's table, once built; nil before, and always
	// for a key with no point on the Edwards curve.
	comb atomic.Pointer[combTable]
}

var _ age.Recipient = (*Recipient)(nil)

// Parse reads an age X25519 recipient, "age1" and 58 bech32 characters.
// What age.ParseX25519Recipient refuses, Parse refuses.
func Parse(s string) (*Recipient, error) {
	if _, err := age.ParseX25519Recipient(s); err != nil {
		return nil, err
	}
	hrp, key, err := decodeBech32(s)
	if err != nil {
		return nil, fmt.Errorf("malformed recipient: %w", err)
	}
	if hrp != "age" {
		return nil, errors.New("malformed recipient: not an X25519 recipient")
	}
	r := &Recipient{}
	if len(key) != len(r.their) {
		return nil, errors.New("malformed recipient: not 32 bytes")
	}
	copy(r.their[:], key)
	return r, nil
}

// Wrap wraps fileKey to the recipient in one "X25519" stanza, as
// [age.X25519Recipient] does.
func (r *Recipient) Wrap(fileKey []byte) ([]*age.Stanza, error) {
	var e [32]byte
	if _, err := rand.Read(e[:]); err != nil {
		return nil, err
	}
	ours, err := basepointMult(&e)
	if err != nil {
		return nil, err
	}
	shared := r.sharedSecret(&e)
	// Refuse a low-order recipient (an all-zero shared secret), as age
	// does.
	if shared == [32]byte{} {
		return nil, errors.New("x25519: recipient is a low-order point; it is not an age X25519 public key")
	}
	salt := make([]byte, 0, 64)
	salt = append(append(salt, ours[:]...), r.their[:]...)
	wrapping, err := hkdf.Key(sha256.New, shared[:], salt, label, chacha20poly1305.KeySize)
	if err != nil {
		return nil, err
	}
	aead, err := chacha20poly1305.New(wrapping)
	if err != nil {
		return nil, err
	}
	body := aead.Seal(nil, make([]byte, chacha20poly1305.NonceSize), fileKey, nil)
	return []*age.Stanza{{Type: "X25519", Args: []string{base64.RawStdEncoding.EncodeToString(ours[:])}, Body: body}}, nil
}

// sharedSecret returns X25519(e, their): by the recipient's table when it
// has one, else by the ladder. The second call builds the table (only
// that call: the others go on with the ladder meanwhile, and nothing
// waits), so a recipient used once never pays for one.
func (r *Recipient) sharedSecret(e *[32]byte) [32]byte {
	if c := r.comb.Load(); c != nil {
		return c.mult(e)
	}
	if r.wraps.Add(1) == 2 {
		if c := newCombTable(&r.their); c != nil {
			r.comb.Store(c)
			return c.mult(e)
		}
	}
	return scalarMult(e, &r.their)
}

// basepointMult returns X25519(e, 9): the u-coordinate of the clamped
// scalar e times the base point. Clamping keeps bit 254 and clears the
// three low bits; reducing the clamped scalar modulo the group order, as
// edwards25519.Scalar does, changes nothing for the base point, whose
// order is the group order. The Edwards base point maps to u = 9.
func basepointMult(e *[32]byte) ([32]byte, error) {
	var u [32]byte
	s, err := edwards25519.NewScalar().SetBytesWithClamping(e[:])
	if err != nil {
		return u, err
	}
	copy(u[:], new(edwards25519.Point).ScalarBaseMult(s).BytesMontgomery())
	return u, nil
}

// scalarMult returns X25519(e, point) by the Montgomery ladder of RFC 7748,
// section 5, as crypto/ecdh computes it (The Go Authors, BSD licence),
// without crypto/ecdh's computing e's public key first.
func scalarMult(e, point *[32]byte) [32]byte {
	k := *e
	k[0] &= 248
	k[31] &= 127
	k[31] |= 64

	var x1, x2, z2, x3, z3, tmp0, tmp1 field.Element
	if _, err := x1.SetBytes(point[:]); err != nil {
		panic(err) // unreachable: point is 32 bytes
	}
	x2.One()
	x3.Set(&x1)
	z3.One()

	swap := 0
	for pos := 254; pos >= 0; pos-- {
		b := int(k[pos/8]>>uint(pos&7)) & 1
		swap ^= b
		x2.Swap(&x3, swap)
		z2.Swap(&z3, swap)
		swap = b

		tmp0.Subtract(&x3, &z3)
		tmp1.Subtract(&x2, &z2)
		x2.Add(&x2, &z2)
		z2.Add(&x3, &z3)
		z3.Multiply(&tmp0, &x2)
		z2.Multiply(&z2, &tmp1)
		tmp0.Square(&tmp1)
		tmp1.Square(&x2)
		x3.Add(&z3, &z2)
		z2.Subtract(&z3, &z2)
		x2.Multiply(&tmp1, &tmp0)
		tmp1.Subtract(&tmp1, &tmp0)
		z2.Square(&z2)

		z3.Mult32(&tmp1, 121666)
		x3.Square(&x3)
		tmp0.Add(&tmp0, &z3)
		z3.Multiply(&x1, &z2)
		z2.Multiply(&tmp1, &tmp0)
	}
	x2.Swap(&x3, swap)
	z2.Swap(&z3, swap)

	z2.Invert(&z2)
	x2.Multiply(&x2, &z2)
	var out [32]byte
	copy(out[:], x2.Bytes())
	return out
}

// bech32 (BIP 173), decoding only, after age's internal/bech32 (Takatoshi
// Nakagawa and the age Authors, MIT licence).
const charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

var generator = [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}

func polymod(values []byte) uint32 {
	chk := uint32(1)
	for _, v := range values {
		top := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := range 5 {
			if top>>i&1 == 1 {
				chk ^= generator[i]
			}
		}
	}
	return chk
}

// decodeBech32 decodes a lower-case bech32 string into its human-readable
// part and its bytes, checking the checksum and the padding.
func decodeBech32(s string) (string, []byte, error) {
	if strings.ToLower(s) != s {
		return "", nil, errors.New("not lower case")
	}
	pos := strings.LastIndexByte(s, '1')
	if pos < 1 || pos+7 > len(s) {
		return "", nil, errors.New("no separator")
	}
	hrp := s[:pos]
	values := make([]byte, 0, 2*len(hrp)+1+len(s)-pos-1)
	for i := 0; i < len(hrp); i++ {
		values = append(values, hrp[i]>>5)
	}
	values = append(values, 0)
	for i := 0; i < len(hrp); i++ {
		values = append(values, hrp[i]&31)
	}
	start := len(values)
	for i := pos + 1; i < len(s); i++ {
		d := strings.IndexByte(charset, s[i])
		if d < 0 {
			return "", nil, errors.New("invalid character")
		}
		values = append(values, byte(d))
	}
	if polymod(values) != 1 {
		return "", nil, errors.New("invalid checksum")
	}
	data := values[start : len(values)-6]
	// 5-bit groups to bytes, without padding.
	var out []byte
	acc, bits := uint32(0), uint(0)
	for _, v := range data {
		acc = acc<<5 | uint32(v)
		bits += 5
		for bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
		}
	}
	if bits >= 5 || byte(acc<<(8-bits)) != 0 {
		return "", nil, errors.New("invalid padding")
	}
	return hrp, out, nil
}
