package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// wrap breaks s into lines of width characters, as base64(1) (76) and PEM
// (64) write them.
func wrap(s string, width int, eol string) string {
	var b strings.Builder
	for len(s) > width {
		b.WriteString(s[:width] + eol)
		s = s[width:]
	}
	b.WriteString(s)
	return b.String()
}

// TestMIMEBase64 encodes a value inside random text as base64(1) and PEM
// do, wrapped at 76 or 64 columns with LF or CRLF, and checks that no
// stable part of the value's encoding survives, whether the lines are
// redacted whole, streamed in random pieces, or carried in a JSON string.
func TestMIMEBase64(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, v := range testValues {
		r, err := New([]Secret{{Name: "K", Value: []byte(v)}})
		if err != nil {
			t.Fatal(err)
		}
		for _, width := range []int{76, 64} {
			for _, eol := range []string{"\n", "\r\n"} {
				for pre := range 80 { // every alignment and line position
					head := make([]byte, pre)
					for i := range head {
						head[i] = byte(rng.IntN(256))
					}
					plain := append(append(head, v...), "tail of the file"...)
					enc := base64.StdEncoding.EncodeToString(plain)
					core := stableBase64(enc, pre, len(v))
					text := "begin\n" + wrap(enc, width, eol) + eol + "end\n"

					check := func(how string, out []byte) {
						t.Helper()
						flat := strings.NewReplacer("\n", "", "\r", "").Replace(string(out))
						if len(core) >= 4 && strings.Contains(flat, core) {
							t.Fatalf("%q width %d eol %q pre %d %s: encoded value survives in %q", v, width, eol, pre, how, out)
						}
						if !bytes.Contains(out, []byte("[REDACTED:K]")) {
							t.Fatalf("%q width %d pre %d %s: no marker in %q", v, width, pre, how, out)
						}
					}
					check("Bytes", r.Bytes([]byte(text)))

					var buf bytes.Buffer
					w := r.Writer(&buf)
					for rest := text; len(rest) > 0; {
						n := min(1+rng.IntN(40), len(rest))
						w.Write([]byte(rest[:n]))
						rest = rest[n:]
					}
					w.Close()
					if buf.String() != string(r.Bytes([]byte(text))) {
						t.Fatalf("Writer and Bytes differ for %q", text)
					}
					check("Writer", buf.Bytes())

					msg, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": text}}})
					out := r.JSON(msg)
					var got struct{ Content []struct{ Text string } }
					if err := json.Unmarshal(out, &got); err != nil {
						t.Fatalf("redacted JSON does not parse: %v: %s", err, out)
					}
					check("JSON", []byte(got.Content[0].Text))
				}
			}
		}
	}
}

// TestMultiLineValue is a value that holds line breaks itself (a PEM key
// as a secret): written with other breaks, or none, it is still caught.
func TestMultiLineValue(t *testing.T) {
	key := "-----BEGIN KEY-----\nMIIBVwIBADANBgkqhkiG9w0BAQEFAASC\nAUEwggE9AgEAAkEAv6pk\n-----END KEY-----\n"
	r, err := New([]Secret{{Name: "PEM", Value: []byte(key)}})
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.ReplaceAll(key, "\n", "")
	for name, in := range map[string]string{
		"as is":    "x " + key + " y",
		"crlf":     "x " + strings.ReplaceAll(key, "\n", "\r\n") + " y",
		"one line": "x " + flat + " y",
	} {
		out := r.String(in)
		if strings.Contains(out, "MIIBVwIBADANBgkqhkiG9w0BAQEFAASC") || !strings.Contains(out, "[REDACTED:PEM]") {
			t.Errorf("%s: %q", name, out)
		}
	}
	if _, err := New([]Secret{{Name: "NL", Value: []byte("\r\n\n")}}); !errors.Is(err, ErrEmptyValue) {
		t.Errorf("a value of line breaks only: err %v, want ErrEmptyValue", err)
	}
}

// TestJSONSplitValue splits a value over text items of a tool result and
// over structuredContent fields, at every cut, and checks that the text a
// client gets by joining the items holds no part of the value that would
// give it away, while unrelated strings are untouched.
func TestJSONSplitValue(t *testing.T) {
	const secret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
	r, err := New([]Secret{{Name: "GH", Value: []byte(secret)}})
	if err != nil {
		t.Fatal(err)
	}
	leaks := func(s string) bool {
		// Any 8 consecutive bytes of the value give part of it away.
		for i := 0; i+8 <= len(secret); i++ {
			if strings.Contains(s, secret[i:i+8]) {
				return true
			}
		}
		return false
	}
	for cut := 1; cut < len(secret); cut++ {
		a, b := "before "+secret[:cut], secret[cut:]+" after"
		// Two text items, the second with an escape so it takes the
		// decoding path.
		items, _ := json.Marshal(map[string]any{"result": map[string]any{"content": []map[string]string{
			{"type": "text", "text": a}, {"type": "text", "text": b + "\n\"quoted\""},
		}}})
		out := r.JSON(items)
		var res struct {
			Result struct{ Content []struct{ Type, Text string } }
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("cut %d: %v: %s", cut, err, out)
		}
		joined := ""
		for _, c := range res.Result.Content {
			if c.Type != "text" {
				t.Fatalf("cut %d: type rewritten: %s", cut, out)
			}
			joined += c.Text
		}
		if leaks(joined) || !strings.Contains(joined, "[REDACTED:GH]") ||
			!strings.HasPrefix(joined, "before ") || !strings.Contains(joined, " after\n\"quoted\"") {
			t.Fatalf("cut %d: joined text %q", cut, joined)
		}

		// Three structuredContent fields, nested, one named "type".
		c1, c2 := cut/2, cut
		sc, _ := json.Marshal(map[string]any{"structuredContent": map[string]any{
			"a": secret[:c1], "b": map[string]string{"type": secret[c1:c2]}, "c": []string{secret[c2:], "unrelated"}}})
		out = r.JSON(sc)
		if !json.Valid(out) || leaks(strings.ReplaceAll(string(out), `"`, "")) && leaks(joinValues(t, out)) {
			t.Fatalf("cut %d: structuredContent %s", cut, out)
		}
		if joinValues(t, out) == joinValues(t, sc) || !strings.Contains(string(out), `"unrelated"`) {
			t.Fatalf("cut %d: structuredContent not redacted or unrelated value changed: %s", cut, out)
		}
		if leaks(joinValues(t, out)) {
			t.Fatalf("cut %d: joined values of %s leak", cut, out)
		}
	}
	// Text items with more between them than "type": a client joins the
	// text all the same.
	for name, mid := range map[string]string{
		"annotations": `,"annotations":{"audience":["user"]}`,
		"_meta":       `,"_meta":{"id":"x"}`,
	} {
		for _, between := range []string{
			`{"type":"text","text":"%s"` + mid + `},{"type":"text","text":"%s"}`,
			`{"type":"text","text":"%s"},{"type":"image","data":"aGVsbG8=","mimeType":"image/png"},{"type":"text","text":"%s"}`,
			`{"type":"text","text":"%s"},{"type":"resource_link","uri":"file:///x","name":"x"},{"type":"text","text":"%s"}`,
			// A key a client decodes to "text".
			`{"type":"text","text":"%s"},{"type":"image","data":"aGVsbG8=","mimeType":"image/png"},{"type":"text","te\u0078t":"%s"}`,
		} {
			for _, cut := range []int{4, 12, 20} {
				msg := []byte(fmt.Sprintf(`{"result":{"content":[`+between+`]}}`, secret[:cut], secret[cut:]))
				out := r.JSON(msg)
				var res struct {
					Result struct{ Content []struct{ Text string } }
				}
				if err := json.Unmarshal(out, &res); err != nil {
					t.Fatalf("%s: %v: %s", name, err, out)
				}
				joined := ""
				for _, c := range res.Result.Content {
					joined += c.Text
				}
				if leaks(joined) {
					t.Errorf("%s, cut %d: the text items join to %q", name, cut, joined)
				}
			}
		}
	}
	// Two values that merely sit next to each other are left alone.
	plain := []byte(`{"content":[{"type":"text","text":"ghp_abcdefgh"},{"type":"text","text":"no secret"}]}`)
	if got := r.JSON(plain); !bytes.Equal(got, plain) {
		t.Fatalf("unrelated values rewritten: %s", got)
	}
}

// joinValues joins a message's string values in document order, as a
// reader concatenating fields would.
func joinValues(t *testing.T, msg []byte) string {
	t.Helper()
	var sb strings.Builder
	for _, l := range stringValues(msg) {
		sb.Write(l.text)
	}
	return sb.String()
}

// TestJSONStaysValid redacts JSON whose strings hold escapes right next to
// secrets that begin or end like an escape's tail ("n...", "...\\",
// "u0026..."), and checks the result is still valid JSON without the
// value.
func TestJSONStaysValid(t *testing.T) {
	secrets := []Secret{
		{Name: "N", Value: []byte("nABCDEFGHIJ")},
		{Name: "U", Value: []byte("u0026KLMNOPQ")},
		{Name: "B", Value: []byte(`RSTUVWXY\`)},
		{Name: "H", Value: []byte("0041zyxwvuts")},
	}
	r, err := New(secrets)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(13, 14))
	pieces := []string{"\n", "\\", "\"", "&", "<", "\u0001", "A", "x", " "}
	for iter := range 2000 {
		var sb strings.Builder
		for range 1 + rng.IntN(8) {
			if rng.IntN(3) == 0 {
				sb.Write(secrets[rng.IntN(len(secrets))].Value)
			} else {
				sb.WriteString(pieces[rng.IntN(len(pieces))])
			}
		}
		msg, _ := json.Marshal(map[string]string{"text": sb.String()})
		// Also \u escapes for ordinary characters, as some encoders write.
		if rng.IntN(2) == 0 {
			msg = bytes.ReplaceAll(msg, []byte("&"), []byte(`\u0026`))
			msg = bytes.ReplaceAll(msg, []byte("A"), []byte(`\u0041`))
		}
		out := r.JSON(msg)
		var got map[string]string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("iter %d: %s -> invalid %s: %v", iter, msg, out, err)
		}
		for _, s := range secrets {
			if strings.Contains(got["text"], string(s.Value)) {
				t.Fatalf("iter %d: %q survives in %q", iter, s.Value, got["text"])
			}
		}
	}
}

// FuzzUnquote holds the fast JSON string decoder to encoding/json.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"a\nb"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ud83dx"`, `"\ud83d\u0041"`, `"\/\b\f"`, "\"\xff\"", `"\u00e9\u0000"`, `"\q"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, lit []byte) {
		var want string
		werr := json.Unmarshal(lit, &want)
		if werr != nil || len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
			return
		}
		got, ok := unquote(lit)
		if !ok || string(got) != want {
			t.Fatalf("unquote(%q) = %q, %v; encoding/json %q", lit, got, ok, want)
		}
	})
}
