package egressproxy

import (
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"mcpbox/internal/credinject"
	"mcpbox/internal/egress"
	"mcpbox/internal/podagent"
)

// Config is what the proxy enforces: the key of the pods' tokens and each
// server's allowlist. It is the JSON of the proxy's Secret.
type Config struct {
	// Key is the HMAC key of the tokens (at least KeySize bytes).
	Key []byte `json:"key"`
	// Servers are the allowlists by server name; a token of a server not
	// listed is refused.
	Servers map[string]ServerPolicy `json:"servers"`
}

// ServerPolicy is one server's egress: its rules and the limits that
// bound each of its pods.
type ServerPolicy struct {
	Rules  []egress.Rule `json:"rules"`
	Limits egress.Limits `json:"limits"`
	// Inject are the hosts (credinject host patterns) of the server's
	// secrets added at the proxy, never their values: a pod of the
	// server that has no Registration on a replica is refused them.
	Inject []string `json:"inject,omitempty"`
}

// ParseConfig parses and checks a Config.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("parsing the egress proxy config: %w", err)
	}
	return c, c.check()
}

func (c Config) check() error {
	if len(c.Key) < KeySize {
		return fmt.Errorf("egress proxy config: key of %d bytes, want at least %d", len(c.Key), KeySize)
	}
	for name, sp := range c.Servers {
		// egress.New compiles and checks the rules; the proxy is discarded.
		if _, err := egress.New(egress.Options{Rules: sp.Rules, Limits: sp.Limits}); err != nil {
			return fmt.Errorf("egress proxy config: server %s: %w", name, err)
		}
		if _, err := credinject.ParseHosts(sp.Inject); err != nil {
			return fmt.Errorf("egress proxy config: server %s: inject: %w", name, err)
		}
	}
	return nil
}

// Options configure a Proxy.
type Options struct {
	Config Config
	// Log receives one JSON line (Line) per connection; nil: none.
	Log io.Writer
	// Resolver resolves target names; nil: net.DefaultResolver.
	Resolver egress.Resolver
	// PodOf, if set, names the pod a client address belongs to; a token
	// presented from an address of another pod (or of none) is refused.
	PodOf func(net.Addr) (pod string, ok bool)
	// Now is the clock of token expiry; nil: time.Now.
	Now func() time.Time
	// HeaderTimeout bounds reading a request head; zero: egress's default.
	HeaderTimeout time.Duration
}

// FrontMaxConns bounds the connections of all pods together; each pod's
// are bounded by its server's network.limits.connections as well.
const FrontMaxConns = 16 * egress.DefaultMaxConns

// Proxy is the shared egress proxy of a gateway's pods.
type Proxy struct {
	o     Options
	front *egress.Proxy
	log   *lineLog

	mu    sync.Mutex
	cfg   Config               // guarded by mu
	pods  map[podKey]*podProxy // guarded by mu
	swept time.Time            // guarded by mu; the last sweep
	// The gateway's registrations (SetState), in memory only.
	regs  map[string]*registered // guarded by mu; by pod
	ca    *egress.CA             // guarded by mu; the interception CA
	roots *x509.CertPool         // guarded by mu; the intercepted upstreams' roots
	// regTLS is the registration endpoint's certificate, renewed by
	// the gateway (State.TLSCert).
	regTLS registryTLS
}

// sweepEvery spaces the sweeps of expired pods' proxies: a sweep walks
// every pod, and authorizations come per connection.
const sweepEvery = time.Minute

type podKey struct{ pod, server string }

// podProxy is one pod's egress.Proxy, kept until the newest token the
// pod presented expires or its server's policy changes.
type podProxy struct {
	p      *egress.Proxy
	policy ServerPolicy
	expiry time.Time
	digest [32]byte // of the pod's Registration it was built with; zero: none
}

// New returns a proxy ready to Serve.
func New(o Options) (*Proxy, error) {
	if err := o.Config.check(); err != nil {
		return nil, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	p := &Proxy{o: o, cfg: o.Config, pods: map[podKey]*podProxy{}, log: newLineLog(o.Log)}
	// The front holds every pod's connections until they are handed to
	// the pod's own proxy (whose MaxConns then counts them): its own
	// bound is the whole proxy's, well above one sandbox's default.
	front, err := egress.New(egress.Options{SandboxID: "", Log: p.log.logger(""), Resolver: o.Resolver,
		Limits: egress.Limits{MaxConns: FrontMaxConns, HeaderTimeout: o.HeaderTimeout}, Authorize: p.authorize,
		RenewTarget: podagent.ProxyRenewTarget})
	if err != nil {
		return nil, err
	}
	p.front = front
	return p, nil
}

// Serve accepts connections on l until it is closed or Close is called.
func (p *Proxy) Serve(l net.Listener) error { return p.front.Serve(l) }

// authorize checks a pod's token and returns the pod's proxy.
func (p *Proxy) authorize(pod, token string, from net.Addr) (*egress.Proxy, error) {
	now := p.o.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	server, exp, err := Verify(p.cfg.Key, pod, token, now)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", pod, err)
	}
	if p.o.PodOf != nil {
		if got, ok := p.o.PodOf(from); !ok || got != pod {
			return nil, fmt.Errorf("pod %s: the token comes from an address not the pod's", pod)
		}
	}
	sp, ok := p.cfg.Servers[server]
	if !ok {
		return nil, fmt.Errorf("pod %s: server %s has no egress allowlist", pod, server)
	}
	p.sweepLocked(now)
	k := podKey{pod, server}
	if pp := p.pods[k]; pp != nil {
		// A renewed token (the gateway gives a running pod a new one
		// before the last ends) keeps the pod's proxy, and its open
		// connections, until the newest one's end.
		if exp.After(pp.expiry) {
			pp.expiry = exp
		}
		return pp.p, nil
	}
	eo := egress.Options{SandboxID: pod, Rules: sp.Rules, Limits: sp.Limits,
		Resolver: p.o.Resolver, Log: p.log.logger(server)}
	digest, err := p.injectOptions(&eo, pod, server, sp)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", pod, err)
	}
	ep, err := egress.New(eo)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", pod, err)
	}
	p.pods[k] = &podProxy{p: ep, policy: sp, expiry: exp, digest: digest}
	return ep, nil
}

// sweepLocked closes the proxies of pods whose newest token expired, at
// most once per sweepEvery: a pod's connections end with its tokens (a
// new one is refused at once by Verify).
func (p *Proxy) sweepLocked(now time.Time) {
	if now.Sub(p.swept) < sweepEvery {
		return
	}
	p.swept = now
	for k, pp := range p.pods {
		if !now.Before(pp.expiry) {
			delete(p.pods, k)
			go pp.p.Close()
		}
	}
}

// SetConfig replaces the key and allowlists. Pods of servers whose
// policy changed or went lose their proxy (and connections); tokens are
// checked against the new key from now on.
func (p *Proxy) SetConfig(c Config) error {
	if err := c.check(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	keyChanged := !reflect.DeepEqual(p.cfg.Key, c.Key)
	for k, pp := range p.pods {
		if sp, ok := c.Servers[k.server]; keyChanged || !ok || !reflect.DeepEqual(sp, pp.policy) {
			delete(p.pods, k)
			go pp.p.Close()
		}
	}
	p.cfg = c
	return nil
}

// Pods is the number of pods with a proxy of their own.
func (p *Proxy) Pods() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pods)
}

// Close stops serving, closes every connection and flushes the log.
func (p *Proxy) Close() error {
	err := p.front.Close()
	p.mu.Lock()
	pods := p.pods
	p.pods = map[podKey]*podProxy{}
	p.mu.Unlock()
	for _, pp := range pods {
		err = errors.Join(err, pp.p.Close())
	}
	p.log.close()
	return err
}

// Dropped is the number of log lines dropped because the log did not
// keep up.
func (p *Proxy) Dropped() int64 { return p.log.dropped.Load() }

// Line is one connection in the decision log, a JSON line on stdout.
type Line struct {
	Time     time.Time `json:"time"`
	Server   string    `json:"server,omitempty"` // empty: refused before a token named one
	Pod      string    `json:"pod,omitempty"`
	Kind     string    `json:"kind,omitempty"`
	Host     string    `json:"host,omitempty"`
	Port     int       `json:"port,omitempty"`
	IP       string    `json:"ip,omitempty"`
	Decision string    `json:"decision"`
	Rule     string    `json:"rule,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	// BytesUp and BytesDown are bytes to and from the target.
	BytesUp    int64   `json:"bytes_up"`
	BytesDown  int64   `json:"bytes_down"`
	DurationMS float64 `json:"duration_ms"`
	Package    string  `json:"package,omitempty"`
	Version    string  `json:"version,omitempty"`
	// Dropped, on a line of its own, counts lines lost before it.
	Dropped int64 `json:"dropped,omitempty"`
	// Secret, on a line of Kind "secret", names the secret added at the
	// proxy that Decision ("inject", "exfiltration", "refused") concerns;
	// Where is where in the request ("header NAME", "body", ...). Never
	// a value.
	Secret string `json:"secret,omitempty"`
	Where  string `json:"where,omitempty"`
}

// KindSecret is the Kind of a secret's line (Line.SecretEvent).
const KindSecret = "secret"

// SecretEvent is the credinject event a secret's line stands for.
func (l Line) SecretEvent() credinject.Event {
	return credinject.Event{Time: l.Time, SandboxID: l.Pod, Credential: l.Secret, Host: l.Host, Port: l.Port,
		Kind: l.Decision, Where: l.Where, Reason: l.Reason}
}

// lineLog writes Lines from a goroutine of its own: egress calls Log on
// connection goroutines, and a pod may flood the proxy on purpose, so a
// line that does not fit the buffer is dropped and counted.
type lineLog struct {
	ch      chan Line
	quit    chan struct{}
	done    chan struct{}
	dropped atomic.Int64
	once    sync.Once
}

func newLineLog(w io.Writer) *lineLog {
	l := &lineLog{ch: make(chan Line, 4096), quit: make(chan struct{}), done: make(chan struct{})}
	if w == nil {
		w = io.Discard
	}
	go l.write(json.NewEncoder(w))
	return l
}

// write encodes lines until close, then what is left in the buffer.
func (l *lineLog) write(enc *json.Encoder) {
	defer close(l.done)
	var reported int64
	put := func(ln Line) {
		if d := l.dropped.Load(); d > reported {
			enc.Encode(Line{Time: time.Now().UTC(), Decision: "log", Dropped: d - reported})
			reported = d
		}
		enc.Encode(ln)
	}
	for {
		select {
		case ln := <-l.ch:
			put(ln)
		case <-l.quit:
			for {
				select {
				case ln := <-l.ch:
					put(ln)
				default:
					return
				}
			}
		}
	}
}

func (l *lineLog) logger(server string) func(egress.Event) {
	return func(ev egress.Event) {
		ln := Line{Time: ev.Time.UTC(), Server: server, Pod: ev.SandboxID, Kind: ev.Kind, Host: ev.Host, Port: ev.Port,
			Decision: ev.Decision, Rule: ev.Rule, Reason: ev.Reason, BytesUp: ev.BytesUp, BytesDown: ev.BytesDown,
			DurationMS: float64(ev.Duration.Microseconds()) / 1000, Package: ev.Package, Version: ev.Version}
		if ev.IP.IsValid() {
			ln.IP = ev.IP.String()
		}
		select {
		case l.ch <- ln:
		default:
			l.dropped.Add(1)
		}
	}
}

// secretLogger is logger for a server's secret events.
func (l *lineLog) secretLogger(server string) func(credinject.Event) {
	return func(ev credinject.Event) {
		ln := Line{Time: ev.Time.UTC(), Server: server, Pod: ev.SandboxID, Kind: KindSecret, Host: ev.Host, Port: ev.Port,
			Decision: ev.Kind, Reason: ev.Reason, Secret: ev.Credential, Where: ev.Where}
		select {
		case l.ch <- ln:
		default:
			l.dropped.Add(1)
		}
	}
}

// close flushes the buffered lines; a line logged later stays unwritten.
func (l *lineLog) close() {
	l.once.Do(func() { close(l.quit) })
	<-l.done
}

// Event is the egress event a decision line stands for, as a local
// sandbox's proxy reports it (the pod's name is its SandboxID).
func (l Line) Event() egress.Event {
	ev := egress.Event{Time: l.Time, SandboxID: l.Pod, Kind: l.Kind, Host: l.Host, Port: l.Port,
		Decision: l.Decision, Rule: l.Rule, Reason: l.Reason, BytesUp: l.BytesUp, BytesDown: l.BytesDown,
		Duration: time.Duration(l.DurationMS * float64(time.Millisecond)), Package: l.Package, Version: l.Version}
	if ip, err := netip.ParseAddr(l.IP); err == nil {
		ev.IP = ip
	}
	return ev
}
