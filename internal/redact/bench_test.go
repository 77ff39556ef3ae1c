package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
)

// benchInput is 1 MiB of printable text (letters, digits, base64 and JSON
// punctuation, so the automaton leaves the root often) with one secret
// every 64 KiB.
func benchInput(secrets []Secret) []byte {
	rng := rand.New(rand.NewPCG(5, 6))
	const alpha = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 {}\":,./+=\n"
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = alpha[rng.IntN(len(alpha))]
	}
	for i := 0; len(secrets) > 0 && i+64 < len(b); i += 64 << 10 {
		copy(b[i:], secrets[rng.IntN(len(secrets))].Value)
	}
	return b
}

func benchSecrets(n int) []Secret {
	rng := rand.New(rand.NewPCG(7, 8))
	const alpha = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"
	s := make([]Secret, n)
	for i := range s {
		v := make([]byte, 24+rng.IntN(24))
		for j := range v {
			v[j] = alpha[rng.IntN(len(alpha))]
		}
		s[i] = Secret{Name: fmt.Sprintf("S%d", i), Value: v}
	}
	return s
}

func BenchmarkBytes(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			secrets := benchSecrets(n)
			r, err := New(secrets)
			if err != nil {
				b.Fatal(err)
			}
			in := benchInput(secrets)
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				r.Bytes(in)
			}
		})
	}
}

func BenchmarkWriter(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			secrets := benchSecrets(n)
			r, err := New(secrets)
			if err != nil {
				b.Fatal(err)
			}
			in := benchInput(secrets)
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				w := r.Writer(io.Discard)
				for p := in; len(p) > 0; p = p[min(4096, len(p)):] {
					w.Write(p[:min(4096, len(p))])
				}
				w.Close()
			}
		})
	}
}

func BenchmarkNew(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			secrets := benchSecrets(n)
			for b.Loop() {
				if _, err := New(secrets); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDetect: the credential rules over 1 MiB of ordinary JSON text
// (the worst case: nothing to find, everything to scan).
func BenchmarkDetect(b *testing.B) {
	line := `{"type":"text","text":"func main() { fmt.Println(\"hello, world\") } // ghost of a chance; sk is not a key"},`
	var buf bytes.Buffer
	for buf.Len() < 1<<20 {
		buf.WriteString(line)
	}
	b.SetBytes(int64(buf.Len()))
	for b.Loop() {
		if f := Detect(buf.Bytes()); len(f) != 0 {
			b.Fatal(f)
		}
	}
}

// BenchmarkJSON redacts a 1 MiB tool result of 256 text items (one secret
// every 64 KiB) as the gateway's filter does.
func BenchmarkJSON(b *testing.B) {
	secrets := benchSecrets(100)
	r, err := New(secrets)
	if err != nil {
		b.Fatal(err)
	}
	text := benchInput(secrets)
	var items []map[string]string
	for i := 0; i < len(text); i += 4 << 10 {
		items = append(items, map[string]string{"type": "text", "text": string(text[i:min(i+4<<10, len(text))])})
	}
	msg, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"content": items}})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		r.JSON(msg)
	}
}
