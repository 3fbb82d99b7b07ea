package genesis

import (
	"fmt"

	"github.com/meshgen/meshgen/reconciler/sign"
)

// signingKey makes the reconciler's signing key pair, here, where it is used:
// cosign's format, the private half encrypted with password (what `cosign
// generate-key-pair` writes), the public half as PEM for keys/reconciler.pub.
func signingKey(password []byte) (private, public []byte, err error) {
	kp, err := sign.GenerateKeyPair(password)
	if err != nil {
		return nil, nil, fmt.Errorf("make the reconciler's signing key: %w", err)
	}
	return kp.Private, kp.Public, nil
}
