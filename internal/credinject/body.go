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
// the request before that placeholder is sent). It holds back the longest
// tail that begins a placeholder (at most the longest less one byte), so
// one split across reads is caught.
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
			b.ready = len(b.pending) - b.partial()
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

// partial returns the length of the longest suffix of pending that is a
// proper prefix of a placeholder: only those bytes wait for more (a
// client streaming messages is not stalled by a fixed tail).
func (b *bodyScanner) partial() int {
	for p := max(0, len(b.pending)-b.hold); p < len(b.pending); p++ {
		for _, r := range b.rules {
			if len(b.pending)-p < len(r.pat) && bytes.HasPrefix(r.pat, b.pending[p:]) {
				return len(b.pending) - p
			}
		}
	}
	return 0
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
// where a q-gram prefilter proves that no form of a value can lie. Each
// window (the held tail plus a new chunk) is cut where no form, whole or
// begun, spans the cut: before the longest suffix that begins a form, or
// earlier, before a whole form that reaches past that point. The part
// before the cut is independent of what follows, so redacting it alone
// (or passing it on as it is, with no form in the window) gives the
// redactor's output for the whole stream, and only bytes that may begin a
// form wait for more.
type redactBody struct {
	src   io.ReadCloser
	red   *redact.Redactor
	pf    *qgramFilter
	tail  []byte // raw bytes held back: they may begin a form
	out   bytes.Buffer
	chunk []byte
	strip []byte
	done  bool
	atEOF func() // redacts the trailers, which the transport fills at EOF
}

func newRedactBody(src io.ReadCloser, r *redact.Redactor, pf *qgramFilter, atEOF func()) *redactBody {
	return &redactBody{src: src, red: r, pf: pf, chunk: make([]byte, 64<<10), atEOF: atEOF}
}

// Read passes the body on, redacted. With nothing held back and a p at
// least a chunk long, it reads straight into p, and a window that holds no
// form is returned in place: a bulk download is not copied here at all.
func (b *redactBody) Read(p []byte) (int, error) {
	for b.out.Len() == 0 {
		if b.done {
			return 0, io.EOF
		}
		buf := b.chunk
		direct := len(b.tail) == 0 && len(p) >= len(b.chunk)
		if direct {
			buf = p
		}
		n, err := b.src.Read(buf)
		switch {
		case n > 0 && direct && err == nil:
			if k := b.cleanHead(p[:n]); k > 0 {
				return k, nil
			}
		case n > 0:
			b.process(buf[:n])
		}
		switch {
		case err == io.EOF:
			b.out.Write(b.endTail())
			b.tail = nil
			b.atEOF()
			b.done = true
		case err != nil:
			return 0, err // the held-back tail is dropped, never sent
		}
	}
	return b.out.Read(p)
}

// runsBody passes a body redacted by redactBody on with the runs of the
// values replaced too (redact.Runs), in what it read so far.
type runsBody struct {
	src  io.ReadCloser
	s    *redact.RunStream
	out  []byte // ready, not yet read
	buf  []byte
	done bool
}

func newRunsBody(src io.ReadCloser, runs *redact.Runs) io.ReadCloser {
	if runs == nil {
		return src
	}
	// As large as redactBody's chunk, so that it reads into this buffer
	// directly (redactBody.Read).
	return &runsBody{src: src, s: runs.Stream(), buf: make([]byte, 64<<10)}
}

// Read passes the body on. With nothing ready and a p at least a buffer
// long, it reads into p, and what has no run in it is returned in place:
// a bulk download is not copied here.
func (b *runsBody) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		if b.done {
			return 0, io.EOF
		}
		buf, direct := b.buf, len(p) >= len(b.buf)
		if direct {
			buf = p[:len(b.buf)]
		}
		n, err := b.src.Read(buf)
		inPlace := 0
		if n > 0 {
			out := b.s.Write(buf[:n]) // buf[:k] itself, or a copy with marks
			switch {
			case direct && len(out) > 0 && &out[0] == &buf[0]:
				inPlace = len(out)
			case direct:
				b.out = append(b.buf[:0], out...) // b.buf is free: p was read into
			default:
				b.out = out
			}
		}
		switch {
		case err == io.EOF:
			b.out = append(b.out, b.s.Close()...)
			b.done = true
		case err != nil:
			return 0, err // what is held back is dropped, never sent
		}
		if inPlace > 0 {
			return inPlace, nil
		}
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

func (b *runsBody) Close() error { return b.src.Close() }

// endTail is the held-back tail redacted at the end of the body: its
// forms become marks, and bytes at its end that begin a form pass if they
// are few (leakable), else become the mark: a listed host that cuts its
// echo of the value (an error quoting the first N bytes of a header)
// handed out the value's beginning, padded to any length the sandbox
// chose.
func (b *redactBody) endTail() []byte {
	t := b.tail
	p, prefix := b.beginning(t)
	out := b.red.Bytes(t[:p])
	if len(prefix) > b.leakable(prefix) {
		return append(out, b.markFor(prefix)...)
	}
	return append(out, t[p:]...)
}

// beginning splits t, held back at the end of a body or a message, where
// what may begin a form starts: t[p:], past the forms t holds, and prefix,
// those bytes without line breaks ("" if none).
func (b *redactBody) beginning(t []byte) (p int, prefix []byte) {
	last := 0
	for _, s := range b.red.Spans(t) {
		last = s.End
	}
	rest := t[last:]
	st := b.stripped(rest)
	k := b.pf.partial(st)
	return last + rawIndex(rest, len(st)-k, len(st)), st[len(st)-k:]
}

// leakable is how many bytes of prefix, which begins a form at the end of
// a message or a body, may pass: maxSplitLeak, and no more than a quarter of the
// shortest form it begins, so that what passes of a short value leaves
// most of it to guess (the redactor itself tells a right guess: an echo
// of it comes back marked).
func (b *redactBody) leakable(prefix []byte) int {
	most := maxSplitLeak
	for _, n := range b.pf.needles {
		if bytes.HasPrefix(n, prefix) {
			most = min(most, len(n)/4)
		}
	}
	return most
}

// markFor returns the mark of a form that begins with prefix.
func (b *redactBody) markFor(prefix []byte) []byte {
	for _, n := range b.pf.needles {
		if bytes.HasPrefix(n, prefix) {
			return b.red.Bytes(n)
		}
	}
	return []byte("[REDACTED]") // unreachable: prefix begins a form
}

// cleanHead takes a window read into the caller's buffer with nothing
// held back, as process would: with no form in it, it keeps the bytes that
// may begin one in tail and returns the length of the head to pass on in
// place; else it hands the window to process and returns 0. The window is
// checked as it is, breaks and all (hitRaw): a clean window is never
// copied.
func (b *redactBody) cleanHead(win []byte) int {
	if b.pf.hitRaw(win) {
		b.process(win)
		return 0
	}
	// Only a suffix shorter than the longest form can begin one.
	end := b.stripped(win[rawSuffix(win, b.pf.maxLen-1):])
	head := rawIndex(win, len(end)-b.pf.partial(end), len(end))
	b.tail = append(b.tail[:0], win[head:]...)
	return head
}

// rawSuffix returns the index in w where its last n bytes other than line
// breaks begin (0 if it has fewer).
func rawSuffix(w []byte, n int) int {
	i := len(w)
	for ; i > 0 && n > 0; i-- {
		if !isBreak(w[i-1]) {
			n--
		}
	}
	return i
}

func isBreak(c byte) bool { return c == '\n' || c == '\r' }

func (b *redactBody) process(c []byte) {
	win := append(b.tail, c...)
	st := b.stripped(win)
	cut := len(st) - b.pf.partial(st) // in st, which has no breaks
	if b.pf.hit(st) {
		cut = b.pf.unspanned(st, cut)
		head := win[:rawIndex(win, cut, len(st))]
		b.out.Write(b.red.Bytes(head))
		win = win[len(head):]
	} else {
		head := win[:rawIndex(win, cut, len(st))]
		b.out.Write(head)
		win = win[len(head):]
	}
	b.tail = append(b.tail[:0], win...) // win may share b.tail's array: copy handles it
}

// rawIndex returns the index in w of the byte after its first n bytes
// other than line breaks, where the stripped w has m such bytes: breaks
// before a cut stay before it. It walks back from the end, since cuts
// fall near it.
func rawIndex(w []byte, n, m int) int {
	if n >= m {
		return len(w)
	}
	i := len(w)
	for left := m - n; left > 0; {
		i--
		if w[i] != '\n' && w[i] != '\r' {
			left--
		}
	}
	return i
}

func (b *redactBody) Close() error { return b.src.Close() }

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

// unspanned returns the greatest cut at or before cut that no needle
// occurrence wholly in s spans (starts before it and ends after it).
func (f *qgramFilter) unspanned(s []byte, cut int) int {
	for moved := true; moved; {
		moved = false
		for _, n := range f.needles {
			if len(n) == 0 {
				continue
			}
			// Occurrences that could span cut start in (cut-len(n), cut).
			from := max(0, cut-len(n)+1)
			for i := from; i < cut; {
				j := bytes.Index(s[i:min(len(s), cut+len(n)-1)], n)
				if j < 0 {
					break
				}
				if start := i + j; start < cut && start+len(n) > cut {
					cut, moved = start, true
					break
				}
				i += j + 1
			}
		}
	}
	return cut
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

// hitRaw is hit of w with its line breaks removed, without removing them.
// It samples every step-th position of w and takes the gram of the four
// bytes other than breaks from there: removing breaks only brings samples
// closer together, so every occurrence still covers one. A gram of a
// needle is checked by comparing the needle around it, skipping breaks.
func (f *qgramFilter) hitRaw(w []byte) bool {
	if f.step == 0 {
		return true
	}
	for q := 0; q < len(w); q += f.step {
		var g uint32
		at := q
		if q+gramLen <= len(w) {
			g = gramOf(w[q:])
		}
		if q+gramLen > len(w) || hasBreak(g) {
			var ok bool
			if g, at, ok = gramFrom(w, q); !ok {
				return false // fewer than four bytes left, here and after
			}
		}
		h := gramHash(g)
		if f.bits[h/64]&(1<<(h%64)) == 0 {
			continue
		}
		for _, a := range f.at[g] {
			if matchAround(w, at, f.needles[a.needle], a.off) {
				return true
			}
		}
	}
	return false
}

// hasBreak reports whether a gram holds a line break: a byte of g^LF or
// g^CR is zero.
func hasBreak(g uint32) bool {
	const ones, highs = 0x01010101, 0x80808080
	lf, cr := g^0x0a0a0a0a, g^0x0d0d0d0d
	return (lf-ones)&^lf&highs != 0 || (cr-ones)&^cr&highs != 0
}

// gramFrom returns the gram of the first four bytes other than line
// breaks in w[q:] and the index of the first of them.
func gramFrom(w []byte, q int) (g uint32, at int, ok bool) {
	var buf [gramLen]byte
	n := 0
	for j := q; j < len(w) && n < gramLen; j++ {
		if !isBreak(w[j]) {
			if n == 0 {
				at = j
			}
			buf[n] = w[j]
			n++
		}
	}
	if n < gramLen {
		return 0, 0, false
	}
	return gramOf(buf[:]), at, true
}

// matchAround reports whether w, line breaks skipped, holds needle n with
// its byte off at index at (not a break).
func matchAround(w []byte, at int, n []byte, off int) bool {
	j := at
	for k := off; k < len(n); k++ {
		for j < len(w) && isBreak(w[j]) {
			j++
		}
		if j == len(w) || w[j] != n[k] {
			return false
		}
		j++
	}
	j = at - 1
	for k := off - 1; k >= 0; k-- {
		for j >= 0 && isBreak(w[j]) {
			j--
		}
		if j < 0 || w[j] != n[k] {
			return false
		}
		j--
	}
	return true
}
