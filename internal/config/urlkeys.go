package config

import (
	"net/url"
	"strings"
)

// URLKeys returns the parts of a remote server's url, as written in a
// config, that look like a key, so that they can be redacted like a
// secret's value: the password of its user info; the values of its query
// parameters named like a credential or holding one (CredentialValue,
// shaped; nil: none), and the keys inside encoded JSON there
// (EncodedCredentials); and its path segments that look random
// (RandomToken) or shaped, as services that give each user a URL with a
// key in its path have them (https://host/s/KEY/mcp). A query key can be
// moved to servers.*.query; a path key cannot, so this is what keeps it
// out of logs, the audit and errors. Each is returned as written and, if
// it differs, unescaped. Nil when there are none or raw does not parse.
func URLKeys(raw string, shaped func(string) bool) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var out []string
	add := func(escaped, plain string) {
		out = append(out, plain)
		if escaped != plain {
			out = append(out, escaped)
		}
	}
	isKey := func(v string) bool { return CredentialValue(v) || (shaped != nil && shaped(v)) }
	if p, ok := u.User.Password(); ok && p != "" {
		add(p, p)
	}
	for _, pair := range strings.FieldsFunc(u.RawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, _ := strings.Cut(pair, "=")
		pk, err1 := url.QueryUnescape(k)
		pv, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil || pv == "" {
			continue
		}
		if CredentialName(pk) || isKey(pv) || RandomToken(pv) {
			add(v, pv)
		}
		for _, inner := range EncodedCredentials(pv, shaped) {
			add(inner, inner)
		}
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		plain, err := url.PathUnescape(seg)
		if err == nil && (RandomToken(plain) || isKey(plain)) {
			add(seg, plain)
		}
	}
	return out
}

// RandomToken reports whether s looks like a random identifier handed
// out as a key: a UUID, 32 or more hex digits, or 20 or more characters
// of [A-Za-z0-9_=.~+-] that either mix upper and lower case letters and
// digits (base64, base62) or switch between letters and digits at least
// six times (a lower-case base36 or base32 key). A word, a slug, a date
// or a name with a version in it is none of these.
func RandomToken(s string) bool {
	if uuidRE().MatchString(s) || hexKeyRE().MatchString(s) {
		return true
	}
	if len(s) < 20 || strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_=.~+-") != "" {
		return false
	}
	upper, lower, digit := strings.ContainsAny(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"), strings.ContainsAny(s, "abcdefghijklmnopqrstuvwxyz"),
		strings.ContainsAny(s, "0123456789")
	if upper && lower && digit {
		return true
	}
	switches, prev := 0, byte(0) // prev: 'a' after a letter, '0' after a digit
	for i := range len(s) {
		class := byte(0)
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			class = '0'
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			class = 'a'
		}
		if class != 0 && prev != 0 && class != prev {
			switches++
		}
		if class != 0 {
			prev = class
		}
	}
	return switches >= 6
}

var (
	uuidRE   = lazyRegexp(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	hexKeyRE = lazyRegexp(`^[0-9a-fA-F]{32,}$`)
)
