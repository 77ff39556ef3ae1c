package oauth

import (
	"net/http"
	"strings"
)

// Challenge is the Bearer challenge of a WWW-Authenticate header (RFC 6750
// §3, RFC 9728 §5.1).
type Challenge struct {
	// ResourceMetadata is the protected resource metadata URL, if given.
	ResourceMetadata string
	// Scope is the space-separated scope the server asks for, if given.
	Scope string
	// Error is the error code ("invalid_token", "insufficient_scope").
	Error string
}

// ParseChallenge returns the Bearer challenge of h's WWW-Authenticate
// headers and whether there was one. A malformed header counts as none.
func ParseChallenge(h http.Header) (Challenge, bool) {
	for _, v := range h.Values("WWW-Authenticate") {
		cs, ok := parseChallenges(v)
		if !ok {
			return Challenge{}, false
		}
		for _, c := range cs {
			if c.scheme != "bearer" {
				continue
			}
			return Challenge{
				ResourceMetadata: c.params["resource_metadata"],
				Scope:            c.params["scope"],
				Error:            c.params["error"],
			}, true
		}
	}
	return Challenge{}, false
}

type rawChallenge struct {
	scheme string
	params map[string]string
}

// parseChallenges parses one WWW-Authenticate value (RFC 9110 §11.6.1):
// a comma-separated list of "scheme [params | token68]", where params are
// comma-separated key=token or key=quoted-string. A comma is a parameter
// separator when what follows is "token =", else it starts a challenge.
func parseChallenges(v string) ([]rawChallenge, bool) {
	p := &scanner{s: v}
	var out []rawChallenge
	for {
		p.skip(" \t,")
		if p.end() {
			return out, true
		}
		scheme := p.token()
		if scheme == "" {
			return nil, false
		}
		c := rawChallenge{scheme: strings.ToLower(scheme), params: map[string]string{}}
		if p.peek() != ' ' && p.peek() != '\t' && !p.end() && p.peek() != ',' {
			return nil, false
		}
		p.skip(" \t")
		for !p.end() {
			save := p.i
			key := p.token()
			p.skip(" \t")
			if key == "" || p.peek() != '=' {
				p.i = save
				if key != "" && c.isEmpty() {
					p.token68() // "Basic dXNlcg", not params
				}
				break
			}
			p.i++ // '='
			p.skip(" \t")
			var val string
			if p.peek() == '"' {
				var ok bool
				if val, ok = p.quoted(); !ok {
					return nil, false
				}
			} else if val = p.token(); val == "" {
				// token68 ending in '=' (e.g. base64 padding): not params.
				p.i = save
				p.token68()
				break
			}
			c.params[strings.ToLower(key)] = val
			p.skip(" \t")
			if p.peek() == ',' {
				p.i++
				p.skip(" \t")
				continue
			}
			if !p.end() {
				return nil, false
			}
		}
		out = append(out, c)
	}
}

func (c rawChallenge) isEmpty() bool { return len(c.params) == 0 }

type scanner struct {
	s string
	i int
}

func (p *scanner) end() bool { return p.i >= len(p.s) }

func (p *scanner) peek() byte {
	if p.end() {
		return 0
	}
	return p.s[p.i]
}

func (p *scanner) skip(set string) {
	for !p.end() && strings.IndexByte(set, p.s[p.i]) >= 0 {
		p.i++
	}
}

// token reads an RFC 9110 token.
func (p *scanner) token() string {
	start := p.i
	for !p.end() && isTchar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

// token68 skips a token68 (and anything up to the next comma).
func (p *scanner) token68() {
	for !p.end() && p.s[p.i] != ',' {
		p.i++
	}
}

// quoted reads a quoted-string, undoing quoted-pairs.
func (p *scanner) quoted() (string, bool) {
	p.i++ // opening quote
	var b strings.Builder
	for !p.end() {
		c := p.s[p.i]
		p.i++
		switch c {
		case '"':
			return b.String(), true
		case '\\':
			if p.end() {
				return "", false
			}
			b.WriteByte(p.s[p.i])
			p.i++
		default:
			b.WriteByte(c)
		}
	}
	return "", false
}

func isTchar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// String renders c as a WWW-Authenticate header value, the form the
// gateway sends with a 401 or 403. Empty fields are left out; values are
// quoted (RFC 9110 §5.6.4).
func (c Challenge) String() string {
	var parts []string
	add := func(k, v string) {
		if q := quote(v); q != `""` {
			parts = append(parts, k+"="+q)
		}
	}
	add("resource_metadata", c.ResourceMetadata)
	add("scope", c.Scope)
	add("error", c.Error)
	if len(parts) == 0 {
		return "Bearer"
	}
	return "Bearer " + strings.Join(parts, ", ")
}

// quote makes v an HTTP quoted-string (RFC 9110 §5.6.4): '"' and '\'
// escaped, and every byte outside printable ASCII dropped, so no value
// can end the header or start another (CR, LF).
func quote(v string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
