package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
)

// testValues are secrets with characters that each encoding treats
// specially.
var testValues = []string{
	"s3cr3t-token-0123456789",
	"pa ss/wo+rd?&=@:;,$%<>\"\\é\x00\x7f!",
	"ghp_abcdefghijklmnopqrstuvwxyz0123456789",
	"\xff\xfe\xfd\x80binary-ish",
	"12345678",
}

// stableBase64 returns the characters of enc's encoding of buf that depend
// only on buf[k:k+n], by checking each character's bits directly.
func stableBase64(enc string, k, n int) string {
	var b strings.Builder
	for j := range len(enc) {
		if 6*j >= 8*k && 6*j+6 <= 8*(k+n) {
			b.WriteByte(enc[j])
		}
	}
	return b.String()
}

func jsonEscaped(t *testing.T, v string, html bool) string {
	t.Helper()
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(html)
	if err := e.Encode(v); err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSpace(b.String())
	return s[1 : len(s)-1]
}

// TestEncodings embeds each value in random surroundings, encodes the
// whole with the standard library, redacts, and checks that neither the
// value nor the independently computed encoded form survives.
func TestEncodings(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	for vi, v := range testValues {
		r, err := New([]Secret{{Name: "S", Value: []byte(v)}})
		if err != nil {
			t.Fatal(err)
		}
		type tc struct {
			name, text, forbidden string
			wantSuffix            bool // text ends with the form: all of it goes
		}
		var cases []tc
		cases = append(cases,
			tc{"raw", "x" + v + "y", v, false},
			tc{"hex", "h=" + hex.EncodeToString([]byte("ab"+v+"cd")), hex.EncodeToString([]byte(v)), false},
			tc{"HEX", "h=" + strings.ToUpper(hex.EncodeToString([]byte("a"+v))), strings.ToUpper(hex.EncodeToString([]byte(v))), true},
			tc{"query", "q=" + url.QueryEscape("a b"+v+"c d"), url.QueryEscape(v), false},
			tc{"path", "/p/" + url.PathEscape("a/"+v+"/b"), url.PathEscape(v), false},
			tc{"query-lower", "q=" + strings.ToLower(url.QueryEscape(v)), strings.ToLower(url.QueryEscape(v)), true},
			tc{"json", `{"k":"` + jsonEscaped(t, "<"+v+">", true) + `"}`, jsonEscaped(t, v, true), false},
			tc{"json-nohtml", `{"k":"` + jsonEscaped(t, "<"+v+">", false) + `"}`, jsonEscaped(t, v, false), false},
		)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
			for k := range 3 {
				for _, after := range []int{0, 1, 2, 5} {
					buf := append(append(randBytes(k), v...), randBytes(after)...)
					e := enc.EncodeToString(buf)
					cases = append(cases, tc{
						name:       "base64",
						text:       "data: " + e,
						forbidden:  stableBase64(e, k, len(v)),
						wantSuffix: after == 0,
					})
				}
			}
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				if !strings.Contains(c.text, c.forbidden) || c.forbidden == "" {
					t.Fatalf("bad test case %q: form %q not in text", c.text, c.forbidden)
				}
				got := r.String(c.text)
				if strings.Contains(got, v) || strings.Contains(got, c.forbidden) {
					t.Errorf("value %d: %q -> %q still holds %q", vi, c.text, got, c.forbidden)
				}
				if !strings.Contains(got, "[REDACTED:S]") {
					t.Errorf("value %d: %q -> %q: no replacement", vi, c.text, got)
				}
				if c.wantSuffix && !strings.HasSuffix(got, "[REDACTED:S]") {
					t.Errorf("value %d: %q -> %q: tail of the form left", vi, c.text, got)
				}
			})
		}
	}
}

// TestEscapersMatchNetURL checks this package's percent-encoders against
// net/url over every byte.
func TestEscapersMatchNetURL(t *testing.T) {
	var all []byte
	for c := range 256 {
		all = append(all, byte(c))
	}
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"QueryEscape", queryEscape(all), url.QueryEscape(string(all))},
		{"PathEscape", pathEscape(all), url.PathEscape(string(all))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if string(tt.got) != tt.want {
				t.Errorf("got %q\nwant %q", tt.got, tt.want)
			}
		})
	}
}
