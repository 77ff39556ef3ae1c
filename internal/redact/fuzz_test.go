package redact

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// naive is the reference redactor: the input without line breaks is
// searched for every needle with bytes.Index; the leftmost, then longest,
// match is replaced in the input from its first byte to its last, breaks
// inside it included.
func naive(r *Redactor, b []byte) []byte {
	var out []byte
	for {
		var flat []byte
		var at []int // at[k]: index in b of flat[k]
		for i, c := range b {
			if c != '\n' && c != '\r' {
				flat = append(flat, c)
				at = append(at, i)
			}
		}
		best, bestLen, who := -1, 0, -1
		for i, nd := range r.needles {
			j := bytes.Index(flat, nd)
			if j < 0 {
				continue
			}
			if best < 0 || j < best || (j == best && len(nd) > bestLen) {
				best, bestLen, who = j, len(nd), i
			}
		}
		if best < 0 {
			return append(out, b...)
		}
		from, to := at[best], at[best+bestLen-1]+1
		out = append(out, b[:from]...)
		out = append(out, r.repl[r.owner[who]]...)
		b = b[to:]
	}
}

// FuzzWriter compares the Writer under random chunking, and Bytes, with
// the naive reference. Secrets come from a small alphabet so that they
// overlap and occur often.
func FuzzWriter(f *testing.F) {
	f.Add([]byte("abcabcab|bcabcabc|"), []byte("xxabcabcabcabcabcxxYWJjYWJj"), uint64(1))
	f.Add([]byte("aaaa|aaab|"), []byte("aaaaaaaabaaaab616161616161"), uint64(7))
	f.Add([]byte("a"), []byte("a"), uint64(0))
	f.Add([]byte("abcdefgh|ab\ncd|"), []byte("xxabc\r\ndefghxxa\nb\ncd\n"), uint64(3))
	f.Fuzz(func(t *testing.T, spec, input []byte, seed uint64) {
		var secrets []Secret
		for i, v := range bytes.Split(spec, []byte("|")) {
			if len(stripBreaks(v)) == 0 || len(v) > 40 || len(secrets) == 8 {
				continue
			}
			secrets = append(secrets, Secret{Name: string(rune('A' + i)), Value: v})
		}
		if len(input) > 4096 {
			input = input[:4096]
		}
		r, err := NewOptions(secrets, Options{AllowShort: true})
		if err != nil {
			t.Fatal(err)
		}
		want := naive(r, input)
		if got := r.Bytes(input); !bytes.Equal(got, want) {
			t.Fatalf("Bytes(%q) = %q, naive %q", input, got, want)
		}
		rng := rand.New(rand.NewPCG(seed, 0))
		var out bytes.Buffer
		w := r.Writer(&out)
		for rest := input; len(rest) > 0; {
			n := min(rng.IntN(r.MaxHold()+3), len(rest))
			if _, err := w.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("Writer(%q, seed %d) = %q, naive %q", input, seed, out.Bytes(), want)
		}
	})
}

// TestRandomAgainstNaive is a bounded, deterministic run of the fuzz
// comparison over generated secret sets and inputs.
func TestRandomAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const alpha = "abAB01=+/%\n"
	word := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = alpha[rng.IntN(len(alpha))]
		}
		return b
	}
	for iter := range 300 {
		var secrets []Secret
		for i := range 1 + rng.IntN(5) {
			v := word(1 + rng.IntN(10))
			if len(stripBreaks(v)) == 0 {
				continue
			}
			secrets = append(secrets, Secret{Name: string(rune('A' + i)), Value: v})
		}
		if len(secrets) == 0 {
			continue
		}
		r, err := NewOptions(secrets, Options{AllowShort: true})
		if err != nil {
			t.Fatal(err)
		}
		// Build input from needles and noise so matches overlap.
		var in []byte
		for range rng.IntN(30) {
			if rng.IntN(2) == 0 {
				nd := r.needles[rng.IntN(len(r.needles))]
				// Wrap some over lines, as MIME base64 and PEM are.
				k := rng.IntN(len(nd) + 1)
				in = append(in, nd[:k]...)
				if rng.IntN(2) == 0 {
					in = append(in, "\r\n"[rng.IntN(2):]...)
				}
				in = append(in, nd[k:]...)
			} else {
				in = append(in, word(rng.IntN(4))...)
			}
		}
		want := naive(r, in)
		if got := r.Bytes(in); !bytes.Equal(got, want) {
			t.Fatalf("iter %d: Bytes(%q) = %q, naive %q", iter, in, got, want)
		}
		var out bytes.Buffer
		w := r.Writer(&out)
		for rest := in; len(rest) > 0; {
			n := min(1+rng.IntN(8), len(rest))
			w.Write(rest[:n])
			rest = rest[n:]
		}
		w.Close()
		if !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("iter %d: Writer(%q) = %q, naive %q", iter, in, out.Bytes(), want)
		}
	}
}
