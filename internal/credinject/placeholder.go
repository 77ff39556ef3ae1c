package credinject

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strings"
)

// minPlaceholderBits is the least entropy a placeholder must carry: a
// sandbox must not be able to guess another sandbox's placeholder.
const minPlaceholderBits = 64

const (
	lowerChars = "abcdefghijklmnopqrstuvwxyz"
	upperChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	digitChars = "0123456789"
	hexLower   = "0123456789abcdef"
	hexUpper   = "0123456789ABCDEF"
)

// knownPrefixes are kept verbatim so that clients which check a token's
// kind by its prefix accept the placeholder. Longest first.
var knownPrefixes = []string{
	"sk-ant-api03-", "sk-ant-admin01-", "github_pat_", "sk-proj-", "sk-svcacct-",
	"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "glpat-", "xoxb-", "xoxp-", "xoxa-", "xoxe-",
	"xapp-", "npm_", "hf_", "pypi-", "sk_live_", "sk_test_", "rk_live_", "AKIA", "ASIA", "sk-",
}

// CheckValue reports whether value can be injected with shape ("" or
// "jwt"): whether a placeholder of its shape carries enough randomness
// that a sandbox cannot guess another's. New refuses such a value.
func CheckValue(value, shape string) error {
	var err error
	switch shape {
	case "":
		_, err = placeholderFor(value)
	case "jwt":
		_, err = jwtPlaceholderFor(value)
	}
	return err
}

// placeholderFor returns a value shaped like real: the same length, a
// known prefix (or up to 8 letters of one case before a first '_' or
// '-') kept, every other letter or digit replaced by a random one of the
// same class (hex digits stay hex), punctuation kept. The result differs
// from real and carries at least minPlaceholderBits of randomness.
func placeholderFor(real string) (string, error) {
	keep := prefixLen(real)
	out, bits := randomizeClasses(real[keep:], hexOnly(real[keep:]))
	if bits < minPlaceholderBits {
		// Nothing of the value's own shape is told (its prefix, its
		// length, its bits): only what a value must have.
		return "", fmt.Errorf("value too short to mask: a placeholder of its shape would carry fewer than the %d random bits that keep one sandbox from guessing another's; inject needs about 16 hex digits or 14 letters past any prefix (a known one such as ghp_, or up to 8 letters of one case before a first _ or -), else give the secret no inject (then it is only redacted)",
			minPlaceholderBits)
	}
	p := real[:keep] + out
	if p == real {
		return "", fmt.Errorf("generating placeholder: collided with the value")
	}
	return p, nil
}

func prefixLen(v string) int {
	for _, p := range knownPrefixes {
		if strings.HasPrefix(v, p) && len(v) > len(p) {
			return len(p)
		}
	}
	// Another prefix is kept only where it reads as a kind rather than
	// as part of the value: up to 8 letters of one case before a first
	// '_' or '-' (mytoken_, pk-). A run with digits or mixed case, as a
	// random value may begin, is replaced like the rest: any run of up
	// to 11 characters was kept before, and so told to the sandbox.
	if i := strings.IndexAny(v, "_-"); i > 0 && i <= maxTagLen && oneCaseLetters(v[:i]) {
		return i + 1
	}
	return 0
}

// maxTagLen is the longest unknown prefix placeholderFor keeps.
const maxTagLen = 8

// oneCaseLetters reports whether s is letters of one case only.
func oneCaseLetters(s string) bool {
	return strings.Trim(s, lowerChars) == "" || strings.Trim(s, upperChars) == ""
}

// hexOnly reports whether s's letters are all hex digits of one case and
// it has some: such a value stays hex.
func hexOnly(s string) bool {
	letters := 0
	lower, upper := false, false
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'f':
			lower, letters = true, letters+1
		case c >= 'A' && c <= 'F':
			upper, letters = true, letters+1
		case c >= '0' && c <= '9':
		case isLetter(c):
			return false
		}
	}
	return letters > 0 && !(lower && upper)
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// randomizeClasses replaces each letter and digit of s by a random one of
// its class and returns the entropy added, in bits.
func randomizeClasses(s string, hex bool) (string, float64) {
	b := []byte(s)
	bits := 0.0
	for i, c := range b {
		var set string
		switch {
		case hex && c >= 'a' && c <= 'f', hex && c >= '0' && c <= '9' && !hasUpperHex(s):
			set = hexLower
		case hex && (c >= 'A' && c <= 'F' || c >= '0' && c <= '9'):
			set = hexUpper
		case c >= 'a' && c <= 'z':
			set = lowerChars
		case c >= 'A' && c <= 'Z':
			set = upperChars
		case c >= '0' && c <= '9':
			set = digitChars
		default:
			continue
		}
		b[i] = set[randInt(len(set))]
		bits += math.Log2(float64(len(set)))
	}
	return string(b), bits
}

func hasUpperHex(s string) bool { return strings.ContainsAny(s, "ABCDEF") }

func randInt(n int) int {
	v, err := rand.Int(rand.Reader, big.NewInt(int64(n)))
	if err != nil {
		panic("crypto/rand failed: " + err.Error()) // it does not fail on Linux
	}
	return int(v.Int64())
}

// keptClaims are JWT claims a jwt-shaped placeholder keeps: not secret,
// and clients check them (issuer, audience, times).
var keptClaims = map[string]bool{
	"iss": true, "aud": true, "exp": true, "iat": true, "nbf": true,
	"scope": true, "scp": true, "typ": true, "alg": true, "kid": true,
}

// jwtPlaceholderFor returns a structurally valid JWT shaped like real: its
// header as is, its claims in the same order and of the same lengths, with
// every string value other than keptClaims randomized by class, and a
// random signature of the same length. It is never validly signed.
func jwtPlaceholderFor(real string) (string, error) {
	parts := strings.Split(real, ".")
	if len(parts) != 3 {
		return "", fmt.Errorf("shape jwt: the value is not a JWT (want three dot-separated parts)")
	}
	enc := base64.RawURLEncoding
	payload, err := enc.DecodeString(parts[1])
	if err != nil {
		return "", fmt.Errorf("shape jwt: decoding the claims: %w", err)
	}
	if _, err := enc.DecodeString(parts[0]); err != nil || !json.Valid(payload) {
		return "", fmt.Errorf("shape jwt: the header or claims are not base64url JSON")
	}
	fake, bits := randomizeJSONStrings(payload)
	sig, sbits := randomizeClasses(parts[2], false)
	if bits+sbits < minPlaceholderBits {
		return "", fmt.Errorf("shape jwt: the token is too short to mask")
	}
	if !json.Valid(fake) {
		return "", fmt.Errorf("shape jwt: rewriting the claims broke their JSON")
	}
	return parts[0] + "." + enc.EncodeToString(fake) + "." + sig, nil
}

// randomizeJSONStrings randomizes, by class, the characters of the string
// values of a JSON object whose member name is not in keptClaims, leaving
// names, escapes and every other byte as they are: the layout and length
// stay the same.
func randomizeJSONStrings(doc []byte) ([]byte, float64) {
	out := bytes.Clone(doc)
	bits := 0.0
	var lastName string
	expectValue := false
	for i := 0; i < len(out); i++ {
		switch out[i] {
		case ':':
			expectValue = true
			continue
		case ',', '{', '[':
			expectValue = false
			continue
		case '"':
		default:
			continue
		}
		end := i + 1
		for end < len(out) && out[end] != '"' {
			if out[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(out) {
			break
		}
		if !expectValue {
			lastName = string(out[i+1 : end])
		} else if !keptClaims[lastName] {
			bits += randomizeRaw(out[i+1 : end])
		}
		expectValue = false
		i = end
	}
	return out, bits
}

// randomizeRaw randomizes the letters and digits of a JSON string's raw
// bytes in place, skipping escapes.
func randomizeRaw(b []byte) float64 {
	bits := 0.0
	for j := 0; j < len(b); j++ {
		if b[j] == '\\' {
			j++
			if j < len(b) && b[j] == 'u' {
				j += 4
			}
			continue
		}
		r, n := randomizeClasses(string(b[j:j+1]), false)
		b[j] = r[0]
		bits += n
	}
	return bits
}

// keyIDPlaceholderFor shapes a fake AWS access key id: the 4-letter kind
// (AKIA, ASIA) kept, the rest drawn from upper-case letters and digits as
// AWS issues them, whatever the real id's mix.
func keyIDPlaceholderFor(real string) (string, error) {
	const set = upperChars + digitChars
	if len(real) < 16 {
		return "", fmt.Errorf("access key id of %d characters: too short to mask", len(real))
	}
	b := []byte(real)
	for i := 4; i < len(b); i++ {
		b[i] = set[randInt(len(set))]
	}
	if string(b) == real {
		return "", fmt.Errorf("generating placeholder: collided with the value")
	}
	return string(b), nil
}
