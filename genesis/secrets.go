package genesis

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/meshgen/meshgen/vaultd/client"
)

// FoundationSecret is one of the foundation's first secrets: its name in the
// vault, how many random bytes its value carries, and what it is for.
type FoundationSecret struct {
	// Name is the secret's name in the vault.
	Name string
	// Bytes is how many random bytes the value carries; the value is their
	// unpadded base64url form.
	Bytes int
	// Why says what the secret is for, for the summary an operator reads.
	Why string
}

// Spec is how the vault makes this secret's replacement when it rotates it:
// a value of the same length and alphabet as the one genesis made.
func (s FoundationSecret) Spec() client.Spec {
	return client.Spec{
		Length:   base64.RawURLEncoding.EncodedLen(s.Bytes),
		Alphabet: client.AlphabetBase64URL,
		Rotation: client.OneParty,
	}
}

// EnrolmentToken is the name of the mesh's enrolment token in the vault.
const EnrolmentToken = "mesh-enrolment-token"

// FoundationSecrets returns the foundation's first secrets: exactly what
// genesis generates and delivers to the vault, and nothing else. See the
// package doc for why the list is this short.
func FoundationSecrets() []FoundationSecret {
	return []FoundationSecret{
		{Name: EnrolmentToken, Bytes: 32, Why: "the first enrolment token: the operator receives it, the reconciler can only verify it"},
	}
}

// Vault is what genesis needs of vaultd: its own age recipient, and the adopt
// call that records secrets genesis made as the mesh's own (rotatable).
// *client.Client is one.
type Vault interface {
	Recipient(ctx context.Context) (string, error)
	Adopt(ctx context.Context, req client.AdoptRequest) (*client.AdoptResponse, error)
}

// sealFoundation generates each secret's value and encrypts it with age to
// the vault's recipient. The plaintext lives only in memory and is
// overwritten before this returns.
func sealFoundation(vaultRecipient string, secrets []FoundationSecret) ([]client.AdoptSecret, error) {
	out := make([]client.AdoptSecret, 0, len(secrets))
	for _, s := range secrets {
		raw := make([]byte, s.Bytes)
		if _, err := rand.Read(raw); err != nil {
			return nil, fmt.Errorf("generate %s: %w", s.Name, err)
		}
		value := make([]byte, base64.RawURLEncoding.EncodedLen(s.Bytes))
		base64.RawURLEncoding.Encode(value, raw)
		ct, err := client.SealToVault(vaultRecipient, value)
		clear(raw)
		clear(value)
		if err != nil {
			return nil, fmt.Errorf("encrypt %s to the vault: %w", s.Name, err)
		}
		out = append(out, client.AdoptSecret{Name: s.Name, Spec: s.Spec(), Ciphertext: ct})
	}
	return out, nil
}

// deliver generates the foundation's first secrets, encrypted to v's
// recipient, and has v adopt them. It returns the names v adopted.
func deliver(ctx context.Context, v Vault) ([]string, error) {
	recipient, err := v.Recipient(ctx)
	if err != nil {
		return nil, fmt.Errorf("ask the vault for its recipient: %w", err)
	}
	sealed, err := sealFoundation(recipient, FoundationSecrets())
	if err != nil {
		return nil, err
	}
	resp, err := v.Adopt(ctx, client.AdoptRequest{Secrets: sealed})
	if err != nil {
		return nil, fmt.Errorf("deliver the foundation's first secrets to the vault: %w", err)
	}
	names := make([]string, 0, len(resp.Adopted))
	for _, a := range resp.Adopted {
		names = append(names, a.Name)
	}
	return names, nil
}
