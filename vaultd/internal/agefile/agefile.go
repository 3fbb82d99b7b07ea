// Package agefile writes age files (age-encryption.org/v1) to one age
// recipient: the bytes age.Encrypt writes, given the same randomness, with
// the same reads of crypto/rand in the same order (the file key, the
// recipient's own in its Wrap, the payload nonce). The tests check both
// byte for byte under a seeded crypto/rand, and that age decrypts them.
//
// It exists for speed. vaultd seals every secret to every node that needs
// it ([Seal]), and writes its records as large files ([NewWriter]);
// age.Encrypt, a streaming writer for files of any size, spends on a value
// of a few bytes as much again as the sealing itself on allocations (base64
// encoders, a 64 KiB chunk buffer, the header's pieces), and on a large
// file copies its chunk buffer as it grows. The primitives are the
// standard library's and x/crypto's (HKDF, HMAC, ChaCha20-Poly1305); only
// the layout is written here. The format, from age's specification:
//
//	header   "age-encryption.org/v1\n", each stanza ("-> type args\n",
//	         its body in base64 without padding, 64 columns a line, the
//	         last line shorter, possibly empty), "---", " ", the header
//	         MAC in base64 and "\n"; the MAC is HMAC-SHA-256 under
//	         HKDF-SHA-256(file key, no salt, "header") of the header up to
//	         and including "---"
//	payload  a 16-byte nonce, then the plaintext in chunks of 64 KiB
//	         sealed with ChaCha20-Poly1305 under HKDF-SHA-256(file key,
//	         nonce, "payload"), the nonce of chunk i being i (11 bytes, big
//	         endian) and a last-chunk flag byte; only the last chunk may be
//	         shorter than 64 KiB, and it is empty only when the plaintext
//	         is
package agefile

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"slices"

	"filippo.io/age"
	"golang.org/x/crypto/chacha20poly1305"
)

// age's format constants.
const (
	intro            = "age-encryption.org/v1\n"
	fileKeySize      = 16
	payloadNonceSize = 16
	// ChunkSize is the plaintext of a payload chunk but the last.
	ChunkSize = 64 << 10
	// A stanza body line is 64 base64 columns: 48 bytes.
	bodyBytesPerLine = 48
)

var b64 = base64.RawStdEncoding

// Seal encrypts plain to r, in one buffer sized up front.
func Seal(r age.Recipient, plain []byte) ([]byte, error) {
	// The file key and the chunk counter go to interfaces (Wrap, the
	// AEAD), so they are on the heap: in one allocation.
	sc := new(scratch)
	defer clear(sc.fileKey[:])
	rand.Read(sc.fileKey[:])
	stanzas, err := r.Wrap(sc.fileKey[:])
	if err != nil {
		return nil, err
	}
	chunks := max(1, (len(plain)+ChunkSize-1)/ChunkSize)
	b := make([]byte, 0, headerSize(stanzas)+payloadNonceSize+len(plain)+chunks*chacha20poly1305.Overhead)
	if b, err = appendHeader(b, sc.fileKey[:], stanzas); err != nil {
		return nil, err
	}
	nonce := b[len(b) : len(b)+payloadNonceSize]
	rand.Read(nonce)
	b = b[:len(b)+payloadNonceSize]
	aead, err := payloadAEAD(sc.fileKey[:], nonce)
	if err != nil {
		return nil, err
	}
	for {
		chunk := plain[:min(len(plain), ChunkSize)]
		plain = plain[len(chunk):]
		last := len(plain) == 0
		b = sealChunk(b, aead, &sc.counter, chunk, last)
		if last {
			return b, nil
		}
	}
}

// scratch is what one Seal hands to interfaces.
type scratch struct {
	fileKey [fileKeySize]byte
	counter [chacha20poly1305.NonceSize]byte
}

// Writer encrypts what is written to it into an age file; [NewWriter]
// makes one.
type Writer struct {
	dst  io.Writer
	aead cipher.AEAD
	// buf holds the chunk being filled, with room for its tag.
	buf     []byte
	counter [chacha20poly1305.NonceSize]byte
	err     error
}

// NewWriter writes the header of an age file to r and the payload's nonce
// to dst, and returns the Writer of its payload: what is written to it is
// sealed in chunks of [ChunkSize], each written to dst in one Write once
// it is full and more follows. Close writes the last chunk; it does not
// close dst. size is about how much will be written (more or less may
// be): the chunk buffer is sized for it, and grows if it must.
func NewWriter(dst io.Writer, r age.Recipient, size int) (*Writer, error) {
	var fileKey [fileKeySize]byte
	defer clear(fileKey[:])
	rand.Read(fileKey[:])
	stanzas, err := r.Wrap(fileKey[:])
	if err != nil {
		return nil, err
	}
	hdr, err := appendHeader(make([]byte, 0, headerSize(stanzas)+payloadNonceSize), fileKey[:], stanzas)
	if err != nil {
		return nil, err
	}
	nonce := hdr[len(hdr) : len(hdr)+payloadNonceSize]
	rand.Read(nonce)
	hdr = hdr[:len(hdr)+payloadNonceSize]
	aead, err := payloadAEAD(fileKey[:], nonce)
	if err != nil {
		return nil, err
	}
	if _, err := dst.Write(hdr); err != nil {
		return nil, err
	}
	return &Writer{dst: dst, aead: aead, buf: make([]byte, 0, min(max(size, 0), ChunkSize)+chacha20poly1305.Overhead)}, nil
}

// Write seals p into the payload.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	total := len(p)
	for len(p) > 0 {
		if len(w.buf) == ChunkSize {
			// More follows a full chunk: it is not the last.
			if w.err = w.flush(false); w.err != nil {
				return 0, w.err
			}
		}
		n := min(len(p), ChunkSize-len(w.buf))
		// Room for the chunk and its tag, sealed in place.
		if need := len(w.buf) + n + chacha20poly1305.Overhead; need > cap(w.buf) {
			w.buf = slices.Grow(w.buf, min(max(need, 2*cap(w.buf)), ChunkSize+chacha20poly1305.Overhead)-len(w.buf))
		}
		w.buf = append(w.buf, p[:n]...)
		p = p[n:]
	}
	return total, nil
}

// Close seals and writes the last chunk.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.err = w.flush(true); w.err != nil {
		return w.err
	}
	w.err = errors.New("agefile: the writer is closed")
	return nil
}

func (w *Writer) flush(last bool) error {
	ct := sealChunk(w.buf[:0], w.aead, &w.counter, w.buf, last)
	_, err := w.dst.Write(ct)
	w.buf = w.buf[:0]
	return err
}

// sealChunk appends chunk sealed under counter, which it then advances;
// the last chunk carries the flag. dst may be chunk[:0].
func sealChunk(dst []byte, aead cipher.AEAD, counter *[chacha20poly1305.NonceSize]byte, chunk []byte, last bool) []byte {
	if last {
		counter[len(counter)-1] = 1
	}
	dst = aead.Seal(dst, counter[:], chunk, nil)
	// The chunk index, big endian in the first 11 bytes.
	for j := len(counter) - 2; j >= 0; j-- {
		if counter[j]++; counter[j] != 0 {
			break
		}
	}
	return dst
}

// headerSize is the length of the header of stanzas.
func headerSize(stanzas []*age.Stanza) int {
	n := len(intro) + len(" ---\n") + b64.EncodedLen(sha256.Size)
	for _, s := range stanzas {
		n += len("-> \n\n") + len(s.Type) + b64.EncodedLen(len(s.Body)) + len(s.Body)/bodyBytesPerLine
		for _, a := range s.Args {
			n += 1 + len(a)
		}
	}
	return n
}

// appendHeader appends the header of stanzas, with its MAC under fileKey.
func appendHeader(b, fileKey []byte, stanzas []*age.Stanza) ([]byte, error) {
	if len(stanzas) == 0 {
		return nil, errors.New("age: the recipient made no stanza")
	}
	start := len(b)
	b = append(b, intro...)
	for _, s := range stanzas {
		if !validStanzaString(s.Type) {
			return nil, errors.New("age: a stanza type is not printable ASCII")
		}
		b = append(append(b, "-> "...), s.Type...)
		for _, a := range s.Args {
			if !validStanzaString(a) {
				return nil, errors.New("age: a stanza argument is not printable ASCII")
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
	macKey, err := hkdf.Key(sha256.New, fileKey, nil, "header", sha256.Size)
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, macKey)
	mac.Write(b[start:])
	return append(b64.AppendEncode(append(b, ' '), mac.Sum(nil)), '\n'), nil
}

// payloadAEAD is the payload's cipher.
func payloadAEAD(fileKey, nonce []byte) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, fileKey, nonce, "payload", chacha20poly1305.KeySize)
	if err != nil {
		return nil, err
	}
	return chacha20poly1305.New(key)
}

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
