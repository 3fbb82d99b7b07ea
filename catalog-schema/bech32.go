package schema

import "strings"

// bech32Charset is the alphabet of bech32 (BIP 173), which age uses for
// its recipients.
const bech32Charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

// isAgeRecipient reports whether s is an age X25519 recipient: the bech32
// encoding, with human-readable part "age", of a 32-byte key, with a valid
// checksum. It is checked here, without the age module, because this
// package reads formats and holds no keys.
func isAgeRecipient(s string) bool {
	if s != strings.ToLower(s) || !strings.HasPrefix(s, "age1") {
		return false
	}
	data := s[len("age1"):]
	if len(data) < 6 {
		return false
	}
	values := make([]byte, len(data))
	for i := 0; i < len(data); i++ {
		v := strings.IndexByte(bech32Charset, data[i])
		if v < 0 {
			return false
		}
		values[i] = byte(v)
	}
	hrp := "age"
	exp := make([]byte, 0, len(hrp)*2+1+len(values))
	for i := 0; i < len(hrp); i++ {
		exp = append(exp, hrp[i]>>5)
	}
	exp = append(exp, 0)
	for i := 0; i < len(hrp); i++ {
		exp = append(exp, hrp[i]&31)
	}
	exp = append(exp, values...)
	if polymod(exp) != 1 {
		return false
	}
	// 5-bit groups without the 6 checksum groups must carry 32 bytes.
	bits := (len(values) - 6) * 5
	return bits/8 == 32 && bits%8 < 5
}

// polymod is the bech32 checksum function.
func polymod(values []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	for _, v := range values {
		top := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := 0; i < 5; i++ {
			if (top>>uint(i))&1 == 1 {
				chk ^= gen[i]
			}
		}
	}
	return chk
}
