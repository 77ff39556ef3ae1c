package redact

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkRunStream: the cost of looking for runs of an injected value in
// a response body from its host, in 32 KiB pieces (the proxy's reads).
func BenchmarkRunStream(b *testing.B) {
	r := NewRuns([]RunSecret{{Name: "A", Value: []byte("ghp_0123456789abcdefghijABCDEFGHIJklmnopqrstuvwxyz")}})
	text := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range text {
		text[i] = byte(' ' + rng.IntN(95))
	}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		s := r.Stream()
		for i := 0; i < len(text); i += 32 << 10 {
			s.Write(text[i : i+32<<10])
		}
		s.Close()
	}
}

// BenchmarkRunStreamLongEcho: a 4 KiB value echoed over and over beside
// a short one (whose step is small): each diagonal is extended once, not
// at every step (it cost about 200 times as much before).
func BenchmarkRunStreamLongEcho(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	long := make([]byte, 4096)
	for i := range long {
		long[i] = byte('A' + rng.IntN(26))
	}
	r := NewRuns([]RunSecret{{Name: "PEM", Value: long}, {Name: "T", Value: []byte("ghp_0123456789abcdefghijABCDEFGHIJklmnop")}})
	var text []byte
	for len(text) < 1<<20 {
		text = append(text, long...)
	}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		s := r.Stream()
		for i := 0; i < len(text); i += 32 << 10 {
			s.Write(text[i:min(len(text), i+32<<10)])
		}
		s.Close()
	}
}
