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

// redactBody streams a response body through the redactor.
type redactBody struct {
	src   io.ReadCloser
	w     *redact.Writer
	out   bytes.Buffer
	chunk []byte
	done  bool
	atEOF func() // redacts the trailers, which the transport fills at EOF
}

func newRedactBody(src io.ReadCloser, r *redact.Redactor, atEOF func()) *redactBody {
	b := &redactBody{src: src, chunk: make([]byte, 32<<10), atEOF: atEOF}
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
			b.w.Write(b.chunk[:n]) // into a bytes.Buffer: cannot fail
		}
		switch {
		case err == io.EOF:
			b.w.Close()
			b.atEOF()
			b.done = true
		case err != nil:
			return 0, err // the held-back tail is dropped, never sent
		}
	}
	return b.out.Read(p)
}

func (b *redactBody) Close() error { return b.src.Close() }
