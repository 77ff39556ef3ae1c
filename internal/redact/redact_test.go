package redact

import (
	"bytes"
	"encoding/hex"
	"errors"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestLeftmostLongest(t *testing.T) {
	secrets := []Secret{
		{Name: "A", Value: []byte("abcdefgh")},
		{Name: "B", Value: []byte("abcdefghij")},
		{Name: "C", Value: []byte("cdefghijklmn")},
		{Name: "D", Value: []byte("zzzzzzzz")},
	}
	r, err := New(secrets)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, in, want string }{
		{"none", "nothing to see here", "nothing to see here"},
		{"empty", "", ""},
		{"exact", "abcdefgh", "[REDACTED:A]"},
		{"longest at same start", "xxabcdefghijyy", "xx[REDACTED:B]yy"},
		{"leftmost beats longer", "xxabcdefghijklmnyy", "xx[REDACTED:B]klmnyy"},
		{"later start only", "xxcdefghijklmnyy", "xx[REDACTED:C]yy"},
		{"prefix of longer, cut", "abcdefghi", "[REDACTED:A]i"},
		{"repeated run", "zzzzzzzzzzzzzzzzz", "[REDACTED:D][REDACTED:D]z"},
		{"adjacent", "abcdefghzzzzzzzz", "[REDACTED:A][REDACTED:D]"},
		{"partial", "abcdefg zzzzzzz", "abcdefg zzzzzzz"},
		{"hex", "id=6162636465666768", "id=[REDACTED:A]"},
		{"base64", "YWJjZGVmZ2g=", "[REDACTED:A]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.String(tt.in); got != tt.want {
				t.Errorf("Bytes(%q) = %q, want %q", tt.in, got, tt.want)
			}
			var b bytes.Buffer
			w := r.Writer(&b)
			for i := range len(tt.in) {
				if _, err := w.Write([]byte{tt.in[i]}); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("Writer byte by byte: %q, want %q", b.String(), tt.want)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name   string
		s      Secret
		opts   Options
		target error
	}{
		{"short", Secret{"X", []byte("1234567")}, Options{}, ErrShortValue},
		{"short forced", Secret{"X", []byte("1234567")}, Options{AllowShort: true}, nil},
		{"empty value", Secret{"X", nil}, Options{AllowShort: true}, ErrEmptyValue},
		{"empty name", Secret{"", []byte("12345678")}, Options{}, ErrEmptyName},
		{"ok", Secret{"X", []byte("12345678")}, Options{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewOptions([]Secret{tt.s}, tt.opts)
			if !errors.Is(err, tt.target) || (tt.target == nil) != (err == nil) {
				t.Errorf("err = %v, want %v", err, tt.target)
			}
		})
	}
}

func TestNoSecrets(t *testing.T) {
	r, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.String("abc"); got != "abc" {
		t.Errorf("got %q", got)
	}
}

// TestEveryChunking splits inputs at every pair of cut points and compares
// the Writer with Bytes and with the naive reference.
func TestEveryChunking(t *testing.T) {
	secrets := []Secret{
		{Name: "T", Value: []byte("tok-ABCDEFGH")},
		{Name: "U", Value: []byte("ABCDEFGH-xyz")},
	}
	r, err := New(secrets)
	if err != nil {
		t.Fatal(err)
	}
	inputs := []string{
		"pre tok-ABCDEFGH-xyz post",
		"tok-ABCDEFGtok-ABCDEFGH",
		"dG9rLUFCQ0RFRkdI and 746f6b2d4142434445464748",
		"ABCDEFGH-xyABCDEFGH-xyz",
	}
	for _, in := range inputs {
		want := naive(r, []byte(in))
		if got := r.Bytes([]byte(in)); !bytes.Equal(got, want) {
			t.Errorf("Bytes(%q) = %q, naive %q", in, got, want)
		}
		for i := 0; i <= len(in); i++ {
			for j := i; j <= len(in); j++ {
				var b bytes.Buffer
				w := r.Writer(&b)
				for _, part := range []string{in[:i], in[i:j], in[j:]} {
					w.Write([]byte(part))
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(b.Bytes(), want) {
					t.Fatalf("cuts %d,%d of %q: %q, want %q", i, j, in, b.Bytes(), want)
				}
			}
		}
	}
}

func TestWriterHoldBack(t *testing.T) {
	r, err := New([]Secret{{Name: "T", Value: []byte("0123456789")}})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	w := r.Writer(&b)
	in := strings.Repeat("q", 1000) + "012345"
	w.Write([]byte(in))
	if held := len(in) - b.Len(); held > r.MaxHold() || held != 6 {
		t.Errorf("held back %d bytes, want 6 (MaxHold %d)", held, r.MaxHold())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if b.String() != in {
		t.Errorf("after Close: %q", b.String())
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("boom") }

func TestWriterError(t *testing.T) {
	r, _ := New([]Secret{{Name: "T", Value: []byte("0123456789")}})
	w := r.Writer(failWriter{})
	if _, err := w.Write([]byte("hello")); err == nil {
		t.Fatal("no error from failing writer")
	}
	if _, err := w.Write([]byte("x")); err == nil {
		t.Fatal("error not sticky")
	}
}

// TestImports keeps the package plain data (STYLE 12).
func TestImports(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		pf, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range pf.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if p == "net" || strings.HasPrefix(p, "net/") || strings.HasPrefix(p, "golang.org/x/sys") || p == "syscall" || p == "os" {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}

// TestSpans: the text between the spans plus their marks is Bytes.
func TestSpans(t *testing.T) {
	r, err := New([]Secret{{Name: "A", Value: []byte("sk-live-0123456789")}, {Name: "B", Value: []byte("0123456789-tail")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{
		"", "none here", "x sk-live-0123456789 y", "sk-live-0123456789-tail and 0123456789-tail",
		"sk-live-01234\n56789!", "c2stbGl2ZS0wMTIzNDU2Nzg5 hex 736b2d6c6976652d30313233343536373839",
	} {
		b := []byte(in)
		var got []byte
		pos := 0
		spans := r.Spans(b)
		for _, s := range spans {
			if s.Start < pos || s.End <= s.Start || s.End > len(b) {
				t.Fatalf("%q: spans %+v out of order", in, spans)
			}
			got = append(append(got, b[pos:s.Start]...), s.Mark...)
			pos = s.End
		}
		got = append(got, b[pos:]...)
		if want := r.Bytes(b); string(got) != string(want) {
			t.Errorf("%q: spans give %q, Bytes %q", in, got, want)
		}
		if n := strings.Count(string(r.Bytes(b)), "[REDACTED:"); n != len(spans) {
			t.Errorf("%q: %d spans, %d marks", in, len(spans), n)
		}
	}
}

// Folded finds a value however a peer re-cased it (a host name the egress
// proxy lower-cased), keeps the rest as written, and leaves alone what
// holds none.
func TestFolded(t *testing.T) {
	r, err := New([]Secret{{Name: "AWS", Value: []byte("AKIAZ7Q3XR5TW2PL9MVK")}, {Name: "TOK", Value: []byte("zq7Kp2Lm9Xv4Rt8Wn3Yb6Hc1")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{"akiaz7q3xr5tw2pl9mvk.evil.test", "[REDACTED:AWS].evil.test"},
		{"AKIAZ7Q3XR5TW2PL9MVK.Evil.Test", "[REDACTED:AWS].Evil.Test"},
		{"ZQ7KP2LM9XV4RT8WN3YB6HC1.example.com:443", "[REDACTED:TOK].example.com:443"},
		{"no rule allows é-zq7kp2lm9xv4rt8wn3yb6hc1.example.com:443", "no rule allows é-[REDACTED:TOK].example.com:443"},
		// A lower-cased hex form of the value.
		{strings.ToLower(hex.EncodeToString([]byte("AKIAZ7Q3XR5TW2PL9MVK"))) + ".evil.test", "[REDACTED:AWS].evil.test"},
		{"api.example.com", "api.example.com"},
	} {
		if got := r.Folded(tc.in); got != tc.want {
			t.Errorf("Folded(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Host finds a value carried in a host name split into labels (a label
// holds at most 63 bytes) in any case, and one with dots of its own.
func TestHost(t *testing.T) {
	const pat = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV"
	const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlMDEyMzQ1Njc4OQ"
	r, err := New([]Secret{{Name: "PAT", Value: []byte(pat)}, {Name: "JWT", Value: []byte(jwt)}})
	if err != nil {
		t.Fatal(err)
	}
	split := strings.ToLower(pat[:40] + "." + pat[40:] + ".evil.test")
	for _, tc := range []struct{ in, want string }{
		{split, "[REDACTED:PAT].evil.test"},
		{"x." + strings.ToLower(jwt) + ".evil.test", "x.[REDACTED:JWT].evil.test"},
		{"api.example.com", "api.example.com"},
	} {
		if got := r.Host(tc.in); got != tc.want {
			t.Errorf("Host(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := r.Folded(split); strings.Contains(got, "REDACTED") {
		t.Errorf("Folded caught the split name (the test's premise is wrong): %q", got)
	}
}

// A value with characters past ASCII, as writers that write ASCII only
// write it inside a JSON string: Python's json.dumps (lower-case hex),
// .NET's System.Text.Json (upper case, with " as \u0022), and past U+FFFF
// as a surrogate pair. (The forms are as those writers print them.)
func TestASCIIOnlyJSONForms(t *testing.T) {
	for _, tc := range []struct{ value, written string }{
		{"Pässwörd-0123456789", `P\u00e4ssw\u00f6rd-0123456789`},
		{"Pässwörd-0123456789", `P\u00E4ssw\u00F6rd-0123456789`},
		{`Grüße"+key-0123`, `Gr\u00FC\u00DFe\u0022\u002Bkey-0123`},
		{"key🔑-0123456789", `key\ud83d\udd11-0123456789`},
	} {
		r, err := New([]Secret{{Name: "S", Value: []byte(tc.value)}})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.String(`{"password":"` + tc.written + `"}`); got != `{"password":"[REDACTED:S]"}` {
			t.Errorf("%q written %s: %s", tc.value, tc.written, got)
		}
	}
}
