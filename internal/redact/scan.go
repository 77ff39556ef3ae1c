package redact

import "io"

// scanner finds leftmost-longest, non-overlapping needle matches in a
// stream. Line breaks (CR, LF) are skipped: a match is the needle's bytes
// with any breaks between them, from its first byte to its last. After each
// matched region the automaton restarts from the root, so a match never
// overlaps a replaced one. A candidate match is final once no needle
// starting at or before it can still end: maxLen bytes other than breaks
// past its start.
type scanner struct {
	r   *Redactor
	out []byte // output not yet handed on

	buf []byte // input; buf[:pos] is already in out
	own []byte // storage for the undecided tail kept between feeds
	pos int
	i   int    // buf[pos:i] has been scanned
	s   uint32 // automaton state after buf[pos:i], maybe flagged

	best, bestEnd int // candidate match buf[best:bestEnd], best < 0 if none
	bestNeedle    int32
	span          int // bytes other than breaks in buf[best:i]

	// hits, if non-nil, collects the committed matches (offsets into buf,
	// which find keeps whole), and no output is built.
	hits *[]hit
}

// hit is a match of needle at [start, end).
type hit struct {
	start, end int
	needle     int32
}

func (sc *scanner) reset() {
	sc.buf, sc.pos, sc.i, sc.s, sc.best = nil, 0, 0, 0, -1
}

// feed scans p, emits the bytes no future match can cover, and keeps the
// rest (at most maxLen-1 bytes) for the next feed.
func (sc *scanner) feed(p []byte) {
	if sc.pos == len(sc.buf) {
		sc.reset()
		sc.buf = p // borrowed until the end of feed
	} else {
		sc.buf = append(sc.buf, p...)
	}
	sc.scan()
	a := sc.r.a
	limit := matchStart(sc.buf, sc.i, int(a.depth[sc.s&^matchFlag]))
	if sc.best >= 0 {
		limit = min(limit, sc.best)
	}
	sc.out = append(sc.out, sc.buf[sc.pos:limit]...)
	sc.pos = limit
	// Keep the tail in our own storage and rebase the offsets.
	sc.own = append(sc.own[:0], sc.buf[sc.pos:]...)
	sc.buf = sc.own
	sc.i -= sc.pos
	if sc.best >= 0 {
		sc.best -= sc.pos
		sc.bestEnd -= sc.pos
	}
	sc.pos = 0
}

// finish ends the stream: it settles the remaining candidates and emits
// everything.
func (sc *scanner) finish() {
	for {
		sc.scan()
		if sc.best < 0 {
			break
		}
		sc.commit()
	}
	if sc.hits == nil {
		sc.out = append(sc.out, sc.buf[sc.pos:]...)
	}
	sc.reset()
}

// commit replaces the candidate match and restarts scanning after it.
func (sc *scanner) commit() {
	if sc.hits != nil {
		*sc.hits = append(*sc.hits, hit{sc.best, sc.bestEnd, sc.bestNeedle})
	} else {
		sc.out = append(sc.out, sc.buf[sc.pos:sc.best]...)
		sc.out = append(sc.out, sc.r.repl[sc.r.owner[sc.bestNeedle]]...)
	}
	sc.pos, sc.i, sc.s = sc.bestEnd, sc.bestEnd, 0
	sc.best = -1
}

// scan runs the automaton to the end of buf, committing candidates that
// have become final.
func (sc *scanner) scan() {
	a := sc.r.a
	buf := sc.buf
	s, i := sc.s, sc.i
	for i < len(buf) {
		if sc.best < 0 {
			// Hot loop: ordinary text, no candidate pending.
			s, i = a.run(s&^matchFlag, buf, i)
		} else {
			c := buf[i]
			if t := s &^ matchFlag; t < a.nDense {
				s = a.dense[t*a.nclass+uint32(a.class[c])]
			} else {
				s = a.slowStep(t, c)
			}
			i++
			if !isBreak(c) {
				sc.span++
			}
		}
		if s&matchFlag != 0 {
			needle, n := a.longest(s)
			// At equal starts the later end is the longer match.
			switch start := matchStart(buf, i, n); {
			case sc.best < 0 || start < sc.best:
				sc.best, sc.bestEnd, sc.bestNeedle, sc.span = start, i, needle, n
			case start == sc.best:
				sc.bestEnd, sc.bestNeedle, sc.span = i, needle, n
			}
		}
		if sc.best >= 0 && sc.span >= a.maxLen {
			sc.i = i
			sc.commit()
			s, i = sc.s, sc.i
		}
	}
	sc.s, sc.i = s, i
}

// find returns the matches Bytes would replace in b.
func (r *Redactor) find(b []byte) []hit {
	var hits []hit
	sc := scanner{r: r, buf: b, best: -1, hits: &hits}
	sc.finish()
	return hits
}

// Span is a form Bytes replaces: b[Start:End], line breaks inside it
// included, becomes Mark.
type Span struct {
	Start, End int
	Mark       []byte
}

// Spans returns the forms Bytes(b) replaces, in order: what lies between
// them Bytes leaves as it is. A caller that has already passed on part of
// b can so tell which forms reach past it.
func (r *Redactor) Spans(b []byte) []Span {
	hits := r.find(b)
	out := make([]Span, len(hits))
	for i, h := range hits {
		out[i] = Span{h.start, h.end, r.repl[r.owner[h.needle]]}
	}
	return out
}

// Writer redacts a stream written to it and writes the result to an
// underlying io.Writer. It holds back at most MaxHold bytes that may begin
// a secret form; Flush or Close writes them. A Writer is not safe for
// concurrent use.
type Writer struct {
	w      io.Writer
	sc     scanner
	err    error // sticky error of the underlying writer
	closed bool
}

// Writer returns a Writer redacting into w. Its output for a stream is
// Bytes of the whole stream, however the stream is split into writes,
// provided Flush is called only at the end.
func (r *Redactor) Writer(w io.Writer) *Writer {
	return &Writer{w: w, sc: scanner{r: r, best: -1}}
}

// Write redacts p. It reports len(p) unless the underlying writer failed;
// after a failure every call returns that error.
func (w *Writer) Write(p []byte) (int, error) {
	if w.closed {
		return 0, ErrClosed
	}
	if w.err != nil {
		return 0, w.err
	}
	w.sc.feed(p)
	if err := w.drain(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes the held-back bytes, treating this point as the end of the
// stream: a secret split across a Flush is not recognised. Use it at
// message boundaries.
func (w *Writer) Flush() error {
	if w.closed {
		return ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	w.sc.finish()
	return w.drain()
}

// Close flushes and makes further writes fail. It does not close the
// underlying writer.
func (w *Writer) Close() error {
	if w.closed {
		return ErrClosed
	}
	err := w.Flush()
	w.closed = true
	return err
}

func (w *Writer) drain() error {
	if len(w.sc.out) == 0 {
		return nil
	}
	_, err := w.w.Write(w.sc.out)
	w.sc.out = w.sc.out[:0]
	if err != nil {
		w.err = err
	}
	return err
}
