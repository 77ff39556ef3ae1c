package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// session is one client connection and, once dialed, its upstream.
type session struct {
	p      *Proxy
	client net.Conn
	start  time.Time
	ctx    context.Context
	cancel context.CancelFunc
	ev     Event

	// headerUntil, while non-zero, is the fixed read deadline of the
	// request head; set and cleared before any relay goroutine starts.
	headerUntil time.Time
	// quiet: the client is a handed-over forward, which gets no HTTP
	// replies (no error texts either).
	quiet bool
	// renewal: the session only presented a credential
	// (Options.RenewTarget); it is not logged.
	renewal bool

	// last is when the last byte moved either way, as nanoseconds since
	// start on the monotonic clock: a wall-clock reading would let a clock
	// jump end a busy connection or keep an idle one forever.
	last atomic.Int64
	up   atomic.Int64
	down atomic.Int64
	// meter is this connection's share of the byte budget, guarded by
	// p.meterMu.
	meter meter

	mu       sync.Mutex
	closed   bool     // guarded by mu
	upstream net.Conn // guarded by mu
}

func newSession(p *Proxy, c net.Conn, start time.Time) *session {
	s := &session{p: p, client: c, start: start}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.ev = Event{Time: start, SandboxID: p.opts.SandboxID, Kind: "http"}
	return s
}

// serve handles the connection and returns its event.
func (s *session) serve() Event {
	s.headerUntil = s.start.Add(s.p.limits.HeaderTimeout)
	if uc, ok := s.client.(*net.UnixConn); ok && s.p.opts.Authorize == nil {
		h, handed, err := s.takeHandover(uc)
		switch {
		case err != nil:
			s.deny(err.Error())
			return s.end()
		case handed && !s.swapClient(h.conn):
			return s.end()
		case handed && h.target != "":
			s.serveForward(&sessConn{Conn: s.client, s: s}, h.target)
			return s.end()
		}
	}
	cc := &sessConn{Conn: s.client, s: s}
	hr := &headerReader{r: cc, n: MaxHeaderBytes}
	br := bufio.NewReaderSize(hr, 4096)
	first, err := br.Peek(1)
	switch {
	case err != nil:
		s.deny("reading request: " + describeReadErr(err, hr))
	case first[0] == socksVersion && s.p.opts.Authorize != nil:
		s.ev.Kind = "socks"
		s.deny("SOCKS carries no proxy credentials here: use HTTP CONNECT")
	case first[0] == socksVersion:
		s.ev.Kind = "socks"
		s.serveSOCKS(cc, br, hr)
	default:
		s.serveHTTP(cc, br, hr)
	}
	return s.end()
}

// end completes the session's event.
func (s *session) end() Event {
	s.ev.BytesUp, s.ev.BytesDown = s.up.Load(), s.down.Load()
	s.ev.Duration = time.Since(s.start)
	return s.ev
}

// swapClient makes c, a handed-over connection, the client in place of the
// unix connection that carried it, which it closes; false (c closed) if
// the session was closed meanwhile.
func (s *session) swapClient(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.client.Close()
	s.client = c
	return true
}

// opened reports the decided target to Options.Opened.
func (s *session) opened() {
	if f := s.p.opts.Opened; f != nil {
		f(s.ev)
	}
}

func (s *session) deny(reason string) {
	s.ev.Decision, s.ev.Reason, s.ev.Rule = "deny", printable(reason, 512), ""
}

// dial checks host:port against the policy, resolves names, checks every
// address and dials a checked address (never the name again). It returns
// a deny reason, or a dial error for an allowed target, or the upstream.
func (s *session) dial(host string, port int) (up net.Conn, deny string, err error) {
	pl := s.p.pol.decide(host, port)
	s.ev.Host, s.ev.Port = pl.name, port
	if pl.ip.IsValid() {
		s.ev.Host = pl.ip.String()
	} else if pl.name == "" {
		s.ev.Host = printableHost(host)
	}
	if pl.forward {
		s.ev.Kind = "forward"
	}
	if pl.deny == "" && s.p.opts.Refuse != nil {
		pl.deny = s.p.opts.Refuse(s.ev.Host, port)
	}
	if pl.deny == "" && s.p.limits.MaxBytesTotal > 0 && s.p.total.Load() >= s.p.limits.MaxBytesTotal {
		pl.deny = "the sandbox's egress byte budget is used up"
	}
	if pl.deny != "" {
		s.deny(pl.deny)
		s.opened()
		return nil, pl.deny, nil
	}
	s.ev.Decision = "allow"
	ctx, cancel := context.WithTimeout(s.ctx, s.p.opts.DialTimeout)
	defer cancel()
	addrs, rules := []netip.Addr{pl.ip}, []string{pl.rule}
	if !pl.ip.IsValid() {
		addrs, err = s.p.opts.Resolver.LookupNetIP(ctx, "ip", pl.name)
		if err != nil {
			return nil, "", fmt.Errorf("resolving %s: %w", pl.name, err)
		}
		addrs = unmapAll(addrs)
		if rules, deny = s.p.pol.checkAddrs(pl, addrs); deny != "" {
			s.deny(deny)
			s.opened()
			return nil, deny, nil
		}
	}
	s.ev.Rule = rules[0]
	s.opened()
	for i, a := range addrs {
		c, derr := s.p.dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if derr != nil {
			err = derr
			continue
		}
		s.ev.IP, s.ev.Rule = a, rules[i]
		if !s.setUpstream(c) {
			return nil, "", net.ErrClosed
		}
		return c, "", nil
	}
	s.ev.Rule = rules[0]
	return nil, "", fmt.Errorf("dialing %s: %w", net.JoinHostPort(s.ev.Host, fmt.Sprint(port)), err)
}

// unmapAll turns IPv4-mapped answers into IPv4, so CIDRs and the dial see
// the address the kernel would use, and drops duplicates.
func unmapAll(addrs []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, len(addrs))
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		a = a.Unmap()
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

func (s *session) setUpstream(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.upstream = c
	return true
}

// closeAll ends the session from any goroutine.
func (s *session) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.cancel()
	s.client.Close()
	if s.upstream != nil {
		s.upstream.Close()
	}
}

// relay copies both ways until both directions end, half-closing on EOF.
// buffered are bytes the client sent after its request head. Between two
// stream sockets the bytes move by splice (spliceRelay), else by copies.
func (s *session) relay(client net.Conn, up net.Conn, buffered []byte) {
	if spliceRelays && s.spliceRelay(s.client, up, buffered) {
		return
	}
	uc := &sessConn{Conn: up, s: s, upstream: true}
	errc := make(chan error, 1)
	go func() {
		err := writeAll(uc, buffered)
		if err == nil {
			err = copyBuf(uc, client)
		}
		s.endDirection(up, err)
		errc <- err
	}()
	err := copyBuf(client, uc)
	s.endDirection(s.client, err)
	s.noteEnd(err, <-errc)
}

// endDirection half-closes dst after a clean EOF; after an error it closes
// everything, which also unblocks the other direction.
func (s *session) endDirection(dst net.Conn, err error) {
	if err != nil {
		s.closeAll()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

func writeAll(w io.Writer, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	_, err := w.Write(b)
	return err
}

// noteEnd records why a relay ended early; resets by either peer are a
// normal end and leave no reason.
func (s *session) noteEnd(errs ...error) {
	for _, err := range errs {
		if errors.Is(err, ErrByteLimit) || errors.Is(err, ErrIdle) || errors.Is(err, ErrMaxDuration) {
			s.ev.Reason = err.Error()
			return
		}
	}
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.p.closed {
		s.ev.Reason = "proxy closed"
	}
}

// spliceRelays is off only in benchmarks that compare splice with copies.
var spliceRelays = true

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyBuf copies src to dst until EOF. An idle connection blocks in Read,
// so it reads into a small buffer of its own and borrows a pooled 32 KiB
// one only while reads keep filling the small one (a bulk transfer), which
// keeps idle connections cheap.
func copyBuf(dst io.Writer, src io.Reader) error {
	small := make([]byte, 2<<10)
	buf := small
	var big *[]byte
	defer func() {
		if big != nil {
			bufPool.Put(big)
		}
	}()
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case big == nil && n == len(small):
			big = bufPool.Get().(*[]byte)
			buf = *big
		case big != nil && n < len(small):
			bufPool.Put(big)
			big, buf = nil, small
		}
	}
}

// printableHost makes a host the client sent safe for logs and terminals:
// an unparsable one may hold control characters or escape sequences.
func printableHost(h string) string { return printable(h, 255) }

// printable quotes s if it holds anything beyond printable ASCII, and caps
// its length.
func printable(s string, max int) string {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			s = strconv.QuoteToASCII(s)
			break
		}
	}
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}
