package redact

import (
	"bytes"
	"fmt"
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
