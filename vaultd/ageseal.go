package vaultd

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"sync"

	"filippo.io/age"
	"golang.org/x/crypto/chacha20poly1305"
)

// seal encrypts plain to r in age's v1 format: the bytes age.Encrypt
// writes, given the same randomness (the tests check both byte for byte
// under a seeded crypto/rand), with the same reads of crypto/rand in the
// same order: the file key, r's own (its Wrap), the payload nonce.
//
// It exists for speed: vaultd seals every secret to every node that
// needs it, and age.Encrypt, a streaming writer for files of any size,
// spends as much again as the sealing itself on allocations (a new HMAC,
// HKDF, base64 encoder and chunk buffer per file) that a value of a few
// bytes, written in one piece, does not need. The format is age's
// specification (age-encryption.org/v1):
//
//	header   "age-encryption.org/v1\n", each stanza ("-> type args\n",
//	         its body in base64 without padding, 64 columns a line, the
//	         last line shorter, possibly empty), "---", " ", the header
//	         MAC in base64 and "\n"; the MAC is HMAC-SHA-256 under
//	         HKDF-SHA-256(file key, no salt, "header") of the header up to
//	         and including "---"
//	payload  a 16-byte nonce, then the value in chunks of 64 KiB sealed
//	         with ChaCha20-Poly1305 under HKDF-SHA-256(file key, nonce,
//	         "payload"), the nonce of chunk i being i (11 bytes, big
//	         endian) and a last-chunk flag byte; an empty value is one
//	         empty last chunk
func seal(r age.Recipient, plain []byte) ([]byte, error) {
	// The file key and the chunk counter go to interfaces (Wrap, the
	// AEAD), so they would be allocated on the heap each time: they come
	// from a pool, and the file key is cleared before it goes back.
	sc := sealScratchPool.Get().(*sealScratch)
	defer func() {
		*sc = sealScratch{}
		sealScratchPool.Put(sc)
	}()
	fileKey, counter := &sc.fileKey, &sc.counter
	rand.Read(fileKey[:])
	stanzas, err := r.Wrap(fileKey[:])
	if err != nil {
		return nil, err
	}
	if len(stanzas) == 0 {
		return nil, fmt.Errorf("age: the recipient made no stanza")
	}

	chunks := max(1, (len(plain)+payloadChunk-1)/payloadChunk)
	size := len(ageIntro) + len(" ---\n") + b64.EncodedLen(sha256.Size) + payloadNonceSize + len(plain) + chunks*chacha20poly1305.Overhead
	for _, s := range stanzas {
		size += len("-> \n\n") + len(s.Type) + b64.EncodedLen(len(s.Body)) + len(s.Body)/bodyBytesPerLine
		for _, a := range s.Args {
			size += 1 + len(a)
		}
	}
	b := make([]byte, 0, size)

	b = append(b, ageIntro...)
	for _, s := range stanzas {
		if !validStanzaString(s.Type) {
			return nil, fmt.Errorf("age: a stanza type is not printable ASCII")
		}
		b = append(append(b, "-> "...), s.Type...)
		for _, a := range s.Args {
			if !validStanzaString(a) {
				return nil, fmt.Errorf("age: a stanza argument is not printable ASCII")
			}
			b = append(append(b, ' '), a...)
		}
		b = append(b, '\n')
		body := s.Body
		for len(body) >= bodyBytesPerLine {
			b = append(b64.AppendEncode(b, body[:bodyBytesPerLine]), '\n')
			body = body[bodyBytesPerLine:]
		}
		b = append(b64.AppendEncode(b, body), '\n')
	}
	b = append(b, "---"...)
	macKey := hkdfSHA256(fileKey[:], nil, "header")
	mac := hmacSHA256(macKey[:], b)
	b = append(b64.AppendEncode(append(b, ' '), mac[:]), '\n')

	nonce := b[len(b) : len(b)+payloadNonceSize]
	rand.Read(nonce)
	b = b[:len(b)+payloadNonceSize]
	key := hkdfSHA256(fileKey[:], nonce, "payload")
	aead, err := chacha20poly1305.New(key[:])
	if err != nil {
		return nil, err
	}
	for {
		chunk := plain[:min(len(plain), payloadChunk)]
		plain = plain[len(chunk):]
		last := len(plain) == 0
		if last {
			counter[len(counter)-1] = 1
		}
		b = aead.Seal(b, counter[:], chunk, nil)
		if last {
			return b, nil
		}
		// The chunk index, big endian in the first 11 bytes.
		for j := len(counter) - 2; j >= 0; j-- {
			if counter[j]++; counter[j] != 0 {
				break
			}
		}
	}
}

// sealScratch is what one seal hands to interfaces.
type sealScratch struct {
	fileKey [fileKeySize]byte
	counter [chacha20poly1305.NonceSize]byte
}

var sealScratchPool = sync.Pool{New: func() any { return new(sealScratch) }}

// age's format constants (age-encryption.org/v1).
const (
	ageIntro         = "age-encryption.org/v1\n"
	fileKeySize      = 16
	payloadNonceSize = 16
	payloadChunk     = 64 << 10
	// A stanza body line is 64 base64 columns: 48 bytes.
	bodyBytesPerLine = 48
)

var b64 = base64.RawStdEncoding

// validStanzaString reports whether s may be a stanza's type or argument:
// one or more of the printable ASCII characters other than space.
func validStanzaString(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < 33 || s[i] > 126 {
			return false
		}
	}
	return true
}

// hmacSHA256 is HMAC-SHA-256 (RFC 2104) of msg under key. It hashes on the stack what crypto/hmac allocates a state for
// (two hashes, their pads): a seal computes four of them for a few hundred
// bytes, and crypto/hmac's allocations cost more than the hashing.
func hmacSHA256(key, msg []byte) [sha256.Size]byte {
	var k [sha256.BlockSize]byte
	if len(key) > sha256.BlockSize {
		sum := sha256.Sum256(key)
		copy(k[:], sum[:])
	} else {
		copy(k[:], key)
	}
	// The inner hash's input: (key ^ ipad) || msg. 512 bytes
	// hold a seal's header; a larger message moves to the heap.
	var scratch [sha256.BlockSize + 512]byte
	in := scratch[:sha256.BlockSize]
	for i := range k {
		in[i] = k[i] ^ 0x36
	}
	in = append(in, msg...)
	inner := sha256.Sum256(in)
	var out [sha256.BlockSize + sha256.Size]byte
	for i := range k {
		out[i] = k[i] ^ 0x5c
	}
	copy(out[sha256.BlockSize:], inner[:])
	return sha256.Sum256(out[:])
}

// hkdfSHA256 is HKDF-SHA-256 (RFC 5869) of secret with salt and info,
// 32 bytes long: one HMAC to extract, one to expand.
func hkdfSHA256(secret, salt []byte, info string) [sha256.Size]byte {
	prk := hmacSHA256(salt, secret)
	var in [64]byte
	t := append(append(in[:0], info...), 1)
	return hmacSHA256(prk[:], t)
}
