package vaultd

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"fmt"

	"github.com/meshgen/meshgen/vaultd/client"
	"golang.org/x/crypto/bcrypt"
)

// Defaults and bounds of a [client.Spec].
const (
	defaultLength = 32
	maxLength     = 1024
	// bcrypt reads at most 72 bytes of a password.
	bcryptMaxLength = 72
	// mosquitto_passwd's defaults for "$7$" (PBKDF2-SHA512).
	mosquittoIterations = 101
	mosquittoSaltLen    = 12
	mosquittoHashLen    = 64
	// maxValue bounds a value delivered by an operator or genesis.
	maxValue = 64 << 10
)

var alphabets = map[string]string{
	client.AlphabetAlnum:     "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
	client.AlphabetHex:       "0123456789abcdef",
	client.AlphabetBase64URL: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
}

// normalize fills a spec's defaults and refuses what vaultd cannot make.
func normalize(spec client.Spec) (client.Spec, error) {
	if spec.Length == 0 {
		spec.Length = defaultLength
	}
	if spec.Alphabet == "" {
		spec.Alphabet = client.AlphabetAlnum
	}
	if spec.Rotation == "" {
		spec.Rotation = client.OneParty
	}
	// What a caller sent in the wrong field is not echoed: it could be a
	// value pasted in the wrong place (like an invalid name).
	switch {
	case spec.Length < 8 || spec.Length > maxLength:
		return spec, refuse(client.ErrBadRequest, "", "length %d is outside 8..%d", spec.Length, maxLength)
	case alphabets[spec.Alphabet] == "":
		return spec, refuse(client.ErrBadRequest, "", "unknown alphabet (%d bytes; want alnum, hex or base64url)", len(spec.Alphabet))
	case spec.Format != "" && spec.Format != client.FormatMosquittoPBKDF2 && spec.Format != client.FormatBcrypt:
		return spec, refuse(client.ErrBadRequest, "", "unknown format (%d bytes; want mosquitto-pbkdf2 or bcrypt)", len(spec.Format))
	case spec.Format == client.FormatBcrypt && spec.Length > bcryptMaxLength:
		return spec, refuse(client.ErrBadRequest, "", "length %d is too long for bcrypt, which reads at most %d bytes", spec.Length, bcryptMaxLength)
	case spec.Rotation != client.OneParty && spec.Rotation != client.TwoParty:
		return spec, refuse(client.ErrBadRequest, "", "unknown rotation (%d bytes; want one-party or two-party)", len(spec.Rotation))
	case spec.MaxAge < 0:
		return spec, refuse(client.ErrBadRequest, "", "negative maxAge")
	}
	return spec, nil
}

// makeValue makes a new value: spec.Length characters drawn uniformly from
// the alphabet with crypto/rand.
func makeValue(spec client.Spec) []byte {
	alpha := alphabets[spec.Alphabet]
	// Reject bytes at or above the largest multiple of len(alpha) so every
	// character is equally likely.
	limit := byte(256 - 256%len(alpha))
	out := make([]byte, 0, spec.Length)
	buf := make([]byte, spec.Length*2)
	for len(out) < spec.Length {
		rand.Read(buf) // never fails (crypto/rand)
		for _, b := range buf {
			if limit != 0 && b >= limit {
				continue
			}
			out = append(out, alpha[int(b)%len(alpha)])
			if len(out) == spec.Length {
				break
			}
		}
	}
	return out
}

// derive makes the derived form format asks for.
func derive(format string, value []byte) (string, error) {
	switch format {
	case "":
		return "", nil
	case client.FormatMosquittoPBKDF2:
		salt := make([]byte, mosquittoSaltLen)
		rand.Read(salt)
		key, err := pbkdf2.Key(sha512.New, string(value), salt, mosquittoIterations, mosquittoHashLen)
		if err != nil {
			return "", fmt.Errorf("derive %s: %w", format, err)
		}
		enc := base64.StdEncoding
		return fmt.Sprintf("$7$%d$%s$%s", mosquittoIterations, enc.EncodeToString(salt), enc.EncodeToString(key)), nil
	case client.FormatBcrypt:
		if len(value) > bcryptMaxLength {
			return "", refuse(client.ErrBadRequest, "", "the value is longer than the %d bytes bcrypt reads", bcryptMaxLength)
		}
		h, err := bcrypt.GenerateFromPassword(value, bcrypt.DefaultCost)
		if err != nil {
			// bcrypt's errors do not quote the password.
			return "", fmt.Errorf("derive %s: %w", format, err)
		}
		return string(h), nil
	}
	return "", refuse(client.ErrBadRequest, "", "unknown format (%d bytes)", len(format))
}
