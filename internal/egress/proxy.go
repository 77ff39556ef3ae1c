package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Default limits, used where Limits fields are zero.
const (
	DefaultMaxConns      = 1024
	DefaultIdleTimeout   = 5 * time.Minute
	DefaultMaxDuration   = 4 * time.Hour
	DefaultHeaderTimeout = 10 * time.Second
	DefaultDialTimeout   = 10 * time.Second

	// MaxHeaderBytes bounds an HTTP request head (and a SOCKS handshake).
	MaxHeaderBytes = 64 << 10

	closeWait = 5 * time.Second // Close's bound on waiting for handlers
)

// Limits bound one proxy, that is one sandbox. Zero fields take the
// defaults above; negative fields mean no limit. The byte limits count
// both directions; zero or negative means none. They are exact: a
// connection's BytesUp+BytesDown never exceed MaxBytesPerConn, nor their
// sum over all the proxy's connections MaxBytesTotal, however its
// directions and connections race for the last bytes (a connection that
// reaches a limit ends with ErrByteLimit; bytes it had already taken from
// the upstream beyond the limit are dropped, not delivered).
type Limits struct {
	MaxConns        int   // concurrent connections; zero: DefaultMaxConns
	MaxBytesPerConn int64 // bytes up+down per connection
	MaxBytesTotal   int64 // bytes up+down over the proxy's lifetime
	// IdleTimeout ends a connection with no bytes moving either way;
	// zero: DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxDuration ends a connection this long after it was accepted;
	// zero: DefaultMaxDuration.
	MaxDuration time.Duration
	// HeaderTimeout bounds reading the request head or SOCKS handshake
	// (slowloris); zero: DefaultHeaderTimeout.
	HeaderTimeout time.Duration
}

// Resolver looks up host names; *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure a Proxy.
type Options struct {
	SandboxID string // copied into every Event
	Rules     []Rule
	Forwards  []Forward
	Limits    Limits
	// Resolver resolves target names; nil: net.DefaultResolver.
	Resolver Resolver
	// Log, if non-nil, receives one Event per connection once it has
	// ended, from that connection's goroutine, concurrently with other
	// connections' calls. The connection is closed and its MaxConns slot
	// released before Log runs, so a slow Log does not stall traffic, but
	// it holds a goroutine and delays Close. Connections refused by
	// MaxConns are logged from the Serve goroutine, where a slow Log
	// delays accepting. Hand events off quickly (to a buffered channel
	// that drops or counts overflow, say).
	Log func(Event)
	// HandoverPID is the process (its pid as this process sees it) whose
	// connections on a unix listener may hand a TCP connection over
	// (handover_linux.go): the sandbox's init. Zero or negative: none may.
	// A hand-over from any other process is refused before its
	// descriptors are taken in: a workload that passed a socket of its
	// own keeps a copy, shares its open file description with the proxy
	// and can clear O_NONBLOCK (putting the proxy's reads past every
	// deadline), set SO_LINGER or read from it; the init's accepted
	// sockets no workload holds.
	HandoverPID int
	// Opened, if non-nil, receives a connection's event as soon as its
	// target is decided (allowed or denied), before any byte moves, from
	// the connection's goroutine: so that an audit can tie the connection
	// to the tool call in flight. Bytes and Duration are zero. It must
	// return quickly.
	Opened func(Event)
	// DialTimeout bounds resolving and dialing a target; zero:
	// DefaultDialTimeout.
	DialTimeout time.Duration

	// Injector, if non-nil, sees every request in clear and names the
	// CONNECT targets whose TLS the proxy terminates (with CA) to show it
	// those requests too. Nil: no interception; every CONNECT is a tunnel.
	Injector Injector
	// CA signs the certificates shown for intercepted hosts; required
	// with Injector.
	CA *CA
	// RootCAs verifies the upstream servers of intercepted connections;
	// nil: the host's trust store (x509.SystemCertPool, which honours
	// SSL_CERT_FILE and SSL_CERT_DIR).
	RootCAs *x509.CertPool
	// Refuse, if non-nil, is asked about every target the rules allow
	// (host normalized as in Target) before it is dialed: a non-empty
	// reason refuses the connection with 403 and that reason, as a rule
	// would. The Kubernetes egress proxy refuses a credential's hosts
	// with it while it has no registration of the pod's credentials.
	Refuse func(host string, port int) string

	// Authorize, if non-nil, makes this proxy a front shared by many
	// clients that tells them apart by their credentials: every HTTP
	// request must carry Proxy-Authorization: Basic, and Authorize (given
	// its user, password and the client's address) returns the proxy of
	// that client, whose rules, limits, resolver, injector and Log then
	// decide and carry the connection; the front's own only bound reading
	// the request head. An error refuses the request with 407 and the
	// error's text (never the password), as does a missing header. SOCKS
	// carries no credentials and is refused.
	Authorize Authorize
	// RenewTarget, with Authorize, is a CONNECT target that is never
	// dialed: a CONNECT to it whose credentials Authorize accepts is
	// answered 204 and ends, unlogged. A client presents a renewed
	// credential with it (the Kubernetes pod agent its new proxy
	// token), so that Authorize sees it without a connection of its
	// own being made. Empty: none.
	RenewTarget string
}

// Event records one client connection.
type Event struct {
	Time      time.Time // when the connection was accepted
	SandboxID string
	Kind      string     // "connect", "http", "socks" or "forward"
	Host      string     // target host as normalized by the proxy
	Port      int        // target port
	IP        netip.Addr // address dialed; zero if none
	Decision  string     // "allow" or "deny"
	Rule      string     // allowing rule (Rule.String or "forward TO")
	Reason    string     // why denied or ended early; "" for a clean end
	BytesUp   int64      // client to target
	BytesDown int64      // target to client
	Duration  time.Duration
	Package   string // package registry download, plain HTTP only
	Version   string
	// Intercepted is true when the proxy terminated the CONNECT's TLS
	// (Options.Injector); Reason then holds the last refusal, if any.
	Intercepted bool
}

// Proxy is the egress proxy of one sandbox.
type Proxy struct {
	opts   Options
	limits Limits
	pol    *policy
	dialer net.Dialer
	icpt   *interceptor // nil without Options.Injector

	active atomic.Int64 // open client connections
	total  atomic.Int64 // bytes moved, as reported

	// The byte budget (meter.go), used only when a byte limit is set.
	meterMu      sync.Mutex
	meterCond    sync.Cond // on meterMu: a reservation was settled
	meterWaiters int       // guarded by meterMu
	meter        meter     // guarded by meterMu
	wg           sync.WaitGroup

	mu        sync.Mutex
	closed    bool                      // guarded by mu
	sessions  map[*session]struct{}     // guarded by mu
	listeners map[net.Listener]struct{} // guarded by mu
}

// New checks opts and returns a proxy ready to Serve.
func New(opts Options) (*Proxy, error) {
	pol, err := compilePolicy(opts.Rules, opts.Forwards)
	if err != nil {
		return nil, fmt.Errorf("creating egress proxy: %w", err)
	}
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	l := opts.Limits
	l.MaxConns = orDefault(l.MaxConns, DefaultMaxConns)
	l.IdleTimeout = orDefault(l.IdleTimeout, DefaultIdleTimeout)
	l.MaxDuration = orDefault(l.MaxDuration, DefaultMaxDuration)
	l.HeaderTimeout = orDefault(l.HeaderTimeout, DefaultHeaderTimeout)
	p := &Proxy{
		opts:      opts,
		limits:    l,
		pol:       pol,
		dialer:    net.Dialer{Timeout: opts.DialTimeout},
		sessions:  map[*session]struct{}{},
		listeners: map[net.Listener]struct{}{},
	}
	p.meterCond.L = &p.meterMu
	if opts.Injector != nil {
		if opts.CA == nil {
			return nil, errors.New("creating egress proxy: an Injector needs a CA")
		}
		if p.icpt, err = newInterceptor(p); err != nil {
			return nil, fmt.Errorf("creating egress proxy: %w", err)
		}
	}
	return p, nil
}

func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Serve accepts connections on l, each handled in its own goroutine, until
// l is closed or Close is called; then it returns nil. Other accept errors
// are returned.
func (p *Proxy) Serve(l net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return nil
	}
	p.listeners[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.listeners, l)
		p.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("accepting egress connection: %w", err)
		}
		backoff = 0
		p.accept(c)
	}
}

// isTemporary matches accept errors like EMFILE that pass with time.
func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

func (p *Proxy) accept(c net.Conn) {
	start := time.Now()
	if max := p.limits.MaxConns; max > 0 && p.active.Load() >= int64(max) {
		c.Close()
		p.log(Event{Time: start, SandboxID: p.opts.SandboxID, Decision: "deny",
			Reason: fmt.Sprintf("connection limit (%d) reached", max)})
		return
	}
	s := newSession(p, c, start)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		s.closeAll()
		return
	}
	p.sessions[s] = struct{}{}
	p.active.Add(1)
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		ev := s.serve()
		s.closeAll()
		p.mu.Lock()
		delete(p.sessions, s)
		p.mu.Unlock()
		p.active.Add(-1)
		if owner := s.p; owner != p {
			// Adopted (Options.Authorize): the client's proxy logs it.
			if !s.renewal {
				owner.log(ev)
			}
			owner.release(s)
			return
		}
		p.log(ev)
	}()
}

func (p *Proxy) log(ev Event) {
	if p.opts.Log != nil {
		p.opts.Log(ev)
	}
}

// Close stops all Serve loops, closes every active connection and waits up
// to a few seconds for their handlers (and Log calls) to return.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for l := range p.listeners {
		l.Close()
	}
	for s := range p.sessions {
		s.closeAll()
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		if p.icpt != nil {
			p.icpt.close()
		}
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(closeWait):
		return errors.New("closing egress proxy: handlers still running after " + closeWait.String())
	}
}

// ActiveConns returns the number of open client connections.
func (p *Proxy) ActiveConns() int { return int(p.active.Load()) }
