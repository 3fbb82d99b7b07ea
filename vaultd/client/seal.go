package client

import (
	"bytes"
	"fmt"
	"io"

	"filippo.io/age"
)

// SealToVault encrypts value to the vault's own age recipient (from
// [Client.Recipient]) for [Client.Put] and [Client.Adopt], so the value never
// crosses the socket in clear.
func SealToVault(vaultRecipient string, value []byte) ([]byte, error) {
	r, err := age.ParseX25519Recipient(vaultRecipient)
	if err != nil {
		return nil, fmt.Errorf("vault recipient: %w", err)
	}
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, r)
	if err != nil {
		return nil, fmt.Errorf("seal to vault: %w", err)
	}
	if _, err := io.Copy(w, bytes.NewReader(value)); err != nil {
		return nil, fmt.Errorf("seal to vault: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("seal to vault: %w", err)
	}
	return buf.Bytes(), nil
}
