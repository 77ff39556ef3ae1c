package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
	"Ab3/Xy9+Qw7zLm4/Pk8tRt5sNv2Hq6Dc==", // base64: each of /, + and = escaped by some writer
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

// lowerHexDigits writes the hex digits of each %XX in s in lower case,
// and nothing else.
func lowerHexDigits(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = toLowerHex(b[i+1]), toLowerHex(b[i+2])
			i += 2
		}
	}
	return string(b)
}

// escapeLike escapes each character of set in s, as a JSON writer that
// escapes them does: as \u00 and hexFmt of it, or / as slash if set.
func escapeLike(s, set, hexFmt, slash string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		switch {
		case !strings.ContainsRune(set, rune(c)):
			b.WriteByte(c)
		case c == '/' && slash != "":
			b.WriteString(slash)
		default:
			b.WriteString(`\u00` + fmt.Sprintf(hexFmt, c))
		}
	}
	return b.String()
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
			tc{"query-lower", "q=" + lowerHexDigits(url.QueryEscape(v)), lowerHexDigits(url.QueryEscape(v)), true},
			tc{"json", `{"k":"` + jsonEscaped(t, "<"+v+">", true) + `"}`, jsonEscaped(t, v, true), false},
			tc{"json-nohtml", `{"k":"` + jsonEscaped(t, "<"+v+">", false) + `"}`, jsonEscaped(t, v, false), false},
		)
		// Other JSON writers escape more of what JSON needs no escape for.
		for _, w := range []struct{ name, set, hex, slash string }{
			{"php", "/", "", `\/`},             // json_encode
			{"laravel", "<>&'/", "%02X", `\/`}, // JSON_HEX_TAG|AMP|APOS
			{"dotnet", "+<>&'`", "%02X", ""},   // System.Text.Json
			{"gson", "=<>&'", "%02x", ""},      // Gson, HTML-safe
			{"escaped-slash", "/", "%02x", ""}, // \u002f
		} {
			form := escapeLike(jsonEscaped(t, v, false), w.set, w.hex, w.slash)
			if form == jsonEscaped(t, v, false) {
				continue // nothing of the set in v
			}
			cases = append(cases, tc{"json-" + w.name, `{"token":"` + escapeLike(jsonEscaped(t, "a/+="+v+"=/+b", false), w.set, w.hex, w.slash) + `"}`, form, false})
		}
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
		// The base64 and query forms as JSON writers that escape + / =
		// write them (a Basic credential echoed by .NET's encoder).
		for _, w := range []struct{ set, hex, slash string }{{"+", "%02X", ""}, {"/", "", `\/`}, {"=", "%02x", ""}, {"/", "%02x", ""}} {
			for _, text := range []string{base64.StdEncoding.EncodeToString([]byte(v)), url.QueryEscape(v)} {
				esc := escapeLike(text, w.set, w.hex, w.slash)
				if esc == text {
					continue
				}
				cases = append(cases, tc{"escaped-" + w.set, `{"basic":"` + esc + `"}`, esc, false})
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
