// Package signtest gives tests the reconciler's signer: one cosign-format key
// per test binary, made once because making it is scrypt-bound.
package signtest

import (
	"sync"
	"testing"

	"github.com/meshgen/meshgen/reconciler/sign"
)

// signerPassword encrypts the test signing key.
const signerPassword = "pw"

// testKey is made once per test binary: making a cosign key is scrypt-bound.
var testKey = sync.OnceValues(func() (*sign.KeyPair, error) {
	return sign.GenerateKeyPair([]byte(signerPassword))
})

// Signer returns the reconciler's signer for a test and the public key its
// signatures verify with (what keys/reconciler.pub holds). Every test of a
// binary shares one key.
func Signer(t testing.TB) (*sign.Signer, []byte) {
	t.Helper()
	kp, err := testKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.LoadSigner(kp.Private, []byte(signerPassword))
	if err != nil {
		t.Fatal(err)
	}
	return s, kp.Public
}
