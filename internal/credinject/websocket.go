package credinject

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"mcpbox/internal/egress"
)

// A WebSocket (RFC 6455) to an owning host: the handshake is a request as
// any other (its headers checked and substituted), asked to negotiate no
// extension (permessage-deflate would hide values from the scan). After
// the 101, the connection is relayed through a wsConn, which parses the
// frames both ways: the client's messages are scanned as request bodies
// are (a placeholder of a credential that does not own the host refuses
// the connection before the frame holding its end leaves; an own one
// becomes the value where the credential has body: true); the server's
// messages have every value redacted, and since that changes their
// length, they are re-fragmented (which RFC 6455 5.4 allows an
// intermediary when no extension is in use).

// isWebSocketRequest reports whether r asks to switch to WebSocket.
func isWebSocketRequest(r *http.Request) bool {
	if !strings.EqualFold(strings.TrimSpace(r.Header.Get("Upgrade")), "websocket") {
		return false
	}
	for _, v := range r.Header.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), "upgrade") {
				return true
			}
		}
	}
	return false
}

// upgraded checks a 101 answer to a WebSocket handshake to t and puts a
// wsConn in place of its body.
func (s *Set) upgraded(resp *http.Response, t egress.Target, own func(*cred) bool) error {
	if !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") {
		return fmt.Errorf("%s switched to %q, not websocket", authority(t), printableValue(resp.Header.Get("Upgrade")))
	}
	if ext := resp.Header.Get("Sec-Websocket-Extensions"); ext != "" {
		return fmt.Errorf("%s negotiated WebSocket extensions %q that were not asked for: their frames could not be scanned for credential values", authority(t), printableValue(ext))
	}
	up, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		return errors.New("the switched connection is not writable")
	}
	resp.Body = s.newWSConn(up, t, own)
	return nil
}

func printableValue(v string) string {
	if len(v) > 64 {
		v = v[:64] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, v)
}

// wsConn is a switched WebSocket connection to an owning host as the
// proxy relays it: writes (the client's frames) and reads (the server's)
// go through a goroutine each that parses and rewrites frames.
type wsConn struct {
	s   *Set
	t   egress.Target
	up  io.ReadWriteCloser
	own func(*cred) bool

	toUp   *io.PipeWriter // Write feeds the client loop
	fromUp *io.PipeReader // Read takes the server loop's frames
	inUp   *io.PipeReader
	outUp  *io.PipeWriter

	once sync.Once
	wg   sync.WaitGroup

	// rules for the client's messages: placeholders to refuse (repl nil)
	// or substitute; hold is the longest less one.
	rules []bodyRule
	hold  int
}

func (s *Set) newWSConn(up io.ReadWriteCloser, t egress.Target, own func(*cred) bool) *wsConn {
	c := &wsConn{s: s, t: t, up: up, own: own}
	c.inUp, c.toUp = io.Pipe()
	c.fromUp, c.outUp = io.Pipe()
	for _, n := range s.needle {
		r := bodyRule{pat: []byte(n.placeholder), cred: n.cred}
		if own(n.cred) {
			if !n.cred.Body {
				continue
			}
			r.repl = []byte(n.real)
		}
		c.rules = append(c.rules, r)
		c.hold = max(c.hold, len(r.pat)-1)
	}
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		if err := c.clientLoop(bufio.NewReaderSize(c.inUp, 32<<10)); err != nil {
			c.fail(err)
		} else {
			c.up.Close() // the client is gone: so is the server
		}
	}()
	go func() {
		defer c.wg.Done()
		err := c.serverLoop(bufio.NewReaderSize(c.up, 32<<10))
		if err == nil {
			err = io.EOF
		}
		c.outUp.CloseWithError(err)
	}()
	return c
}

func (c *wsConn) Write(p []byte) (int, error) { return c.toUp.Write(p) }
func (c *wsConn) Read(p []byte) (int, error)  { return c.fromUp.Read(p) }

// Close ends both loops and the upstream connection.
func (c *wsConn) Close() error {
	c.once.Do(func() {
		c.toUp.Close()
		c.fromUp.Close()
		c.up.Close()
	})
	c.wg.Wait()
	return nil
}

// fail ends the connection for err: the client is sent a close frame
// (1008, policy violation, for a refusal) and then err from Read, which
// the proxy records; the upstream is closed, so the server sees the
// connection drop, never the refused frame.
func (c *wsConn) fail(err error) {
	// The client's side first: its close frame, then err, before closing
	// the upstream makes the server loop end the stream with a read
	// error of its own (a pipe keeps the first error it is closed with).
	if errors.Is(err, egress.ErrRefused) {
		reason := "mcpbox egress: refused"
		c.outUp.Write(frame(true, opClose, binary.BigEndian.AppendUint16(nil, 1008), []byte(reason)))
	}
	c.outUp.CloseWithError(err)
	c.inUp.CloseWithError(err)
	c.up.Close()
}

// maxWholeMessage is the largest unfragmented server message redacted
// whole and sent on as one frame; longer ones stream as fragments.
const maxWholeMessage = 1 << 20

const (
	opCont  = 0x0
	opClose = 0x8
)

// frameHead is a parsed frame header.
type frameHead struct {
	fin    bool
	rsv    byte
	op     byte
	masked bool
	key    [4]byte
	length uint64
	raw    []byte // as read
}

// readFrameHead reads one frame header; io.EOF only before its first byte.
func readFrameHead(r *bufio.Reader) (frameHead, error) {
	var h frameHead
	b := make([]byte, 2, 14)
	if _, err := io.ReadFull(r, b); err != nil {
		return h, err
	}
	h.fin, h.rsv, h.op, h.masked = b[0]&0x80 != 0, b[0]&0x70, b[0]&0x0f, b[1]&0x80 != 0
	n := uint64(b[1] & 0x7f)
	ext := map[uint64]int{126: 2, 127: 8}[n]
	if ext > 0 {
		b = b[:2+ext]
		if _, err := io.ReadFull(r, b[2:]); err != nil {
			return h, noEOF(err)
		}
		if ext == 2 {
			n = uint64(binary.BigEndian.Uint16(b[2:]))
		} else if n = binary.BigEndian.Uint64(b[2:]); n>>63 != 0 {
			return h, errors.New("websocket: frame length out of range")
		}
	}
	h.length = n
	if h.masked {
		b = b[:len(b)+4]
		if _, err := io.ReadFull(r, b[len(b)-4:]); err != nil {
			return h, noEOF(err)
		}
		copy(h.key[:], b[len(b)-4:])
	}
	h.raw = b
	switch {
	case h.rsv != 0:
		return h, errors.New("websocket: frame uses an extension (RSV bits), none was negotiated")
	case h.op >= 8 && (h.length > 125 || !h.fin):
		return h, errors.New("websocket: malformed control frame")
	case h.op > 2 && h.op < 8 || h.op > 10:
		return h, fmt.Errorf("websocket: unknown opcode %d", h.op)
	}
	return h, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// frame builds an unmasked frame whose payload is the parts.
func frame(fin bool, op byte, parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	b0 := op
	if fin {
		b0 |= 0x80
	}
	out := make([]byte, 0, 10+n)
	switch {
	case n < 126:
		out = append(out, b0, byte(n))
	case n < 1<<16:
		out = append(out, b0, 126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, b0, 127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func mask(b []byte, key [4]byte, pos uint64) {
	for i := range b {
		b[i] ^= key[(pos+uint64(i))&3]
	}
}

// clientLoop relays the client's frames to the server, scanning the
// unmasked payloads: headers are passed as they are (substitution keeps
// lengths), payloads are re-masked with their key. Within a frame, bytes
// that may begin a placeholder wait for the next ones; across frames of
// data, the last bytes sent are kept to catch a placeholder cut by a
// frame boundary (refused before its end leaves).
func (c *wsConn) clientLoop(src *bufio.Reader) error {
	buf := make([]byte, 32<<10)
	var prev []byte // the end of the data payloads sent, unmasked
	subbed := map[*cred]bool{}
	for {
		h, err := readFrameHead(src)
		if err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if !h.masked {
			return errors.New("websocket: unmasked client frame")
		}
		if _, err := c.up.Write(h.raw); err != nil {
			return err
		}
		var ctx []byte // text before win, already sent
		if h.op < 8 {
			ctx = prev
		}
		var win []byte
		var sent uint64
		for rem := h.length; rem > 0; {
			n, err := src.Read(buf[:min(rem, uint64(len(buf)))])
			if n > 0 {
				mask(buf[:n], h.key, sent+uint64(len(win)))
				win = append(win, buf[:n]...)
				rem -= uint64(n)
			} else if err != nil {
				return noEOF(err)
			}
			if err := c.scan(ctx, win, subbed); err != nil {
				return err
			}
			keep := 0
			if rem > 0 {
				keep = c.partial(win)
			}
			out := win[:len(win)-keep]
			ctx = tailOf(append(ctx, out...), c.hold)
			mask(out, h.key, sent)
			if _, err := c.up.Write(out); err != nil {
				return err
			}
			sent += uint64(len(out))
			win = append(win[:0:0], win[len(out):]...)
		}
		if h.op < 8 {
			prev = ctx
		}
	}
}

// tailOf returns a copy of the last n bytes of b.
func tailOf(b []byte, n int) []byte {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return append([]byte(nil), b...)
}

// scan refuses a placeholder of a credential that does not own the host
// ending in win (ctx+win is the text), and substitutes own ones (body:
// true) wholly in win.
func (c *wsConn) scan(ctx, win []byte, subbed map[*cred]bool) error {
	text := append(append([]byte(nil), ctx...), win...)
	for _, r := range c.rules {
		for off := 0; ; {
			i := bytes.Index(text[off:], r.pat)
			if i < 0 {
				break
			}
			at := off + i
			if r.repl == nil {
				return c.s.exfiltration(r.cred, c.t, "websocket message")
			}
			if at >= len(ctx) {
				copy(win[at-len(ctx):], r.repl)
				copy(text[at:], r.repl)
				if !subbed[r.cred] {
					subbed[r.cred] = true
					c.s.emit(Event{Credential: r.cred.Name, Host: c.t.Host, Port: c.t.Port, Kind: "inject", Where: "websocket"})
				}
			}
			off = at + len(r.pat)
		}
	}
	return nil
}

// partial returns the length of the longest suffix of win that is a
// proper prefix of a placeholder.
func (c *wsConn) partial(win []byte) int {
	for p := max(0, len(win)-c.hold); p < len(win); p++ {
		for _, r := range c.rules {
			if len(win)-p < len(r.pat) && bytes.HasPrefix(r.pat, win[p:]) {
				return len(win) - p
			}
		}
	}
	return 0
}

// serverLoop relays the server's frames to the client with every value
// redacted: a message's payload streams through the redactor (a value cut
// across its fragments is caught) and leaves as fragments of what is
// ready; control frames are redacted whole. The data messages are scanned
// as one stream (wsRedact), so a value split across messages is caught
// too.
func (c *wsConn) serverLoop(src *bufio.Reader) error {
	buf := make([]byte, 32<<10)
	wr := &wsRedact{rb: &redactBody{red: c.s.red, pf: c.s.pf}}
	rb := wr.rb
	var inMsg, started bool
	var msgOp byte
	runs := c.s.runs.Stream() // a message's runs of a value (redact.Runs)
	emit := func(final bool) error {
		if rb.out.Len() == 0 && !final {
			return nil
		}
		p := runs.Write(rb.out.Bytes())
		rb.out.Reset()
		if final {
			p = append(p, runs.Close()...)
			runs = c.s.runs.Stream()
		} else if len(p) == 0 {
			return nil // held back: it may begin a run
		}
		op := byte(opCont)
		if !started {
			op, started = msgOp, true
		}
		_, err := c.outUp.Write(frame(final, op, p))
		return err
	}
	for {
		h, err := readFrameHead(src)
		if err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if h.masked {
			return errors.New("websocket: masked server frame")
		}
		if h.op >= 8 {
			p := make([]byte, h.length)
			if _, err := io.ReadFull(src, p); err != nil {
				return noEOF(err)
			}
			p = c.s.runs.Bytes(c.s.red.Bytes(p))
			if len(p) > 125 {
				p = p[:125] // a control frame's limit; the mark may be cut, never a value
			}
			if _, err := c.outUp.Write(frame(true, h.op, p)); err != nil {
				return err
			}
			continue
		}
		switch {
		case h.op != opCont && inMsg, h.op == opCont && !inMsg:
			return errors.New("websocket: fragments out of order")
		case h.op != opCont && h.fin && h.length <= maxWholeMessage:
			// A whole message in one frame stays one frame: clients that
			// read a frame per message (golang.org/x/net/websocket) work.
			p := make([]byte, h.length)
			if _, err := io.ReadFull(src, p); err != nil {
				return noEOF(err)
			}
			wr.feed(p)
			wr.end()
			msgOp, started = h.op, false
			if err := emit(true); err != nil {
				return err
			}
			continue
		case h.op != opCont:
			inMsg, started, msgOp = true, false, h.op
		}
		for rem := h.length; rem > 0; {
			n, err := src.Read(buf[:min(rem, uint64(len(buf)))])
			if n > 0 {
				wr.feed(buf[:n])
				rem -= uint64(n)
				// One fragment out per fragment in, or per 64 KiB of a
				// long one.
				if rem == 0 && !h.fin || rb.out.Len() >= 64<<10 {
					if err := emit(false); err != nil {
						return err
					}
				}
			} else if err != nil {
				return noEOF(err)
			}
		}
		if h.fin {
			wr.end()
			if err := emit(true); err != nil {
				return err
			}
			inMsg = false
		}
	}
}

// maxSplitLeak is the most bytes (other than line breaks) of a form that
// may pass at the end of a message, and a quarter of the form at most
// (leakable): a message ending in a longer beginning of a form has it
// replaced by the mark. Anything shorter than
// a value (MinValueLen) could be chance; it is sent as it is, and the
// rest of the form, in the next messages, is replaced.
const maxSplitLeak = 7

// wsRedact redacts the server's data messages of one connection as one
// stream without holding a message back: at the end of a message, the
// bytes that may begin a form are sent (or replaced, past maxSplitLeak)
// but kept as context, and a form they begin that the next message ends
// has its rest in that message replaced by the mark.
type wsRedact struct {
	rb   *redactBody // rb.tail: raw bytes held, the first skip of them already sent
	skip int
}

// feed scans c, the next bytes of the current message, and adds to
// rb.out what can be sent.
func (w *wsRedact) feed(c []byte) {
	if w.skip == 0 {
		w.rb.process(c)
		return
	}
	b := w.rb
	win := append(b.tail, c...)
	st := b.stripped(win)
	cut := len(st) - b.pf.partial(st)
	if b.pf.hit(st) {
		cut = b.pf.unspanned(st, cut)
	}
	head := rawIndex(win, cut, len(st))
	if head <= w.skip {
		w.skip -= head // all of it went out with the last message
	} else {
		b.out.Write(w.after(win[:head]))
		w.skip = 0
	}
	b.tail = append(b.tail[:0], win[head:]...)
}

// after returns text redacted from skip on: a form that began before
// skip (in bytes already sent) and ends after it becomes the mark.
func (w *wsRedact) after(text []byte) []byte {
	pos := min(w.skip, len(text))
	var out []byte
	for _, s := range w.rb.red.Spans(text) {
		switch {
		case s.End <= pos:
			continue
		case s.Start > pos:
			out = append(out, text[pos:s.Start]...)
		}
		out = append(out, s.Mark...)
		pos = s.End
	}
	return append(out, text[pos:]...)
}

// end ends the current message: the bytes held are redacted, those that
// may begin a form are sent, or replaced by the mark if they are more
// than maxSplitLeak, and kept as the next message's context.
func (w *wsRedact) end() {
	b := w.rb
	t := b.tail
	p, prefix := b.beginning(t)
	b.out.Write(w.after(t[:p]))
	if from := max(p, w.skip); from < len(t) {
		if len(prefix) > b.leakable(prefix) {
			b.out.Write(b.markFor(prefix))
		} else {
			b.out.Write(t[from:])
		}
	}
	b.tail = append(b.tail[:0:0], t[p:]...)
	w.skip = len(b.tail)
}
