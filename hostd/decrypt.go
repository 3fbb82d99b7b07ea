package hostd

import (
	"bytes"
	"fmt"
	"io"

	"filippo.io/age"

	"github.com/meshgen/meshgen/hostd/declaration"
)

// plaintext decrypts a sealed file of br with the node's age identity. The
// result lives only in memory until it is written to its target file; an
// error never carries it. For an env-file secret the result is
// "<EnvVar>=<plaintext>\n".
func (h *Host) plaintext(br Branch, id string, s *declaration.SecretRef) ([]byte, error) {
	ct, ok := br.Sealed[s.Sealed]
	if !ok {
		return nil, fmt.Errorf("sealed file %s for %q is missing", s.Sealed, id)
	}
	r, err := age.Decrypt(bytes.NewReader(ct), h.identity...)
	if err != nil {
		return nil, fmt.Errorf("decrypt %s for %q with this node's age identity: %w (was it sealed to this node's recipient?)", s.Sealed, id, err)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("decrypt %s for %q: %w", s.Sealed, id, err)
	}
	if s.EnvVar != "" {
		data = append(append([]byte(s.EnvVar+"="), bytes.TrimRight(data, "\n")...), '\n')
	}
	return data, nil
}
