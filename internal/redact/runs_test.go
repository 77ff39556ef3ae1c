package redact

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestRuns: a host's cut-short or shifted echo of a value is replaced,
// wherever it lies in the text (before, only a cut at the very end of a
// body was caught); a run of fewer than a quarter of the value's secret
// bytes, and the part a placeholder shows, pass.
func TestRuns(t *testing.T) {
	value := "sk-live9f8e7d6c5b4a39281706f5e4d3c2b1a0ffee" // 43 bytes, 40 past "sk-"
	known := "sk-" + strings.Repeat("x", len(value)-3)
	r := NewRuns([]RunSecret{{Name: "API_KEY", Value: []byte(value), Known: []byte(known)}})
	const mark = "[REDACTED:API_KEY]"
	for _, tc := range []struct{ in, want string }{
		{`[{"title":"` + value[:40] + `","state":"open"}]`, `[{"title":"` + mark + `","state":"open"}]`},
		{"s=" + value[3:] + "\n", "s=" + mark + "\n"},
		{"s=" + value[:40] + "...", "s=" + mark + "..."},
		{"mid " + value[12:30] + " end", "mid " + mark + " end"},
		{"whole " + value, "whole " + mark},
		{"two " + value[:20] + " and " + value[25:], "two " + mark + " and " + mark},
		// A quarter of 40 secret bytes is 10: nine pass.
		{"short " + value[10:19] + ".", "short " + value[10:19] + "."},
		{"short " + value[10:20] + ".", "short " + mark + "."},
		// The prefix the placeholder shows is not the value's: sk- and
		// nine secret bytes pass.
		{value[:12] + "|", value[:12] + "|"},
		{known, known},
		{"", ""},
		{"nothing here at all, not a byte of it", "nothing here at all, not a byte of it"},
	} {
		if got := string(r.Bytes([]byte(tc.in))); got != tc.want {
			t.Errorf("Bytes(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
	if NewRuns([]RunSecret{{Name: "S", Value: []byte("abcde")}}) != nil {
		t.Error("a 5-byte value has runs: Redactor alone should match it (whole)")
	}
	var nilRuns *Runs
	if got := nilRuns.String("x"); got != "x" {
		t.Errorf("nil Runs: %q", got)
	}
}

// TestRunStream: however a stream is split, its output has the runs
// Bytes of the whole finds, as marks, and nothing it passes on holds a
// run (the bytes the reader knows at a run's start may pass before it).
func TestRunStream(t *testing.T) {
	value := []byte("ghp_0123456789abcdefghijABCDEFGHIJklmnopqrstuvwxyz")
	other := []byte("Zq9-Xw8-Vu7-Ts6-Rp5-Qo4")
	r := NewRuns([]RunSecret{{Name: "A", Value: value, Known: []byte("ghp_" + strings.Repeat("0", len(value)-4))}, {Name: "B", Value: other}})
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 300 {
		var text []byte
		for range rng.IntN(8) {
			text = append(text, bytes.Repeat([]byte{"ab \n"[rng.IntN(4)]}, rng.IntN(40))...)
			v := value
			if rng.IntN(2) == 0 {
				v = other
			}
			i := rng.IntN(len(v))
			j := i + rng.IntN(len(v)-i+1)
			text = append(text, v[i:j]...)
		}
		want := r.Bytes(text)
		s := r.Stream()
		var got []byte
		for rest := text; len(rest) > 0; {
			n := 1 + rng.IntN(min(len(rest), 30))
			got = append(got, s.Write(rest[:n])...)
			rest = rest[n:]
		}
		got = append(got, s.Close()...)
		if !bytes.Equal(r.Bytes(got), got) || bytes.Count(got, []byte("[REDACTED:")) != bytes.Count(want, []byte("[REDACTED:")) {
			t.Fatalf("iteration %d: stream\n %q\nBytes\n %q\nof %q", iter, got, want, text)
		}
		if bytes.Contains(got, value[10:30]) || bytes.Contains(got, other[3:20]) {
			t.Fatalf("iteration %d: a run passed: %q", iter, got)
		}
	}
	// An end no value holds passes at once (a streamed event is not held
	// back for the next); one that may begin a run waits for what follows.
	s := r.Stream()
	if got := s.Write([]byte("data: {}\n\n")); string(got) != "data: {}\n\n" {
		t.Errorf("an event ending in no value's bytes: passed %q", got)
	}
	// Nor an end the reader knows (a PEM's line break, a kept prefix).
	pem := NewRuns([]RunSecret{{Name: "K", Value: []byte("-----BEGIN KEY-----\nMIIEowIBAAKCAQEAx\n-----END KEY-----\n"),
		Known: []byte("-----BEGIN KEY-----\nxxxxxxxxxxxxxxxxx\n-----END KEY-----\n")}}).Stream()
	if got := pem.Write([]byte("event: message\ndata: {}\n\n")); string(got) != "event: message\ndata: {}\n\n" {
		t.Errorf("an event ending in a known line break: passed %q", got)
	}
	// value[:12] is ghp_0, which the reader knows, and 7 secret bytes.
	if got := s.Write(append([]byte("next "), value[:12]...)); string(got) != "next ghp_0" {
		t.Errorf("a start of a run: passed %q, want its secret bytes held", got)
	}
	if got := string(s.Write(value[12:30])) + string(s.Close()); got != "[REDACTED:A]" {
		t.Errorf("the run's end: %q", got)
	}
}
