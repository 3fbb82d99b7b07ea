package declaration

import "strings"

// These checks accept exactly the strings the regular expressions in their
// comments match (valid_test.go fuzzes one against the other). They are
// written by hand because Validate runs on every rendered node, and a
// regexp's match costs more than the rest of Validate together.

// isDigestImage: ^[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}$
func isDigestImage(s string) bool {
	const at = "@sha256:"
	n := len(s) - 64 - len(at)
	if n < 1 || s[n:n+len(at)] != at || !isHex64(s[n+len(at):]) {
		return false
	}
	if c := s[0]; !isLowerDigit(c) {
		return false
	}
	for i := 1; i < n; i++ {
		if c := s[i]; !isLowerDigit(c) && c != '.' && c != '_' && c != '/' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

// isOctalMode: ^0[0-7]{3}$
func isOctalMode(s string) bool {
	return len(s) == 4 && s[0] == '0' && isOctal(s[1]) && isOctal(s[2]) && isOctal(s[3])
}

// isOwner: ^[0-9]+:[0-9]+$
func isOwner(s string) bool {
	uid, gid, ok := strings.Cut(s, ":")
	return ok && isDigits(uid) && isDigits(gid)
}

// isHex64: ^[0-9a-f]{64}$
func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isDigit(c) && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// isEnvName: ^[A-Za-z_][A-Za-z0-9_]*$
func isEnvName(s string) bool {
	if s == "" || isDigit(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' {
			return false
		}
	}
	return true
}

// isSealedPath: ^secrets/[A-Za-z0-9._-]+\.age$
func isSealedPath(s string) bool {
	const prefix, suffix = "secrets/", ".age"
	if len(s) < len(prefix)+1+len(suffix) || !strings.HasPrefix(s, prefix) || !strings.HasSuffix(s, suffix) {
		return false
	}
	for i := len(prefix); i < len(s)-len(suffix); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// isContainerName: ^[a-zA-Z0-9][a-zA-Z0-9_.-]*$ (what podman accepts)
func isContainerName(s string) bool {
	if s == "" || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
func isOctal(c byte) bool      { return '0' <= c && c <= '7' }
func isLowerDigit(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'z' }
func isAlnum(c byte) bool      { return isLowerDigit(c) || 'A' <= c && c <= 'Z' }

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}
