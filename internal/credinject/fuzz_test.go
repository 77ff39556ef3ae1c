package credinject

import (
	"bytes"
	"errors"
	"io"
	"testing"
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
			if bytes.Contains(out, []byte(foreign[:len(foreign)-1])) {
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
