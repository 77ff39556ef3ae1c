package credinject

import (
	"bytes"
	"fmt"
	"io"

	"mcpbox/internal/egress"
	"mcpbox/internal/redact"
)

// bodyScanner streams a request body: placeholders it may substitute
// become their values, any other placeholder fails the read (which aborts
// the request before that placeholder is sent). It holds back at most the
// longest placeholder less one byte, so one split across reads is caught.
type bodyScanner struct {
	src     io.ReadCloser
	rules   []bodyRule
	hold    int
	pending []byte // read, scanned, not yet returned
	ready   int    // pending[:ready] may be returned
	eof     bool
	err     error
	chunk   []byte
	onSub   func(*cred) // first substitution per credential
	onBad   func(*cred) error
	subbed  map[*cred]bool
}

type bodyRule struct {
	pat, repl []byte // repl nil: refuse
	cred      *cred
}

func (b *bodyScanner) Read(p []byte) (int, error) {
	for b.ready == 0 {
		if b.err != nil {
			return 0, b.err
		}
		if b.eof {
			if len(b.pending) == 0 {
				return 0, io.EOF
			}
			b.ready = len(b.pending)
			break
		}
		n, err := b.src.Read(b.chunk)
		b.pending = append(b.pending, b.chunk[:n]...)
		if err == io.EOF {
			b.eof = true
		} else if err != nil {
			b.err = err
		}
		if serr := b.scan(); serr != nil {
			b.err, b.pending, b.ready = serr, nil, 0
			return 0, serr
		}
		if !b.eof {
			b.ready = max(len(b.pending)-b.hold, 0)
		}
	}
	n := copy(p, b.pending[:b.ready])
	b.pending = b.pending[n:]
	b.ready -= n
	if len(b.pending) == 0 {
		b.pending = b.pending[:0:0]
	}
	return n, nil
}

// scan substitutes or refuses every placeholder wholly inside pending.
func (b *bodyScanner) scan() error {
	for _, r := range b.rules {
		for off := 0; ; {
			i := bytes.Index(b.pending[off:], r.pat)
			if i < 0 {
				break
			}
			if r.repl == nil {
				return b.onBad(r.cred)
			}
			copy(b.pending[off+i:], r.repl) // same length
			if !b.subbed[r.cred] {
				b.subbed[r.cred] = true
				b.onSub(r.cred)
			}
			off += i + len(r.repl)
		}
	}
	return nil
}

func (b *bodyScanner) Close() error { return b.src.Close() }

// wrapBody puts a bodyScanner around r's body for a request to t.
func (s *Set) wrapBody(body io.ReadCloser, t egress.Target, own func(*cred) bool) io.ReadCloser {
	bs := &bodyScanner{src: body, chunk: make([]byte, 32<<10), subbed: map[*cred]bool{}}
	for _, n := range s.needle {
		r := bodyRule{pat: []byte(n.placeholder), cred: n.cred}
		if own(n.cred) {
			if !n.cred.Body {
				continue // left as is: no value added
			}
			r.repl = []byte(n.real)
		}
		bs.rules = append(bs.rules, r)
		bs.hold = max(bs.hold, len(r.pat)-1)
	}
	if len(bs.rules) == 0 {
		return body
	}
	bs.onSub = func(c *cred) {
		s.emit(Event{Credential: c.Name, Host: t.Host, Port: t.Port, Kind: "inject", Where: "body"})
	}
	bs.onBad = func(c *cred) error { return s.exfiltration(c, t, "body") }
	return bs
}

// exfiltration reports a placeholder bound for a host that is not its
// credential's and returns the refusal.
func (s *Set) exfiltration(c *cred, t egress.Target, where string) error {
	reason := fmt.Sprintf("placeholder of credential %s in the %s of a request to %s, which is not one of its hosts", c.Name, where, authority(t))
	if !t.TLS && c.ownHost(t.Host, t.Port) {
		reason = fmt.Sprintf("placeholder of credential %s in the %s of a plain-HTTP request to %s: it is injected over TLS only", c.Name, where, authority(t))
	}
	s.emit(Event{Credential: c.Name, Host: t.Host, Port: t.Port, Kind: "exfiltration", Where: where, Reason: reason})
	return fmt.Errorf("%w: %s", egress.ErrRefused, reason)
}

// redactBody streams a response body through the redactor, skipping it
// where a q-gram prefilter proves that no form of a value can lie. The
// output equals the redactor's on the whole stream: a window (the held
// tail plus a new chunk) with no possible form is passed on as it is but
// for its last hold bytes; a window with one goes through a redact.Writer,
// which is flushed only at a point no form can span.
type redactBody struct {
	src   io.ReadCloser
	pf    *qgramFilter
	hold  int // non-break bytes held back: the longest form less one
	w     *redact.Writer
	slow  bool   // the Writer holds stream state
	tail  []byte // raw bytes held back (hold non-break bytes)
	out   bytes.Buffer
	chunk []byte
	strip []byte
	done  bool
	atEOF func() // redacts the trailers, which the transport fills at EOF
}

func newRedactBody(src io.ReadCloser, r *redact.Redactor, pf *qgramFilter, atEOF func()) *redactBody {
	b := &redactBody{src: src, pf: pf, hold: r.MaxHold(), chunk: make([]byte, 64<<10), atEOF: atEOF}
	b.w = r.Writer(&b.out)
	return b
}

func (b *redactBody) Read(p []byte) (int, error) {
	for b.out.Len() == 0 {
		if b.done {
			return 0, io.EOF
		}
		n, err := b.src.Read(b.chunk)
		if n > 0 {
			b.process(b.chunk[:n])
		}
		switch {
		case err == io.EOF:
			b.finish()
			b.atEOF()
			b.done = true
		case err != nil:
			return 0, err // the held-back tail is dropped, never sent
		}
	}
	return b.out.Read(p)
}

func (b *redactBody) process(c []byte) {
	win := append(b.tail, c...)
	cut := tailStart(win, b.hold)
	st := b.stripped(win)
	hit := b.pf.hit(st)
	if !hit && !b.slow {
		// No form lies within win, so a form reaching past it starts in
		// the longest suffix that begins one: only that waits (a stream
		// of events is not held back by a fixed tail).
		cut = tailStart(win, b.pf.partial(st))
	}
	head := win[:cut]
	switch {
	case hit:
		b.slow = true
		b.w.Write(head) // into a bytes.Buffer: cannot fail
	case b.slow:
		b.w.Write(head)
		// No form lies within win, so none spans cut, provided the chunk
		// alone holds the tail (a form from before win ends before it).
		if len(c)-breaks(c) >= b.hold {
			b.w.Flush()
			b.slow = false
		}
	default:
		b.out.Write(head)
	}
	n := copy(win, win[cut:])
	b.tail = win[:n]
}

func (b *redactBody) finish() {
	if b.slow {
		b.w.Write(b.tail)
		b.w.Close()
	} else {
		b.out.Write(b.tail)
	}
	b.tail = nil
}

// stripped returns win without line breaks (which forms may contain).
// IndexByte is vectorized; IndexAny is not.
func (b *redactBody) stripped(win []byte) []byte {
	hasLF, hasCR := bytes.IndexByte(win, '\n') >= 0, bytes.IndexByte(win, '\r') >= 0
	if !hasLF && !hasCR {
		return win
	}
	b.strip = appendWithout(b.strip[:0], win, '\n')
	if hasCR {
		b.strip = appendWithout(b.strip[:0], b.strip, '\r') // in place: the write never passes the read
	}
	return b.strip
}

// appendWithout appends src without the bytes c to dst.
func appendWithout(dst, src []byte, c byte) []byte {
	for {
		i := bytes.IndexByte(src, c)
		if i < 0 {
			return append(dst, src...)
		}
		dst = append(dst, src[:i]...)
		src = src[i+1:]
	}
}

func breaks(c []byte) int { return bytes.Count(c, []byte{'\n'}) + bytes.Count(c, []byte{'\r'}) }

// tailStart returns where the last n non-break bytes of w begin (0 if w
// has fewer).
func tailStart(w []byte, n int) int {
	i := len(w)
	for n > 0 && i > 0 {
		i--
		if w[i] != '\n' && w[i] != '\r' {
			n--
		}
	}
	return i
}

func (b *redactBody) Close() error { return b.src.Close() }

// qgramFilter tells whether a break-free text contains one of a set of
// needles, faster than an automaton: it samples the 4-byte grams at every
// step-th position, where step is the shortest needle's gram count, so
// every occurrence covers a sampled gram; a bitmap of the needles' grams
// rejects most samples, and the rest are checked by comparing the needles
// that hold that gram at their place. Exact: no false answers.
type qgramFilter struct {
	needles [][]byte
	first   [256][]int // needles by first byte
	maxLen  int
	bits    []uint64
	at      map[uint32][]gramAt // gram -> where it sits in which needle
	step    int                 // 0: needles too short to filter; always "maybe"
}

type gramAt struct{ needle, off int }

const (
	gramLen  = 4
	gramBits = 20
)

func gramOf(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func gramHash(g uint32) uint32 { return (g * 2654435761) >> (32 - gramBits) }

func newQgramFilter(needles [][]byte) *qgramFilter {
	f := &qgramFilter{needles: needles, at: map[uint32][]gramAt{}}
	minLen := -1
	for i, n := range needles {
		if len(n) == 0 {
			continue
		}
		f.first[n[0]] = append(f.first[n[0]], i)
		f.maxLen = max(f.maxLen, len(n))
		if minLen < 0 || len(n) < minLen {
			minLen = len(n)
		}
	}
	if minLen < gramLen+4 {
		return f // a step under 5 saves little over the redactor itself
	}
	f.step = minLen - gramLen + 1
	f.bits = make([]uint64, 1<<gramBits/64)
	for i, n := range needles {
		for off := 0; off+gramLen <= len(n); off++ {
			g := gramOf(n[off:])
			h := gramHash(g)
			f.bits[h/64] |= 1 << (h % 64)
			f.at[g] = append(f.at[g], gramAt{i, off})
		}
	}
	return f
}

// partial returns the length of the longest suffix of s that is a proper
// prefix of a needle (0 if none).
func (f *qgramFilter) partial(s []byte) int {
	for p := max(0, len(s)-f.maxLen+1); p < len(s); p++ {
		for _, i := range f.first[s[p]] {
			if n := f.needles[i]; len(s)-p < len(n) && bytes.HasPrefix(n, s[p:]) {
				return len(s) - p
			}
		}
	}
	return 0
}

// hit reports whether a needle lies wholly within s.
func (f *qgramFilter) hit(s []byte) bool {
	if f.step == 0 {
		return true
	}
	for j := 0; j+gramLen <= len(s); j += f.step {
		g := gramOf(s[j:])
		h := gramHash(g)
		if f.bits[h/64]&(1<<(h%64)) == 0 {
			continue
		}
		for _, a := range f.at[g] {
			n := f.needles[a.needle]
			if start := j - a.off; start >= 0 && start+len(n) <= len(s) && bytes.Equal(s[start:start+len(n)], n) {
				return true
			}
		}
	}
	return false
}
