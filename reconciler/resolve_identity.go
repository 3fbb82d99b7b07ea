package reconciler

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// Limits a derived login fits, the tightest of the backends the catalog
// serves (design 27, ADR 0049):
//
//   - postgres: identifiers of at most 63 bytes (NAMEDATALEN-1), unquoted
//     ones lower case [a-z_][a-z0-9_$]*;
//   - MySQL/MariaDB: user names of at most 32 characters;
//   - mosquitto's dynamic security: any UTF-8 user name, but a name that is
//     also a topic segment must not hold '+', '#' or '/'.
//
// So a login is at most LoginMaxLen bytes of [a-z0-9_], starting with a
// letter, which every one of them takes unquoted. That bound holds for a
// consumer's second login too ([SlotLogin]), so a derived login leaves room
// for its suffix.
const LoginMaxLen = 32

// secondLogin is the suffix of a consumer's second login. No derived login
// ends with it: a plain login holds "__" once, between module and node, and
// ends in a letter or digit; a shortened one ends in "___" and a hash.
const secondLogin = "__b"

// SlotLogin returns the login of a consumer's credential in a two-party
// slot (design 27, "Rotation": each consumer has two credentials, the
// second a second login derived by the mesh, both with the consumer's
// rights over its one resource). Slot "a", and "" for a one-party secret,
// is the consumer's login itself; slot "b" is login followed by "__b".
// Distinct logins have distinct second logins, and no second login is
// another consumer's login.
func SlotLogin(login, slot string) string {
	if slot == "b" {
		return login + secondLogin
	}
	return login
}

// NameMaxLen bounds a derived name: two DNS labels, "<module>.<node>", each
// label at most 63 bytes of [a-z0-9-].
const NameMaxLen = 63

// hashLen is how many hex digits of sha256 a shortened name carries: 48 bits,
// so 20,000 identities collide with odds under one in a million.
const hashLen = 12

// Identity is who an assignment is to every party: derived by the mesh from
// "<module>@<node>" alone, so every party agrees by construction and no
// provider makes it (design 27, "The mesh").
type Identity struct {
	// Name is "<module>.<node>" when both are plain names that fit, else a
	// shortened form with a hash.
	Name string `json:"name"`
	// Login is "<module>__<node>" with '-' written '_' when that fits
	// LoginMaxLen, else a shortened form ending in "___<hash>".
	Login string `json:"login"`
}

var plainName = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)
var plainNode = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// DeriveIdentity returns the identity of the assignment of module to node.
//
// It is collision-free: the plain login "<module>__<node>" is reversible,
// because plain names hold no "__" and do not begin or end with '-'; every
// other login holds "___", which no plain login does, followed by a hash of
// "<module>@<node>". Names follow the same rule with '.' and "--".
func DeriveIdentity(module, node string) Identity {
	plain := plainName.MatchString(module) && plainNode.MatchString(node)
	hash := func() string {
		sum := sha256.Sum256([]byte(module + "@" + node))
		return hex.EncodeToString(sum[:])[:hashLen]
	}

	var out Identity
	login := strings.ReplaceAll(module, "-", "_") + "__" + strings.ReplaceAll(node, "-", "_")
	if plain && len(login) <= LoginMaxLen-len(secondLogin) {
		out.Login = login
	} else {
		out.Login = shorten(module+"_"+node, '_', LoginMaxLen-len(secondLogin)-3-hashLen) + "___" + hash()
	}
	name := module + "." + node
	if plain && len(module) <= 63 && len(node) <= 63 && len(name) <= NameMaxLen {
		out.Name = name
	} else {
		out.Name = shorten(module+"-"+node, '-', NameMaxLen-3-hashLen) + "---" + hash()
	}
	return out
}

// shorten keeps s's first max characters in [a-z0-9], writing any other as
// sep, and makes it begin with a letter.
func shorten(s string, sep byte, max int) string {
	b := make([]byte, 0, max)
	for i := 0; i < len(s) && len(b) < max; i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		default:
			c = sep
		}
		b = append(b, c)
	}
	if len(b) == 0 || b[0] < 'a' || b[0] > 'z' {
		b = append([]byte{'m'}, b...)
		if len(b) > max {
			b = b[:max]
		}
	}
	return string(b)
}
