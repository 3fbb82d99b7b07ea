// Package x25519 seals to age X25519 recipients ("age1...") with half the
// curve work of age's own [age.X25519Recipient], and the same result: a
// standard age "X25519" stanza any age implementation opens with the
// recipient's identity.
//
// age's Wrap makes its ephemeral key with curve25519.X25519(e, Basepoint)
// and the shared secret with curve25519.X25519(e, theirs); through
// crypto/ecdh each of those calls computes e's public key again before its
// own scalar multiplication, so one wrap costs four Montgomery ladders. Here
// the ephemeral key is made once with crypto/ecdh (one ladder, its public
// key) and the shared secret is its ECDH with the recipient (one ladder).
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
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"filippo.io/age"
	"golang.org/x/crypto/chacha20poly1305"
)

// label is age's HKDF info string for X25519 stanzas.
const label = "age-encryption.org/v1/X25519"

// Recipient is an age X25519 recipient. It is an [age.Recipient].
type Recipient struct {
	their *ecdh.PublicKey
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
	pub, err := ecdh.X25519().NewPublicKey(key)
	if err != nil {
		return nil, fmt.Errorf("malformed recipient: %w", err)
	}
	return &Recipient{their: pub}, nil
}

// Wrap wraps fileKey to the recipient in one "X25519" stanza, as
// [age.X25519Recipient] does.
func (r *Recipient) Wrap(fileKey []byte) ([]*age.Stanza, error) {
	ephemeral, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	// ECDH refuses a low-order recipient (an all-zero shared secret), as
	// age does.
	shared, err := ephemeral.ECDH(r.their)
	if err != nil {
		return nil, err
	}
	ours := ephemeral.PublicKey().Bytes()
	salt := make([]byte, 0, 64)
	salt = append(append(salt, ours...), r.their.Bytes()...)
	wrapping, err := hkdf.Key(sha256.New, shared, salt, label, chacha20poly1305.KeySize)
	if err != nil {
		return nil, err
	}
	aead, err := chacha20poly1305.New(wrapping)
	if err != nil {
		return nil, err
	}
	body := aead.Seal(nil, make([]byte, chacha20poly1305.NonceSize), fileKey, nil)
	return []*age.Stanza{{Type: "X25519", Args: []string{base64.RawStdEncoding.EncodeToString(ours)}, Body: body}}, nil
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
