package credinject

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"

	"mcpbox/internal/redact"
)

// chunky returns data in reads whose sizes cycle through sizes.
type chunky struct {
	data  []byte
	sizes []byte
	i     int
}

func (c *chunky) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(c.sizes) > 0 {
		n = int(c.sizes[c.i%len(c.sizes)])%64 + 1
		c.i++
	}
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

var errFuzzRefused = errors.New("refused")

// FuzzBodyScanner checks the streaming scanner against bytes.ReplaceAll on
// the whole body, for any split into reads: an own placeholder becomes the
// value; a foreign one fails the stream before any of its bytes are
// returned.
func FuzzBodyScanner(f *testing.F) {
	f.Add([]byte("a=ph_OWN0123456789&b=ph_OWN0123456789"), []byte{3, 7, 1})
	f.Add([]byte("x ph_OWN01234ph_OWN0123456789 y"), []byte{5})
	f.Add([]byte("lead ph_FOR0123456789 tail"), []byte{2, 9})
	f.Add([]byte("ph_FOR012345678ph_OWN0123456789"), []byte{1})
	f.Add([]byte("ph_FOR012345678ph_FOR0123456789"), []byte{15, 1})
	f.Fuzz(fuzzOne)
}

// fuzzOne is one FuzzBodyScanner case.
func fuzzOne(t *testing.T, data, sizes []byte) {
	const own, real, foreign = "ph_OWN0123456789", "RV_real987654321", "ph_FOR0123456789"
	{
		c := &cred{}
		bs := &bodyScanner{
			src:   io.NopCloser(&chunky{data: bytes.Clone(data), sizes: sizes}),
			chunk: make([]byte, 8),
			rules: []bodyRule{
				{pat: []byte(own), repl: []byte(real), cred: c},
				{pat: []byte(foreign), cred: &cred{}},
			},
			hold:   len(own) - 1,
			subbed: map[*cred]bool{},
			onSub:  func(*cred) {},
			onBad:  func(*cred) error { return errFuzzRefused },
		}
		var out []byte
		buf := make([]byte, 5)
		var err error
		for {
			var n int
			n, err = bs.Read(buf)
			out = append(out, buf[:n]...)
			if err != nil {
				break
			}
		}
		want := bytes.ReplaceAll(data, []byte(own), []byte(real))
		if bytes.Contains(data, []byte(foreign)) {
			if err != errFuzzRefused {
				t.Fatalf("foreign placeholder not refused: err %v", err)
			}
			if bytes.Contains(out, []byte(foreign)) {
				t.Fatalf("output before refusal holds the foreign placeholder: %q", out)
			}
			if !bytes.HasPrefix(want, out) {
				t.Fatalf("output before refusal %q is not a prefix of %q", out, want)
			}
			return
		}
		if err != io.EOF || !bytes.Equal(out, want) {
			t.Fatalf("got %q (%v), want %q", out, err, want)
		}
	}
}

// bigChunky is chunky with reads up to 2 KiB, so that the redactBody
// leaves its slow path as well as entering it.
type bigChunky struct{ chunky }

func (c *bigChunky) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(c.sizes) > 0 {
		n = int(c.sizes[c.i%len(c.sizes)])*8 + 1
		c.i++
	}
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// FuzzRedactBody checks the prefiltered response redaction against the
// redactor over the whole stream. The data is built from pieces (text,
// line breaks, the secrets' raw, hex, base64 and wrapped forms) chosen by
// the fuzzer, so forms land across reads and windows.
func FuzzRedactBody(f *testing.F) {
	secrets := []redact.Secret{{Name: "A", Value: []byte("ghp_Secret0123456789abcdEFGH")}, {Name: "B", Value: []byte("xoxb-another/secret+value==")}}
	red, err := redact.New(secrets)
	if err != nil {
		f.Fatal(err)
	}
	pf := newQgramFilter(red.Needles())
	if pf.step == 0 {
		f.Fatal("prefilter unusable for these secrets")
	}
	var pieces [][]byte
	for _, s := range secrets {
		b64 := base64.StdEncoding.EncodeToString(s.Value)
		pieces = append(pieces, s.Value, []byte(hex.EncodeToString(s.Value)), []byte(b64),
			[]byte(b64[:10]+"\n"+b64[10:]), []byte(url.QueryEscape(string(s.Value))), s.Value[:7])
	}
	pieces = append(pieces, []byte("\n"), []byte("\r\n"), []byte(strings.Repeat("lorem ipsum dolor ", 40)), []byte("x"))
	f.Add([]byte{0, 10, 1, 8, 2, 9, 3}, []byte{200, 1, 50})
	f.Add([]byte{8, 8, 8, 4, 8, 8, 8, 8, 0}, []byte{255})
	f.Add([]byte{9, 7, 11, 9, 9, 9, 9, 9, 1, 9}, []byte{3, 255, 7})
	f.Fuzz(func(t *testing.T, recipe, sizes []byte) {
		var data []byte
		for _, r := range recipe {
			data = append(data, pieces[int(r)%len(pieces)]...)
		}
		// Not ending in a form's beginning, which the body replaces past
		// a few bytes where Bytes leaves it (TestTruncatedEchoAtEndRedacted).
		data = append(data, " end"...)
		rb := newRedactBody(io.NopCloser(&bigChunky{chunky{data: bytes.Clone(data), sizes: sizes}}), red, pf, func() {})
		got, err := io.ReadAll(rb)
		if err != nil {
			t.Fatal(err)
		}
		want := red.Bytes(data)
		if !bytes.Equal(got, want) {
			t.Fatalf("prefiltered redaction differs\n got %q\nwant %q", got, want)
		}
		// Reads of a chunk or more take the in-place path.
		rb = newRedactBody(io.NopCloser(&bigChunky{chunky{data: bytes.Clone(data), sizes: sizes}}), red, pf, func() {})
		got = got[:0]
		p := make([]byte, 64<<10)
		for {
			n, err := rb.Read(p)
			got = append(got, p[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("prefiltered redaction into large reads differs\n got %q\nwant %q", got, want)
		}
	})
}

// FuzzHitRaw checks the prefilter on a text with line breaks (hitRaw)
// against the prefilter on the same text with the breaks removed (hit):
// the in-place path must find a form however breaks cut it. The text is
// built from pieces, with breaks put in at positions the fuzzer picks.
func FuzzHitRaw(f *testing.F) {
	secrets := []redact.Secret{{Name: "A", Value: []byte("ghp_Secret0123456789abcdEFGH")}}
	red, err := redact.New(secrets)
	if err != nil {
		f.Fatal(err)
	}
	pf := newQgramFilter(red.Needles())
	b64 := base64.StdEncoding.EncodeToString(secrets[0].Value)
	pieces := [][]byte{secrets[0].Value, []byte(hex.EncodeToString(secrets[0].Value)), []byte(b64),
		secrets[0].Value[:9], secrets[0].Value[9:], []byte("lorem ipsum "), []byte("g"), []byte("ghp_")}
	f.Add([]byte{5, 0, 5}, []byte{3, 20})
	f.Add([]byte{5, 3, 4, 5}, []byte{1, 1, 1, 200})
	f.Add([]byte{7, 2, 5, 1}, []byte{0, 7, 7, 255})
	f.Add([]byte{6, 6, 0}, []byte{12, 2, 2, 2, 2, 2, 2, 2})
	f.Fuzz(func(t *testing.T, recipe, breaks []byte) {
		var text []byte
		for _, r := range recipe {
			text = append(text, pieces[int(r)%len(pieces)]...)
		}
		// breaks: pairs of (gap, kind): LF, CR LF or CR after gap bytes.
		var w []byte
		for i := 0; i+1 < len(breaks) && len(text) > 0; i += 2 {
			n := min(int(breaks[i]), len(text))
			w = append(w, text[:n]...)
			text = text[n:]
			w = append(w, [][]byte{[]byte("\n"), []byte("\r\n"), []byte("\r")}[int(breaks[i+1])%3]...)
		}
		w = append(w, text...)
		st := appendWithout(nil, appendWithout(nil, w, '\n'), '\r')
		if got, want := pf.hitRaw(w), pf.hit(st); got != want {
			t.Fatalf("hitRaw(%q) = %v, hit of it without breaks = %v", w, got, want)
		}
	})
}

// FuzzWSRedact splits a stream of forms, text and breaks into messages
// (and each message into reads) and checks wsRedact: the messages sent,
// joined and without breaks, hold no form and never end in more than
// maxSplitLeak bytes of one; and where no boundary falls in a begun form,
// each message is what redacting it alone gives.
func FuzzWSRedact(f *testing.F) {
	secrets := []redact.Secret{{Name: "A", Value: []byte("ghp_Secret0123456789abcdEFGH")}, {Name: "B", Value: []byte("xoxb-another/secret+value==")}}
	red, err := redact.New(secrets)
	if err != nil {
		f.Fatal(err)
	}
	pf := newQgramFilter(red.Needles())
	var pieces [][]byte
	for _, s := range secrets {
		b64 := base64.StdEncoding.EncodeToString(s.Value)
		pieces = append(pieces, s.Value, []byte(hex.EncodeToString(s.Value)), []byte(b64), []byte(b64[:10]+"\n"+b64[10:]), s.Value[:7], s.Value[7:])
	}
	pieces = append(pieces, []byte("\n"), []byte("lorem ipsum dolor "), []byte("g"), []byte("x"))
	f.Add([]byte{0, 12, 1, 0, 3}, []byte{10, 30, 5}, []byte{3})
	f.Add([]byte{4, 5, 13, 4, 12, 5}, []byte{7, 21, 3, 3}, []byte{1, 2})
	f.Add([]byte{2, 8, 9, 6, 7}, []byte{25, 2, 40}, []byte{200})
	f.Fuzz(func(t *testing.T, recipe, cuts, sizes []byte) {
		var data []byte
		for _, r := range recipe {
			data = append(data, pieces[int(r)%len(pieces)]...)
		}
		var msgs [][]byte
		for _, c := range cuts {
			n := min(int(c), len(data))
			msgs, data = append(msgs, data[:n]), data[n:]
		}
		msgs = append(msgs, data)
		w := &wsRedact{rb: &redactBody{red: red, pf: pf}}
		var outs [][]byte
		clean := true // no boundary inside a begun form
		var sent []byte
		for _, m := range msgs {
			for rest, i := m, 0; len(rest) > 0; i++ {
				n := len(rest)
				if len(sizes) > 0 {
					n = min(n, int(sizes[i%len(sizes)])+1)
				}
				w.feed(rest[:n])
				rest = rest[n:]
			}
			w.end()
			outs = append(outs, bytes.Clone(w.rb.out.Bytes()))
			w.rb.out.Reset()
			// What went out ends in at most maxSplitLeak bytes of a form.
			if k := pf.partial(appendWithout(nil, appendWithout(nil, bytes.Join(outs, nil), '\n'), '\r')); k > maxSplitLeak {
				t.Fatalf("the messages sent end in %d bytes of a form: %q", k, outs)
			}
			sent = append(sent, m...)
			st := appendWithout(nil, appendWithout(nil, sent, '\n'), '\r')
			if pf.partial(st) > 0 {
				clean = false
			}
		}
		joined := appendWithout(nil, appendWithout(nil, bytes.Join(outs, nil), '\n'), '\r')
		for _, n := range red.Needles() {
			if bytes.Contains(joined, n) {
				t.Fatalf("form %q reached the client: %q", n, outs)
			}
		}
		if clean {
			for i, m := range msgs {
				if want := red.Bytes(m); !bytes.Equal(outs[i], want) {
					t.Fatalf("message %d: %q, redacted alone %q", i, outs[i], want)
				}
			}
		}
	})
}
