package redact

import (
	"bytes"
	"fmt"
	"sync/atomic"
)

// MinValueLen is the shortest secret value New accepts without
// Options.AllowShort.
const MinValueLen = 8

// Secret is a named secret value.
type Secret struct {
	Name  string
	Value []byte
}

// Options tunes NewOptions. The zero value is what New uses.
type Options struct {
	// AllowShort, if true, accepts values shorter than MinValueLen (the
	// configuration forced them). Empty values are still refused.
	AllowShort bool
}

// Redactor replaces secret values and their encodings. It is immutable and
// safe for concurrent use; each Writer is not.
type Redactor struct {
	a *automaton
	// needles[i] is replaced by repl[owner[i]].
	needles [][]byte
	owner   []int
	repl    [][]byte
	// folded is the Redactor of the forms in lower case (Folded), and
	// dotless that of the forms in lower case without dots (Host); each
	// made on first use.
	folded, dotless atomic.Pointer[Redactor]
}

// New returns a Redactor for secrets with the default Options.
func New(secrets []Secret) (*Redactor, error) {
	return NewOptions(secrets, Options{})
}

// NewOptions returns a Redactor for secrets. When two secrets share an
// encoded form, the earlier secret names the replacement.
func NewOptions(secrets []Secret, opts Options) (*Redactor, error) {
	r := &Redactor{}
	seen := map[string]bool{}
	for i, s := range secrets {
		if err := check(s, opts); err != nil {
			return nil, fmt.Errorf("checking secret %d (%q): %w", i, s.Name, err)
		}
		r.repl = append(r.repl, []byte("[REDACTED:"+s.Name+"]"))
		for _, f := range forms(bytes.Clone(s.Value)) {
			f = stripBreaks(f)
			if len(f) == 0 || seen[string(f)] {
				continue
			}
			seen[string(f)] = true
			r.needles = append(r.needles, f)
			r.owner = append(r.owner, i)
		}
	}
	r.a = build(r.needles)
	return r, nil
}

func check(s Secret, opts Options) error {
	switch {
	case s.Name == "":
		return ErrEmptyName
	case len(stripBreaks(s.Value)) == 0:
		return ErrEmptyValue
	case len(s.Value) < MinValueLen && !opts.AllowShort:
		return ErrShortValue
	}
	return nil
}

// MaxHold is the most bytes other than line breaks a Writer holds back
// between writes: the longest needle less one. Breaks inside a held-back
// prefix are held with it.
func (r *Redactor) MaxHold() int {
	return max(r.a.maxLen-1, 0)
}

// Bytes returns b with every secret form replaced. The result is a new
// slice; b is not modified.
func (r *Redactor) Bytes(b []byte) []byte {
	sc := scanner{r: r, out: make([]byte, 0, len(b)), best: -1}
	sc.feed(b)
	sc.finish()
	return sc.out
}

// String is Bytes for strings.
func (r *Redactor) String(s string) string {
	return string(r.Bytes([]byte(s)))
}

// stripBreaks returns v without CR and LF, which matching skips.
func stripBreaks(v []byte) []byte {
	if bytes.IndexByte(v, '\n') < 0 && bytes.IndexByte(v, '\r') < 0 {
		return v
	}
	out := make([]byte, 0, len(v))
	for _, c := range v {
		if !isBreak(c) {
			out = append(out, c)
		}
	}
	return out
}

// Needles returns copies of every form the Redactor looks for, line breaks
// removed, so that a caller can build a prefilter that must never miss
// one.
func (r *Redactor) Needles() [][]byte {
	out := make([][]byte, len(r.needles))
	for i, n := range r.needles {
		out[i] = bytes.Clone(n)
	}
	return out
}

// Folded redacts s as String does, but finds the forms in any ASCII
// case: for text that someone may have re-cased, a host name above all
// (DNS names are case-insensitive, and the egress proxy lower-cases
// them), where a value no longer matches as written. A value without
// lower-case letters (an AWS key id, upper-case hex) comes back from
// lower case exactly, and a mixed-case one nearly.
func (r *Redactor) Folded(s string) string {
	f := r.folded.Load()
	if f == nil {
		f = r.fold(false)
		r.folded.Store(f)
	}
	b := []byte(s)
	return replaceSpans(b, f.Spans(asciiLower(b)), nil)
}

// Host is Folded for a host name, dots skipped as well: a DNS label holds
// at most 63 bytes, so a longer value (a github_pat_ token, a JWT) can
// only be carried out in a name split into labels.
func (r *Redactor) Host(s string) string {
	f := r.dotless.Load()
	if f == nil {
		f = r.fold(true)
		r.dotless.Store(f)
	}
	b := []byte(s)
	// at[i] is the offset in s of the i-th byte that is no dot.
	compact, at := make([]byte, 0, len(b)), make([]int, 0, len(b))
	for i, c := range asciiLower(b) {
		if c != '.' {
			compact, at = append(compact, c), append(at, i)
		}
	}
	return replaceSpans(b, f.Spans(compact), at)
}

// replaceSpans replaces spans of b by their marks; with at, the spans are
// of a text whose i-th byte is b[at[i]].
func replaceSpans(b []byte, spans []Span, at []int) string {
	if len(spans) == 0 {
		return string(b)
	}
	out := make([]byte, 0, len(b))
	last := 0
	for _, sp := range spans {
		start, end := sp.Start, sp.End
		if at != nil {
			start, end = at[sp.Start], at[sp.End-1]+1
		}
		out = append(append(out, b[last:start]...), sp.Mark...)
		last = end
	}
	return string(append(out, b[last:]...))
}

// fold returns a Redactor of r's forms in lower case, without dots if
// dotless.
func (r *Redactor) fold(dotless bool) *Redactor {
	f := &Redactor{repl: r.repl}
	seen := map[string]bool{}
	for i, n := range r.needles {
		l := asciiLower(n)
		if dotless {
			l = bytes.ReplaceAll(l, []byte("."), nil)
		}
		if len(l) == 0 {
			continue
		}
		if seen[string(l)] {
			continue
		}
		seen[string(l)] = true
		f.needles = append(f.needles, l)
		f.owner = append(f.owner, r.owner[i])
	}
	f.a = build(f.needles)
	return f
}

// asciiLower returns a copy of b with A-Z in lower case: every other
// byte, and so every offset, stays.
func asciiLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}
