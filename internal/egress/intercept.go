package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Target is where an HTTP request the proxy sees in clear is going.
type Target struct {
	Host string // normalized: lower-case name, or an IP in canonical form
	Port int
	// TLS is true inside an intercepted connection (the upstream is
	// verified TLS) and false for a plain-HTTP proxy request.
	TLS bool
}

// Injector adds credentials to requests the proxy sees in clear. The
// proxy calls it; it never holds a policy of its own.
type Injector interface {
	// Intercepts reports whether the proxy terminates TLS for a CONNECT to
	// host:port (host normalized as in Target). Every other CONNECT stays
	// an opaque tunnel.
	Intercepts(host string, port int) bool
	// Request is called for every request the proxy sees in clear before
	// it is sent: inside intercepted TLS and plain-HTTP proxy requests. It
	// may rewrite r's header, URL and body (a body it wraps may fail a
	// Read with an error wrapping ErrRefused, which refuses the request).
	// An error refuses the request with 403 and the error's text, which
	// must not carry a secret. The returned filter, if non-nil, sees the
	// response before the client does and may rewrite its header and
	// body; its error answers 502.
	//
	// A WebSocket handshake (HTTP/1.1 GET with Upgrade: websocket) inside
	// an intercepted connection is shown as any request. If the upstream
	// answers 101, the filter sees the response with Body the upgraded
	// connection (an io.ReadWriteCloser: reads come from the server,
	// writes go to it) and may replace Body with another
	// io.ReadWriteCloser, through which the proxy then relays the
	// connection both ways. A filter that leaves no io.ReadWriteCloser
	// there ends the connection.
	Request(r *http.Request, t Target) (filter func(*http.Response) error, err error)
}

// Scrubber is an Injector that can take the values it adds out of a
// text: every refusal and failure reason of an intercepted request
// passes through Scrub before the client or the proxy's event sees it.
type Scrubber interface {
	Scrub(text string) string
}

// ErrRefused wraps an Injector's refusal of a request.
var ErrRefused = errors.New("egress request refused")

// interceptor serves the intercepted connections of one proxy: one
// http.Server (HTTP/1.1 and HTTP/2 over the minted certificates) fed by
// sessions through a channel listener.
type interceptor struct {
	p     *Proxy
	srv   *http.Server
	lis   *chanListener
	roots *x509.CertPool
	conns sync.Map // *tls.Conn -> *interception
	done  chan struct{}
}

// interception is one intercepted client connection.
type interception struct {
	s      *session
	host   string
	port   int
	closed chan struct{}
	once   sync.Once
	tr     *http.Transport // HTTP/2 clients: h2 upstream where it offers it
	tr1    *http.Transport // HTTP/1.1 clients: HTTP/1.1 upstream
	cc     *clientConn     // the client side, which HTTP/1.1 relays cork
	wg     sync.WaitGroup  // handlers running

	h1mu sync.Mutex
	h1   *http.Transport // guarded by h1mu: HTTP/1.1 only, for upgrades

	// mu serializes dials, which update the session's event
	// (session.dial), and ends them once the session reads that event.
	mu    sync.Mutex
	first net.Conn // guarded by mu: the upstream dialed for CONNECT, used once
	ended bool     // guarded by mu: no more dials

	rmu    sync.Mutex
	reason string // guarded by rmu: the last refusal, for the event
}

type ctxKey struct{}

func newInterceptor(p *Proxy) (*interceptor, error) {
	roots := p.opts.RootCAs
	if roots == nil {
		var err error
		if roots, err = x509.SystemCertPool(); err != nil {
			return nil, fmt.Errorf("loading the host's trust store: %w", err)
		}
	}
	it := &interceptor{p: p, roots: roots, lis: newChanListener(), done: make(chan struct{})}
	it.srv = &http.Server{
		Handler:           http.HandlerFunc(it.serveHTTP),
		ReadHeaderTimeout: p.limits.HeaderTimeout,
		IdleTimeout:       p.limits.IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          log.New(io.Discard, "", 0),
		// Serve sees *tls.Conn and does the handshake; h2 is negotiated
		// by ALPN with the server's built-in HTTP/2.
		TLSConfig: &tls.Config{NextProtos: []string{"h2", "http/1.1"}},
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if ic, ok := it.conns.Load(c); ok {
				return context.WithValue(ctx, ctxKey{}, ic)
			}
			return ctx
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if st != http.StateClosed && st != http.StateHijacked {
				return
			}
			if ic, ok := it.conns.LoadAndDelete(c); ok {
				ic.(*interception).finish()
			}
		},
	}
	go func() {
		defer close(it.done)
		it.srv.Serve(it.lis)
	}()
	return it, nil
}

func (it *interceptor) close() {
	it.srv.Close()
	<-it.done
}

func (ic *interception) finish() { ic.once.Do(func() { close(ic.closed) }) }

// intercept terminates the client's TLS for host:port with a minted
// certificate and serves its requests until the connection ends. up is
// the upstream dialed for the CONNECT; buffered are bytes the client sent
// after its CONNECT head.
func (s *session) intercept(up net.Conn, buffered []byte, host string, port int) {
	it := s.p.icpt
	leaf, err := s.p.opts.CA.leaf(host)
	if err != nil {
		s.ev.Reason = err.Error()
		return
	}
	s.ev.Intercepted = true
	ic := &interception{s: s, host: host, port: port, closed: make(chan struct{}), first: up}
	// The upstream speaks the protocol the client chose, as it would
	// through a tunnel: an HTTP/1.1 client's requests come one at a time,
	// so HTTP/2 would multiplex nothing, and relaying its body would cost
	// a frame layer, two copies and goroutine hand-offs more per byte.
	ic.tr = &http.Transport{
		DialTLSContext:     ic.dialTLS,
		ForceAttemptHTTP2:  true,
		DisableCompression: true, // Accept-Encoding passes through as the client sent it
		MaxIdleConns:       4,
		ReadBufferSize:     64 << 10,
		WriteBufferSize:    64 << 10,
		IdleConnTimeout:    s.p.limits.IdleTimeout,
	}
	ic.tr1 = &http.Transport{
		DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return ic.dialTLSProtos(ctx, []string{"http/1.1"})
		},
		DisableCompression: true,
		MaxIdleConns:       4,
		ReadBufferSize:     64 << 10,
		WriteBufferSize:    64 << 10,
		IdleConnTimeout:    s.p.limits.IdleTimeout,
	}
	defer ic.tr.CloseIdleConnections()
	defer ic.tr1.CloseIdleConnections()
	defer ic.closeH1()
	cc := &clientConn{Conn: s.client, s: s, pre: buffered}
	ic.cc = cc
	tc := tls.Server(cc, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"h2", "http/1.1"},
		MinVersion:   tls.VersionTLS12,
		// Full-size records from the start: a record is a system call
		// here, and the sandbox is one hop away, not across the internet.
		DynamicRecordSizingDisabled: true,
	})
	it.conns.Store(tc, ic)
	if !it.lis.push(tc) {
		it.conns.Delete(tc)
		tc.Close()
		return
	}
	var timer *time.Timer
	fired := make(chan struct{})
	if max := s.p.limits.MaxDuration; max > 0 {
		timer = time.AfterFunc(time.Until(s.start.Add(max)), func() {
			defer close(fired)
			ic.setReason(ErrMaxDuration.Error())
			s.closeAll()
		})
	}
	select {
	case <-ic.closed:
	case <-s.ctx.Done():
		tc.Close()
		<-ic.closed
	}
	ic.wg.Wait()
	if timer != nil && !timer.Stop() {
		<-fired
	}
	ic.mu.Lock() // waits for a dial in flight; later ones fail
	ic.ended = true
	ic.mu.Unlock()
	if r := ic.lastReason(); r != "" {
		s.ev.Reason = r
	}
}

// setReason records why a request of the connection failed. Handlers
// (HTTP/2 streams) run concurrently; the session copies the last reason
// into its event when they are done.
func (ic *interception) setReason(reason string) {
	reason = ic.scrub(reason)
	ic.rmu.Lock()
	ic.reason = reason
	ic.rmu.Unlock()
}

// scrub takes the values the Injector adds out of text (Scrubber).
func (ic *interception) scrub(text string) string {
	if sc, ok := ic.s.p.opts.Injector.(Scrubber); ok {
		return sc.Scrub(text)
	}
	return text
}

func (ic *interception) lastReason() string {
	ic.rmu.Lock()
	defer ic.rmu.Unlock()
	return ic.reason
}

// dialTLS gives the transport a verified TLS connection to the target:
// the CONNECT's upstream first, then fresh dials through the policy.
func (ic *interception) dialTLS(ctx context.Context, _, _ string) (net.Conn, error) {
	return ic.dialTLSProtos(ctx, []string{"h2", "http/1.1"})
}

// dialTLSProtos is dialTLS offering the ALPN protocols protos.
func (ic *interception) dialTLSProtos(ctx context.Context, protos []string) (net.Conn, error) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.ended {
		return nil, net.ErrClosed
	}
	c := ic.first
	ic.first = nil
	if c == nil {
		up, deny, err := ic.s.dial(ic.host, ic.port)
		switch {
		case deny != "":
			return nil, fmt.Errorf("%w: %s", ErrRefused, deny)
		case err != nil:
			return nil, err
		}
		c = up
	}
	tc := tls.Client(&sessConn{Conn: c, s: ic.s, upstream: true}, &tls.Config{
		ServerName: ic.host,
		RootCAs:    ic.s.p.icpt.roots,
		NextProtos: protos,
		MinVersion: tls.VersionTLS12,
	})
	hctx, cancel := context.WithTimeout(ctx, ic.s.p.opts.DialTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		tc.Close()
		return nil, fmt.Errorf("verifying upstream %s: %w", net.JoinHostPort(ic.host, strconv.Itoa(ic.port)), err)
	}
	return tc, nil
}

// serveHTTP forwards one intercepted request to the verified upstream.
func (it *interceptor) serveHTTP(w http.ResponseWriter, r *http.Request) {
	ic, ok := r.Context().Value(ctxKey{}).(*interception)
	if !ok {
		http.Error(w, "mcpbox egress: unknown connection", http.StatusInternalServerError)
		return
	}
	ic.wg.Add(1)
	defer ic.wg.Done()
	s := ic.s
	if r.Method == http.MethodConnect {
		ic.refuse(w, http.StatusMethodNotAllowed, "CONNECT inside an intercepted connection")
		return
	}
	if !sameAuthority(r.Host, ic.host, ic.port) {
		// A Host other than the CONNECT target could reach another virtual
		// host (domain fronting) with the credential of this one.
		ic.refuse(w, http.StatusForbidden, fmt.Sprintf("Host %s does not match the CONNECT target %s", printableHost(r.Host), ic.authority()))
		return
	}
	if !originForm(r) {
		// An absolute URI without "//" (https:x?key=...) parses as an
		// opaque URL: the Injector would substitute its query, and the
		// HTTP/2 transport then refuses the request with an error that
		// quotes the whole :path, the real value in it. No origin
		// server's request has such a target.
		ic.refuse(w, http.StatusBadRequest, "the request target is not a path (origin form)")
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = "https", ic.authority()
	// The server fills r.Trailer when the body ends; Clone copied the map
	// before that, so the clone would forward empty trailers and the
	// Injector would check nothing.
	out.Trailer = r.Trailer
	te := r.Header.Get("Te")
	removeHopHeaders(out.Header)
	if strings.EqualFold(te, "trailers") {
		out.Header.Set("Te", "trailers") // gRPC needs it; it is not a hop header under HTTP/2
	}
	ws := isWebSocket(r)
	if ws {
		out.Header.Set("Connection", "Upgrade")
		out.Header.Set("Upgrade", "websocket")
	}
	if r.Body == http.NoBody || r.ContentLength == 0 {
		out.Body = nil
	}
	filter, err := s.p.opts.Injector.Request(out, Target{Host: ic.host, Port: ic.port, TLS: true})
	if err != nil {
		ic.refuse(w, http.StatusForbidden, err.Error())
		return
	}
	tr := ic.tr
	switch {
	case ws:
		tr = ic.h1Transport()
	case r.ProtoMajor == 1:
		tr = ic.tr1
	}
	resp, err := tr.RoundTrip(out)
	if err != nil {
		if isRefusal(err) {
			ic.refuse(w, http.StatusForbidden, refusalText(err))
			return
		}
		ic.refuse(w, http.StatusBadGateway, "upstream: "+err.Error())
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols && !ws {
		ic.refuse(w, http.StatusBadGateway, "upstream switched protocols unasked")
		return
	}
	if filter != nil {
		if err := filter(resp); err != nil {
			ic.refuse(w, http.StatusBadGateway, err.Error())
			return
		}
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		ic.relayUpgraded(w, resp)
		return
	}
	removeHopHeaders(resp.Header)
	h := w.Header()
	for k, vv := range resp.Header {
		h[k] = vv
	}
	for k := range resp.Trailer {
		h.Add("Trailer", k)
	}
	w.WriteHeader(resp.StatusCode)
	http.NewResponseController(w).Flush() // the head now, whatever the body does
	var cc *clientConn
	if r.ProtoMajor == 1 {
		cc = ic.cc
	}
	if err := copyFlush(w, resp.Body, cc); err != nil {
		ic.setReason("relaying response: " + err.Error())
		panic(http.ErrAbortHandler) // the client must not take a cut body for a whole one
	}
	for k, vv := range resp.Trailer {
		h[k] = vv
	}
}

// isRefusal reports whether err carries an Injector's refusal. net/http
// wraps body read errors in types without Unwrap (requestBodyReadError),
// so the text is matched too; only our own body readers produce it.
func isRefusal(err error) bool {
	return errors.Is(err, ErrRefused) || strings.Contains(err.Error(), ErrRefused.Error())
}

// refusalText is the message of an ErrRefused chain, from the refusal on
// (the transport prefixes its own context).
func refusalText(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ErrRefused.Error()); i >= 0 {
		return msg[i:]
	}
	return msg
}

// originForm reports whether r's target is a path (or the asterisk of
// OPTIONS *), as a request to an origin server's own authority has it:
// not an opaque URL.
func originForm(r *http.Request) bool {
	if r.URL == nil || r.URL.Opaque != "" {
		return false
	}
	if r.Method == http.MethodOptions && r.URL.Path == "*" {
		return true
	}
	return strings.HasPrefix(r.URL.Path, "/") || r.URL.Path == ""
}

// refuse answers the client code and reason, which is also the event's.
// The reason passes through the Injector's Scrub, when it has one: an
// upstream transport's error may quote the request it refused, with the
// values the Injector put in.
func (ic *interception) refuse(w http.ResponseWriter, code int, reason string) {
	reason = printable(ic.scrub(reason), 512)
	ic.setReason(reason)
	http.Error(w, "mcpbox egress: "+reason, code)
}

func (ic *interception) authority() string {
	if ic.port == 443 {
		if strings.Contains(ic.host, ":") {
			return "[" + ic.host + "]"
		}
		return ic.host
	}
	return net.JoinHostPort(ic.host, strconv.Itoa(ic.port))
}

// sameAuthority reports whether a request's Host names host:port (the
// port may be left out for 443).
func sameAuthority(reqHost, host string, port int) bool {
	h, p, err := splitHostPort(reqHost, 443)
	if err != nil || p != port {
		return false
	}
	name, ip, err := parseHost(h)
	if err != nil {
		return false
	}
	if ip.IsValid() {
		return ip.String() == host
	}
	return name == host
}

// bigPool holds the buffers of intercepted responses: larger writes mean
// fewer TLS records, chunk headers and system calls per byte.
var bigPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

const (
	// relayBufs is how many bigPool buffers one response may hold.
	relayBufs = 4
	// minRelayRead is the least room a read is given: the Injector's
	// filter passes clean bytes on in place only into 64 KiB or more.
	minRelayRead = 64 << 10
)

// copyFlush copies a response body, flushing whenever it has no more
// bytes at hand, so streamed responses (server-sent events) are not held
// back. Reading (upstream TLS, the Injector's filter) runs in a goroutine
// of its own, so that it and writing (client TLS) use two cores. The
// reader fills each buffer with successive reads (a TLS record's worth
// each, often) and the writer writes what has piled up in one piece:
// while it writes, the reader reads on, so the pieces grow with the
// backlog, and a chunk header and TLS record go with each piece, not each
// read. cc, if not nil, is the HTTP/1.1 connection w writes to: it is
// corked while the body is copied and flushed with w.
func copyFlush(w http.ResponseWriter, body io.ReadCloser, cc *clientConn) error {
	rc := http.NewResponseController(w)
	if cc != nil {
		cc.cork()
		defer cc.uncork()
	}
	// A piece is bytes read into buf at off, or, with release, the end of
	// the reader's use of buf: once written, buf goes back to free.
	type piece struct {
		buf     *[]byte
		off, n  int
		release bool
	}
	ch := make(chan piece, 64)
	free := make(chan *[]byte, relayBufs)
	rerrc := make(chan error, 1)
	go func() {
		defer close(ch)
		held := 0
		next := func() *[]byte {
			select {
			case b := <-free:
				return b
			default:
			}
			if held < relayBufs {
				held++
				return bigPool.Get().(*[]byte)
			}
			return <-free // the writer returns every released buffer
		}
		buf, off := next(), 0
		for {
			if len(*buf)-off < minRelayRead {
				ch <- piece{buf: buf, release: true}
				buf, off = next(), 0
			}
			n, err := body.Read((*buf)[off:])
			if n > 0 {
				ch <- piece{buf: buf, off: off, n: n}
				off += n
			}
			if err != nil {
				ch <- piece{buf: buf, release: true}
				if err == io.EOF {
					err = nil
				}
				rerrc <- err
				return
			}
		}
	}()
	var (
		werr      error
		pend      *[]byte // pend[from:to] is read and not yet written
		from, to  int
		unflushed bool
	)
	write := func() {
		if pend != nil && werr == nil {
			if _, werr = w.Write((*pend)[from:to]); werr != nil {
				body.Close() // unblocks the reader; the rest is drained below
			}
			unflushed = true
		}
		pend = nil
	}
	for p := range ch {
		switch {
		case p.release:
			write() // pend may lie in p.buf
			free <- p.buf
		case pend == p.buf && to == p.off:
			to += p.n // contiguous: one write
		default:
			write()
			pend, from, to = p.buf, p.off, p.off+p.n
		}
		if len(ch) == 0 {
			write()
			if unflushed && werr == nil {
				if werr = rc.Flush(); werr == nil && cc != nil {
					werr = cc.flush()
				}
				if werr != nil {
					body.Close()
				}
			}
			unflushed = false
		}
	}
	for len(free) > 0 {
		bigPool.Put(<-free)
	}
	if rerr := <-rerrc; werr == nil {
		return rerr
	}
	return werr
}

// clientConn is the client side of an intercepted connection: bytes
// buffered after the CONNECT head first, then the connection. It leaves
// deadlines to the http.Server (which uses them to abort reads), unlike
// sessConn.
//
// While corked, writes (TLS records) gather in a buffer that goes out in
// one system call when it is full or flushed: a response body relayed in
// large pieces costs one write per buffer instead of one per 16 KiB
// record. Only an HTTP/1.1 handler corks it, around writes it flushes
// itself; HTTP/2 frames are written by the server's own goroutine.
type clientConn struct {
	net.Conn
	s   *session
	pre []byte

	wmu    sync.Mutex
	corked bool    // guarded by wmu
	wbuf   *[]byte // guarded by wmu: from corkPool while corked
	werr   error   // guarded by wmu: a failed flush fails every later write
}

func (c *clientConn) Read(b []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(b, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.s.touch()
	}
	return n, err
}

func (c *clientConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return 0, c.werr
	}
	if c.corked {
		buf := *c.wbuf
		if len(buf)+len(b) > cap(buf) {
			if err := c.flushLocked(); err != nil {
				return 0, err
			}
			buf = *c.wbuf
		}
		if len(buf)+len(b) <= cap(buf) {
			*c.wbuf = append(buf, b...)
			return len(b), nil
		}
	}
	return c.write(b)
}

func (c *clientConn) write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.s.touch()
	}
	return n, err
}

// corkPool holds cork buffers: 16 full TLS records and change.
var corkPool = sync.Pool{New: func() any { b := make([]byte, 0, 16*(16<<10+64)+4<<10); return &b }}

// cork starts gathering writes.
func (c *clientConn) cork() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.corked {
		c.corked, c.wbuf = true, corkPool.Get().(*[]byte)
	}
}

// flush writes out what was gathered.
func (c *clientConn) flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.flushLocked()
}

func (c *clientConn) flushLocked() error {
	if c.werr != nil {
		return c.werr
	}
	if !c.corked || len(*c.wbuf) == 0 {
		return nil
	}
	_, err := c.write(*c.wbuf)
	*c.wbuf = (*c.wbuf)[:0]
	if err != nil {
		c.werr = err
	}
	return err
}

// uncork flushes and stops gathering writes.
func (c *clientConn) uncork() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	err := c.flushLocked()
	if c.corked {
		*c.wbuf = (*c.wbuf)[:0]
		corkPool.Put(c.wbuf)
		c.corked, c.wbuf = false, nil
	}
	return err
}

// chanListener is a net.Listener fed by push.
type chanListener struct {
	ch     chan net.Conn
	mu     sync.Mutex
	closed bool // guarded by mu
	done   chan struct{}
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.done)
	}
	return nil
}

func (l *chanListener) Addr() net.Addr { return &net.UnixAddr{Name: "intercept", Net: "unix"} }
