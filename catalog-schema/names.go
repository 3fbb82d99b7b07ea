package schema

// maxNameLen is the longest name a mesh accepts: a DNS label.
const maxNameLen = 63

// isName reports whether s is a valid name for a node, module, contract,
// requirement, resource, field or seat: lowercase letters, digits and
// hyphens, starting with a letter, not ending with a hyphen, at most 63
// characters (a DNS label).
func isName(s string) bool {
	if s == "" || len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' || c == '-':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return s[len(s)-1] != '-'
}

// nameHint is the hint given with an invalid name.
const nameHint = "use lowercase letters, digits and hyphens, starting with a letter (at most 63 characters)"
