package oauth

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// FuzzChallengeRoundTrip: what Challenge.String writes, ParseChallenge
// reads back (for the printable ASCII it keeps), and no value yields a
// header with a line break.
func FuzzChallengeRoundTrip(f *testing.F) {
	f.Add("https://r.example/.well-known/oauth-protected-resource/mcp", "mcp:read mcp:write", "insufficient_scope")
	f.Add(`a"b\c`, "x,y=z", "")
	f.Add("\r\nSet-Cookie: a=b", "é", "\x00")
	f.Fuzz(func(t *testing.T, rm, scope, code string) {
		ch := Challenge{ResourceMetadata: rm, Scope: scope, Error: code}
		h := ch.String()
		if strings.ContainsAny(h, "\r\n\x00") {
			t.Fatalf("header %q has a control character", h)
		}
		want := Challenge{ResourceMetadata: printable(rm), Scope: printable(scope), Error: printable(code)}
		got, ok := ParseChallenge(http.Header{"Www-Authenticate": {h}})
		if !ok {
			t.Fatalf("%q did not parse back", h)
		}
		if got != want {
			t.Fatalf("%q parsed as %+v, want %+v", h, got, want)
		}
	})
}

func printable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x20 && s[i] < 0x7f {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// FuzzResourceCovers checks resourceCovers against a slow reference:
// same scheme and host (case-insensitive), and the server's path
// segments start with the resource's.
func FuzzResourceCovers(f *testing.F) {
	f.Add("https://a.example/mcp", "https://a.example/mcp/x")
	f.Add("https://a.example/mc", "https://a.example/mcp")
	f.Add("https://a.example", "https://A.example/mcp")
	f.Add("http://a.example/", "https://a.example/")
	f.Fuzz(func(t *testing.T, res, srv string) {
		got := resourceCovers(res, srv)
		r, err1 := url.Parse(res)
		s, err2 := url.Parse(srv)
		want := false
		if err1 == nil && err2 == nil && r.Host != "" && r.Fragment == "" &&
			strings.EqualFold(r.Scheme, s.Scheme) && strings.EqualFold(r.Host, s.Host) {
			rs := segments(r.Path)
			ss := segments(s.Path)
			want = len(rs) <= len(ss)
			for i := 0; want && i < len(rs); i++ {
				want = rs[i] == ss[i]
			}
		}
		if got != want {
			t.Fatalf("resourceCovers(%q, %q) = %v, reference %v", res, srv, got, want)
		}
	})
}

func segments(p string) []string {
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

func TestParseChallenge(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want Challenge
		ok   bool
	}{
		{[]string{`Bearer resource_metadata="https://r/x", scope="a b"`}, Challenge{ResourceMetadata: "https://r/x", Scope: "a b"}, true},
		{[]string{`bearer error=insufficient_scope,scope="w"`}, Challenge{Scope: "w", Error: "insufficient_scope"}, true},
		{[]string{`Basic realm="x", Bearer scope="a"`}, Challenge{Scope: "a"}, true},
		{[]string{`Basic dXNlcjpwYXNz==, Bearer scope="a"`}, Challenge{Scope: "a"}, true},
		{[]string{`Basic realm="x"`, `Bearer scope="b"`}, Challenge{Scope: "b"}, true},
		{[]string{`Bearer`}, Challenge{}, true},
		{[]string{`Bearer scope="a\\", error="e"`}, Challenge{Scope: `a\`, Error: "e"}, true},
		{[]string{`Bearer scope="a\"b"`}, Challenge{Scope: `a"b`}, true},
		{[]string{`Bearer scope="unterminated`}, Challenge{}, false},
		{[]string{`Basic realm="x"`}, Challenge{}, false},
		{nil, Challenge{}, false},
	} {
		got, ok := ParseChallenge(http.Header{"Www-Authenticate": c.in})
		if got != c.want || ok != c.ok {
			t.Errorf("%q: %+v %v, want %+v %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// FuzzParseChallenge: any header parses or is refused, without panic or
// hang, and what parses renders and parses back to itself.
func FuzzParseChallenge(f *testing.F) {
	f.Add(`Basic realm="x", Bearer resource_metadata="https://r/x", scope="a b"`)
	f.Add(`Bearer scope="a\\", error="e"`)
	f.Add(`Negotiate abc==, Bearer`)
	f.Fuzz(func(t *testing.T, v string) {
		ch, ok := ParseChallenge(http.Header{"Www-Authenticate": {v}})
		if !ok {
			return
		}
		want := Challenge{ResourceMetadata: printable(ch.ResourceMetadata), Scope: printable(ch.Scope), Error: printable(ch.Error)}
		back, ok := ParseChallenge(http.Header{"Www-Authenticate": {ch.String()}})
		if !ok || back != want {
			t.Fatalf("%q → %+v → %q → %+v", v, ch, ch.String(), back)
		}
	})
}
