package redact

import (
	"cmp"
	"slices"
)

// RunSecret is a value whose cut-short or shifted echoes Runs replaces.
type RunSecret struct {
	Name  string
	Value []byte
	// Known is what the reader already knows of Value, byte for byte (a
	// placeholder of the same length that keeps its prefix); nil if
	// nothing. Bytes equal in both do not count as the value's.
	Known []byte
}

// Runs replaces runs of a value's own bytes — any stretch of the text
// equal to a stretch of the value — that hold at least a quarter of its
// secret bytes (at least minRunSecret, at most maxRunSecret of them), with
// [REDACTED:NAME].
// Redactor catches a value whole, in its encoded forms; Runs catches what
// a host does to a value it stores or quotes: cut it short, drop its
// start, show a middle slice. A reader that gets a shorter run learns it,
// but no more than that at the start and at the end each, and must guess
// the rest. Runs looks at raw bytes only, line breaks
// included, and is plain data like the rest of the package.
type Runs struct {
	secrets []runSecret
	at      map[uint32][]gramRef // the value offsets of each of its grams
	bits    []uint64             // a filter of at's keys
	step    int                  // every run found holds a gram at a multiple of step
}

type runSecret struct {
	value []byte
	// secret[i] counts value[:i]'s bytes that differ from Known.
	secret []int
	min    int // the fewest secret bytes a run must hold
	mark   []byte
	at     [256][]int // the offsets of each byte in value
}

type gramRef struct {
	secret, off int
}

const (
	runGram     = 4
	runGramBits = 16
	// minRunSecret is the fewest secret bytes a run must hold: fewer
	// appear in ordinary text by chance.
	minRunSecret = 6
	// memoRun is the length past which spans remembers a diagonal it
	// extended.
	memoRun = 64
	// maxRunSecret caps a long value's quarter: a quarter of a PEM key
	// holds a whole CRT exponent, which factors the modulus. Sixteen
	// random bytes of a key or token do not appear by chance.
	maxRunSecret = 16
)

// NewRuns returns the Runs of secrets; nil if none has a run to find (a
// value of fewer secret bytes than minRunSecret is left to Redactor,
// which matches it whole).
func NewRuns(secrets []RunSecret) *Runs {
	r := &Runs{at: map[uint32][]gramRef{}, bits: make([]uint64, 1<<runGramBits/64)}
	for _, s := range secrets {
		rs := runSecret{value: s.Value, secret: make([]int, len(s.Value)+1), mark: []byte("[REDACTED:" + s.Name + "]")}
		for i, c := range s.Value {
			rs.secret[i+1] = rs.secret[i]
			if len(s.Known) != len(s.Value) || s.Known[i] != c {
				rs.secret[i+1]++
			}
		}
		m := rs.secret[len(s.Value)]
		rs.min = min(max(minRunSecret, (m+3)/4), maxRunSecret)
		if m < rs.min || len(s.Value) < runGram {
			continue
		}
		for off, c := range s.Value {
			rs.at[c] = append(rs.at[c], off)
		}
		for off := 0; off+runGram <= len(s.Value); off++ {
			g := runGramOf(s.Value[off:])
			h := runGramHash(g)
			r.bits[h/64] |= 1 << (h % 64)
			r.at[g] = append(r.at[g], gramRef{len(r.secrets), off})
		}
		// A run holds at least min bytes, so a gram at a multiple of step.
		if st := rs.min - runGram + 1; r.step == 0 || st < r.step {
			r.step = st
		}
		r.secrets = append(r.secrets, rs)
	}
	if len(r.secrets) == 0 {
		return nil
	}
	return r
}

func runGramOf(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func runGramHash(g uint32) uint32 { return (g * 2654435761) >> (32 - runGramBits) }

// runSpan is a run of secret's value at text[start:end].
type runSpan struct{ start, end, secret int }

// spans returns the runs in text, in order, overlapping ones merged.
func (r *Runs) spans(text []byte) []runSpan {
	var out []runSpan
	// done is where each diagonal (a secret, and text's offset less the
	// value's) was extended to: a later gram on it is in that run already
	// (without it, a long value echoed over and over cost its length at
	// every step).
	var done map[[2]int]int
	for j := 0; j+runGram <= len(text); j += r.step {
		g := runGramOf(text[j:])
		if h := runGramHash(g); r.bits[h/64]&(1<<(h%64)) == 0 {
			continue
		}
		for _, ref := range r.at[g] {
			diag := [2]int{ref.secret, j - ref.off}
			if e, ok := done[diag]; done != nil && ok && j+runGram <= e {
				continue
			}
			s := &r.secrets[ref.secret]
			a, vo := j, ref.off
			for a > 0 && vo > 0 && text[a-1] == s.value[vo-1] {
				a, vo = a-1, vo-1
			}
			e, ve := j+runGram, ref.off+runGram
			for e < len(text) && ve < len(s.value) && text[e] == s.value[ve] {
				e, ve = e+1, ve+1
			}
			if e-a > memoRun { // a short one costs less to extend again
				if done == nil {
					done = map[[2]int]int{}
				}
				done[diag] = e
			}
			if s.secret[ve]-s.secret[vo] >= s.min {
				out = append(out, runSpan{a, e, ref.secret})
			}
		}
	}
	// Stable marks: where runs of two secrets meet, the one that starts
	// first names the mark, then the first secret.
	slices.SortFunc(out, func(x, y runSpan) int { return cmp.Or(x.start-y.start, x.secret-y.secret) })
	merged := out[:0]
	for _, s := range out {
		if n := len(merged); n > 0 && s.start < merged[n-1].end {
			merged[n-1].end = max(merged[n-1].end, s.end)
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

// tail is the length of the longest suffix of text that is a stretch of
// a value: what follows may make it a run. Its first bytes the reader
// knows (Known) are not counted: a run that goes on from them holds as
// many secret bytes without them, and a stream whose values hold a line
// break would otherwise hold back every event's closing blank line.
func (r *Runs) tail(text []byte) int {
	if len(text) == 0 {
		return 0
	}
	end := len(text) - 1
	best := 0
	for i := range r.secrets {
		s := &r.secrets[i]
		for _, o := range s.at[text[end]] {
			k := 1
			for k <= min(o, end) && text[end-k] == s.value[o-k] {
				k++
			}
			// text[end-k+1:] is value[o-k+1 : o+1]; drop its known start.
			for k > 0 && s.secret[o-k+2] == s.secret[o-k+1] {
				k--
			}
			best = max(best, k)
		}
	}
	return best
}

// replace appends text with spans replaced by their marks to dst.
func (r *Runs) replace(dst, text []byte, spans []runSpan) []byte {
	pos := 0
	for _, s := range spans {
		dst = append(append(dst, text[pos:s.start]...), r.secrets[s.secret].mark...)
		pos = s.end
	}
	return append(dst, text[pos:]...)
}

// Bytes returns b with every run replaced; b itself if it has none. A
// nil Runs returns b.
func (r *Runs) Bytes(b []byte) []byte {
	if r == nil {
		return b
	}
	spans := r.spans(b)
	if len(spans) == 0 {
		return b
	}
	return r.replace(make([]byte, 0, len(b)), b, spans)
}

// String is Bytes for strings.
func (r *Runs) String(s string) string {
	if r == nil {
		return s
	}
	return string(r.Bytes([]byte(s)))
}

// RunStream replaces runs in a stream split into any pieces; no run is
// left in its output, which is Bytes of the whole stream but for bytes
// the reader knows (Known) at a run's start, which may pass before its
// mark. It holds back only the end of what it was given that is a
// stretch of a value's secret bytes (a run may go on from it), and so
// never an end that no value holds, as a streamed event's "\n\n".
type RunStream struct {
	r    *Runs
	buf  []byte // the bytes held, then the piece written
	held int
	out  []byte
}

// Stream starts a RunStream; a nil Runs passes everything at once.
func (r *Runs) Stream() *RunStream { return &RunStream{r: r} }

// Write takes the next piece and returns what is ready to pass on, valid
// until the next call; it may be p itself.
func (s *RunStream) Write(p []byte) []byte {
	if s.r == nil {
		return p
	}
	if s.held == 0 {
		// Nothing held and no run in p, a bulk download's usual piece:
		// passed on in place, but for its tail.
		if cut := len(p) - s.r.tail(p); len(s.r.spans(p)) == 0 {
			s.buf = append(s.buf[:0], p[cut:]...)
			s.held = len(s.buf)
			return p[:cut]
		}
	}
	s.buf = append(s.buf[:s.held], p...)
	// A run that reaches past the cut is held whole: it may end in the
	// next piece. (A stretch shorter than a run that reaches the end of
	// buf begins at the cut, but for the bytes the reader knows.)
	cut := len(s.buf) - s.r.tail(s.buf)
	if cut == 0 {
		s.held = len(s.buf)
		return nil
	}
	spans := s.r.spans(s.buf)
	i := 0
	for ; i < len(spans) && spans[i].start < cut; i++ {
		if spans[i].end > cut {
			cut = spans[i].start
			break
		}
	}
	s.out = s.r.replace(s.out[:0], s.buf[:cut], spans[:i])
	s.held = copy(s.buf, s.buf[cut:])
	return s.out
}

// Close returns the rest of the stream.
func (s *RunStream) Close() []byte {
	if s.r == nil {
		return nil
	}
	out := s.r.Bytes(s.buf[:s.held])
	s.buf, s.held = nil, 0
	return out
}
