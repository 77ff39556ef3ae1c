package gateway

import "unicode/utf8"

// MatchTool reports whether a tool's name matches glob, in path.Match
// syntax ('*', '?', '[...]' with '^' and ranges, '\' escapes) but with no
// separator: '/' is an ordinary character of a tool's name, so '*' and
// '?' match it too ("*" is every tool, "fs_*" matches "fs_a/b"), and a
// class matches it as its ranges say. glob must be well formed (config
// checks it with path.Match); a malformed one matches nothing.
func MatchTool(glob, tool string) bool {
	// The one-star backtracking of a glob matcher: on a mismatch, go
	// back to just after the last '*' and let it take one more
	// character. Linear in the name for each star, never exponential.
	px, nx := 0, 0
	starPx, starNx := -1, 0
	for px < len(glob) || nx < len(tool) {
		if px < len(glob) {
			switch glob[px] {
			case '*':
				starPx, starNx = px, nx
				px++
				continue
			case '?':
				if nx < len(tool) {
					_, n := utf8.DecodeRuneInString(tool[nx:])
					px, nx = px+1, nx+n
					continue
				}
			case '[':
				if nx < len(tool) {
					r, n := utf8.DecodeRuneInString(tool[nx:])
					matched, rest, ok := matchClass(glob[px+1:], r)
					if !ok {
						return false
					}
					if matched {
						px, nx = len(glob)-len(rest), nx+n
						continue
					}
				}
			default:
				c, width := glob[px], 1
				if c == '\\' {
					if px+1 == len(glob) {
						return false
					}
					c, width = glob[px+1], 2
				}
				if nx < len(tool) && tool[nx] == c {
					px, nx = px+width, nx+1
					continue
				}
			}
		}
		if starPx >= 0 && starNx < len(tool) {
			_, n := utf8.DecodeRuneInString(tool[starNx:])
			starNx += n
			px, nx = starPx+1, starNx
			continue
		}
		return false
	}
	return true
}

// matchClass matches r against the class that class begins (after its
// '['), returning what follows its ']'; ok is false for a malformed one.
func matchClass(class string, r rune) (matched bool, rest string, ok bool) {
	negated := class != "" && class[0] == '^'
	if negated {
		class = class[1:]
	}
	for n := 0; ; n++ {
		if class != "" && class[0] == ']' && n > 0 {
			return matched != negated, class[1:], true
		}
		lo, after, ok := classChar(class)
		if !ok {
			return false, "", false
		}
		hi := lo
		if after != "" && after[0] == '-' {
			if hi, after, ok = classChar(after[1:]); !ok {
				return false, "", false
			}
		}
		class = after
		if lo <= r && r <= hi {
			matched = true
		}
	}
}

// classChar reads one character of a class, escaped or not.
func classChar(s string) (rune, string, bool) {
	if s == "" || s[0] == '-' || s[0] == ']' {
		return 0, "", false
	}
	if s[0] == '\\' {
		if s = s[1:]; s == "" {
			return 0, "", false
		}
	}
	r, n := utf8.DecodeRuneInString(s)
	return r, s[n:], true
}
