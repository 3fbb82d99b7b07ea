// Package sign makes and uses the reconciler's signing key, in cosign's
// formats, so that a node's declaration.json.sig is exactly what `cosign
// sign-blob --key` makes and `cosign verify-blob --key keys/reconciler.pub
// --insecure-ignore-tlog` accepts (DESIGN.md, issue 6).
//
// The private key is encrypted at rest ("ENCRYPTED SIGSTORE PRIVATE KEY",
// scrypt and secretbox, as cosign writes it); its password comes from the
// COSIGN_PASSWORD environment variable, as cosign reads it, or from a file
// ([ReadPassword]). Make a pair with [GenerateKeyPair], load the private half
// with [LoadSigner] and sign with [Signer.Sign]; check a signature with
// [Verify].
//
// A signature is the base64 of an ASN.1 ECDSA signature over sha256 of the
// blob. ECDSA signatures are randomised: signing the same bytes twice gives
// two different, equally valid signatures, so callers decide whether content
// changed before they sign.
package sign

import (
	"bytes"
	"crypto"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// PasswordEnv is the environment variable cosign reads a key's password
// from; meshgen reads the same one.
const PasswordEnv = "COSIGN_PASSWORD"

// KeyPair is a freshly made signing key pair, both halves PEM-encoded.
type KeyPair struct {
	// Private is the encrypted private key ("ENCRYPTED SIGSTORE PRIVATE KEY").
	Private []byte
	// Public is the public key ("PUBLIC KEY"), committed as keys/reconciler.pub.
	Public []byte
}

// GenerateKeyPair makes an ECDSA P-256 key pair in cosign's format, the
// private half encrypted with password. An empty password is refused: a key
// at rest must be encrypted with something.
func GenerateKeyPair(password []byte) (*KeyPair, error) {
	if len(password) == 0 {
		return nil, errors.New("generate signing key: the password is empty: set " + PasswordEnv + " or give a password file")
	}
	kb, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		return nil, fmt.Errorf("generate signing key: %w", err)
	}
	return &KeyPair{Private: kb.PrivateBytes, Public: kb.PublicBytes}, nil
}

// PasswordSource says where a signing key's password comes from.
type PasswordSource struct {
	// File, when set, is read and its one line (without the final newline)
	// is the password.
	File string
	// Getenv looks up PasswordEnv when File is empty; nil means os.LookupEnv.
	Getenv func(string) (string, bool)
}

// ReadPassword returns the password src names. It refuses an unset variable
// and an empty password, naming where it looked.
func ReadPassword(src PasswordSource) ([]byte, error) {
	if src.File != "" {
		b, err := os.ReadFile(src.File)
		if err != nil {
			return nil, fmt.Errorf("read signing key password file: %w", err)
		}
		pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if pw == "" {
			return nil, fmt.Errorf("signing key password file %s is empty: write the key's password in it", src.File)
		}
		return []byte(pw), nil
	}
	get := src.Getenv
	if get == nil {
		get = os.LookupEnv
	}
	pw, ok := get(PasswordEnv)
	if !ok || pw == "" {
		return nil, fmt.Errorf("signing key password: %s is not set: export it or give a password file", PasswordEnv)
	}
	return []byte(pw), nil
}

// Signer signs blobs with one loaded private key.
type Signer struct {
	sv signature.SignerVerifier
}

// LoadSigner decrypts an encrypted cosign private key with password. A wrong
// password is an error saying so; the password never appears in it.
func LoadSigner(privatePEM, password []byte) (*Signer, error) {
	sv, err := cosign.LoadPrivateKey(privatePEM, password, nil)
	if err != nil {
		if strings.Contains(err.Error(), "decrypt") {
			return nil, fmt.Errorf("load signing key: cannot decrypt it: check the password (%s or the password file)", PasswordEnv)
		}
		return nil, fmt.Errorf("load signing key: %w", err)
	}
	return &Signer{sv: sv}, nil
}

// LoadSignerFile reads and decrypts the private key at path.
func LoadSignerFile(path string, password []byte) (*Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	s, err := LoadSigner(b, password)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Sign returns the signature of blob as `cosign sign-blob --key` writes it:
// base64 of an ASN.1 ECDSA signature over sha256(blob), no final newline.
func (s *Signer) Sign(blob []byte) ([]byte, error) {
	raw, err := s.sv.SignMessage(bytes.NewReader(blob))
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	out := make([]byte, base64.StdEncoding.EncodedLen(len(raw)))
	base64.StdEncoding.Encode(out, raw)
	return out, nil
}

// PublicKey returns the signer's public key, PEM-encoded as cosign writes it.
func (s *Signer) PublicKey() ([]byte, error) {
	pub, err := s.sv.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("signing key's public half: %w", err)
	}
	pem, err := cryptoutils.MarshalPublicKeyToPEM(pub)
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	return pem, nil
}

// ErrBadSignature is wrapped by [Verify] when the signature does not match
// the blob and key: altered content, another key, or not a signature.
var ErrBadSignature = errors.New("signature does not verify")

// Verify checks sig (base64, as [Signer.Sign] and cosign make it) over blob
// with the PEM public key. It returns an error wrapping [ErrBadSignature]
// when the signature does not match; any other error is about the key.
func Verify(publicPEM, blob, sig []byte) error {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(publicPEM)
	if err != nil {
		return fmt.Errorf("read public key: %w", err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return fmt.Errorf("load public key: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(sig)))
	if err != nil {
		return fmt.Errorf("%w: not base64: %v", ErrBadSignature, err)
	}
	if err := v.VerifySignature(bytes.NewReader(raw), bytes.NewReader(blob)); err != nil {
		return fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	return nil
}
