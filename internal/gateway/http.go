package gateway

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions configure the Streamable HTTP endpoint.
type HTTPOptions struct {
	// Addr is the address the server listens on; requests must name a
	// host that fits it (DNS rebinding protection).
	Addr string
	// AllowedOrigins are "scheme://host[:port]" patterns, port "*" for
	// any. A request with an Origin header that matches none is refused.
	AllowedOrigins []string
	// Clients, if any, are the identities allowed in; each request must
	// carry one's bearer token. None: no authentication (loopback only;
	// the CLI enforces that), and every request is agent "local".
	Clients []Client
	// Refresh, if non-nil, is called before every request's bearer token
	// is checked. It returns the clients anew (from a token file that may
	// have been rotated; it should be cheap when nothing changed) and
	// whether they changed; changed ones replace Clients, so that from
	// then on a rotated token is accepted and the old one refused. On an
	// error the clients stay as they are. Calls are serialized. Needs
	// Clients.
	Refresh func() (clients []Client, changed bool, err error)
	// MaxBody bounds a request body; zero: 4 MiB.
	MaxBody int64
	// SessionIdle closes an MCP session with no request in flight for
	// this long, cancelling its calls (ErrSessionIdle); zero: 30 minutes.
	SessionIdle time.Duration
	// Verify, if set, checks a bearer token that is no client's (a JWT):
	// it returns the identity, which must contain a '.' (no client name
	// does), or an error, which the client gets as a bare 401.
	Verify func(ctx context.Context, token string) (identity string, err error)
	// ResourceMetadataURL, if set, is named in the WWW-Authenticate
	// header of a 401 (RFC 9728).
	ResourceMetadataURL string
	// Extra are handlers served without authentication besides the
	// endpoint, by path (the protected resource metadata).
	Extra map[string]http.Handler
	// Authed are handlers served by path behind the endpoint's own
	// authentication (the same clients, Refresh and Verify): /metrics.
	Authed map[string]http.Handler
}

// Client is an HTTP client identity.
type Client struct {
	Name  string
	Token []byte
}

// LocalAgent is the identity of an unauthenticated client (stdio, or HTTP
// without clients configured). Client names cannot begin with "_", so no
// configured client can share its sandboxes.
const LocalAgent = "_local"

// EndpointPath is where the MCP endpoint is served.
const EndpointPath = "/mcp"

// Handler returns the HTTP handler of the MCP endpoint.
func (g *Gateway) Handler(o HTTPOptions) (http.Handler, error) {
	if err := checkClients(o.Clients); err != nil {
		return nil, err
	}
	if o.Refresh != nil && len(o.Clients) == 0 {
		return nil, fmt.Errorf("refreshing clients needs clients to start with")
	}
	for _, p := range o.AllowedOrigins {
		if _, err := parseOrigin(p); err != nil {
			return nil, fmt.Errorf("allowed origin %q: %w", p, err)
		}
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 4 << 20
	}
	if o.SessionIdle <= 0 {
		o.SessionIdle = 30 * time.Minute
	}
	getServer := func(r *http.Request) *mcp.Server {
		agent := LocalAgent
		if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
			agent = ti.UserID
		}
		d, err := g.newDownstream(agent)
		if err != nil {
			return nil
		}
		d.idle = o.SessionIdle
		return d.server
	}
	// No SDK SessionTimeout: its close would wait for a hanging call;
	// sessionLife keeps the idle clock and cancels the calls first.
	var h http.Handler = g.sessionLife(mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		EventStore:          mcp.NewMemoryEventStore(nil),
		MaxRequestBodyBytes: o.MaxBody,
		Logger:              g.log,
	}))
	legacy, modern := h, g.modernHandler(o)
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isModernHTTP(r) {
			modern.ServeHTTP(w, r)
			return
		}
		legacy.ServeHTTP(w, r)
	})
	h = g.checkPOST(o.MaxBody, h)
	mux := http.NewServeMux()
	for p, x := range o.Authed {
		mux.Handle(p, x)
	}
	var authed http.Handler = accepted(mux)
	if len(o.Clients) > 0 || o.Verify != nil {
		// One check, one client set (Refresh is called serially) for the
		// endpoint and the Authed handlers.
		authed = o.requireAuth(g, accepted(mux))
	}
	mux.Handle(EndpointPath, h)
	authed = refusing(authed)
	top := http.NewServeMux()
	top.Handle(EndpointPath, authed)
	for p := range o.Authed {
		top.Handle(p, authed)
	}
	for p, x := range o.Extra {
		top.Handle(p, BodyDeadline(x)) // their own checks
	}
	if _, ok := o.Extra["/"]; !ok && o.Authed["/"] == nil {
		top.Handle("/", refusing(http.NotFoundHandler()))
	}
	return unreadBody(guard(o, top)), nil
}

func checkClients(clients []Client) error {
	for _, c := range clients {
		if len(c.Token) < 16 {
			return fmt.Errorf("client %s: token shorter than 16 bytes", c.Name)
		}
	}
	return nil
}

// clientSet is the clients whose tokens are accepted, refreshed before
// every check (see HTTPOptions.Refresh).
type clientSet struct {
	cur     atomic.Pointer[[]Client]
	refresh func() ([]Client, bool, error)
	log     *slog.Logger

	mu      sync.Mutex // serializes refresh
	lastErr string     // guarded by mu: the last refresh error logged
}

// verify refreshes the clients, then checks a bearer token against every
// client's in constant time.
func (s *clientSet) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	if s.refresh != nil {
		s.update()
	}
	if ti := match(*s.cur.Load(), token); ti != nil {
		return ti, nil
	}
	return nil, auth.ErrInvalidToken
}

func (s *clientSet) update() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clients, changed, err := s.refresh()
	if err == nil && changed {
		err = checkClients(clients)
	}
	switch {
	case err != nil:
		// Once per distinct error, not once per request.
		if err.Error() != s.lastErr {
			s.log.Warn("refreshing client tokens; the current ones stay", "err", err)
		}
		s.lastErr = err.Error()
		return
	case changed:
		s.cur.Store(&clients)
	}
	s.lastErr = ""
}

func match(clients []Client, token string) *auth.TokenInfo {
	m := -1
	for i, c := range clients {
		if subtle.ConstantTimeCompare([]byte(token), c.Token) == 1 {
			m = i
		}
	}
	if m < 0 {
		return nil
	}
	return &auth.TokenInfo{UserID: clients[m].Name}
}

// guard refuses requests whose Host or Origin header does not fit: a web
// page's script must not reach the gateway through DNS rebinding or a
// cross-site request.
func guard(o HTTPOptions, next http.Handler) http.Handler {
	bindHost, _, _ := net.SplitHostPort(o.Addr)
	origins := make([]origin, 0, len(o.AllowedOrigins))
	for _, p := range o.AllowedOrigins {
		og, _ := parseOrigin(p)
		origins = append(origins, og)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(bindHost, r.Host) {
			closeAfter(w)
			http.Error(w, "Forbidden: invalid Host header", http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(r, o) && !originAllowed(origins, o) {
			closeAfter(w)
			http.Error(w, "Forbidden: cross-origin request refused (Origin must be this endpoint's own, or one in listen.http.allowed_origins)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// closeAfter has the answer to a refused request end its connection
// (Connection: close), and unreadBody keeps net/http from reading the
// rest of its body: it would read up to 256 KiB before the answer and
// again before it closes, and a client that sends it slowly, without a
// token, would hold the connection (and a file descriptor) for as long
// as it liked.
func closeAfter(w http.ResponseWriter) { w.Header().Set("Connection", "close") }

// unreadBody stops reading a request's body once its handler has
// answered it with Connection: close.
func unreadBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		if w.Header().Get("Connection") == "close" {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		}
	})
}

// bodyReadTimeout is how long a request to a handler that needs no token
// may take to send its body (BodyDeadline): as long as its headers.
const bodyReadTimeout = 10 * time.Second

// BodyDeadline bounds the read of a request's body for a handler that
// needs no token (HTTPOptions.Extra: /healthz, the dashboard) to
// bodyReadTimeout. Such a handler may answer without reading the body,
// and net/http then reads the rest (up to 256 KiB) before it answers,
// with no deadline: a client that sends a Content-Length and then
// nothing would hold the connection, and a file descriptor, for as long
// as it liked, without a token. A request without a body is left alone:
// a read deadline would end a long answer (the dashboard's event stream)
// through net/http's background read.
func BodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyReadTimeout))
		}
		next.ServeHTTP(w, r)
	})
}

// refusing answers with Connection: close unless the request gets past
// the bearer check (accepted): a 401 ends its connection at once.
func refusing(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		closeAfter(w)
		next.ServeHTTP(w, r)
	})
}

// accepted marks a request that passed the bearer check: its connection
// is kept alive as usual.
func accepted(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Del("Connection")
		next.ServeHTTP(w, r)
	})
}

// hostAllowed: on a loopback or unnamed bind, the Host must be a loopback
// name; on a specific address, that address or a loopback name; on the
// unspecified address (which needs TLS and tokens), any.
func hostAllowed(bindHost, hostHeader string) bool {
	h := hostHeader
	if hh, port, err := net.SplitHostPort(hostHeader); err == nil {
		if port != "" {
			if _, err := strconv.ParseUint(port, 10, 16); err != nil {
				return false // not a port: no Host a client of ours sends
			}
		}
		h = hh
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	if isLoopbackName(h) {
		return true
	}
	ip := net.ParseIP(bindHost)
	switch {
	case bindHost == "" || (ip != nil && ip.IsLoopback()) || bindHost == "localhost":
		return false
	case ip != nil && ip.IsUnspecified():
		return true
	}
	return strings.EqualFold(h, strings.Trim(bindHost, "[]"))
}

func isLoopbackName(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// sameOrigin reports whether the Origin is the endpoint itself: a page
// served from the gateway's own (already checked) host and port.
func sameOrigin(r *http.Request, header string) bool {
	u, ok := parseOriginHeader(header)
	if !ok {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return strings.EqualFold(u.Scheme, scheme) && strings.EqualFold(u.Host, r.Host)
}

type origin struct{ scheme, host, port string }

// parseOrigin parses "scheme://host[:port]"; port may be "*".
func parseOrigin(s string) (origin, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || scheme == "" || rest == "" || strings.ContainsAny(rest, "/?#@") {
		return origin{}, fmt.Errorf("want scheme://host[:port]")
	}
	host, port := rest, ""
	if h, p, err := net.SplitHostPort(rest); err == nil {
		host, port = h, p
	}
	return origin{strings.ToLower(scheme), strings.ToLower(strings.Trim(host, "[]")), port}, nil
}

func originAllowed(allowed []origin, header string) bool {
	u, ok := parseOriginHeader(header)
	if !ok {
		return false
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	for _, a := range allowed {
		if a.scheme == strings.ToLower(u.Scheme) && a.host == host && (a.port == "*" || a.port == port) {
			return true
		}
	}
	return false
}

// parseOriginHeader parses an Origin header, which browsers send as
// "scheme://host[:port]" and nothing more; anything else (user info, a
// path, a query or fragment) is no origin and matches none.
func parseOriginHeader(header string) (*url.URL, bool) {
	u, err := url.Parse(header)
	if err != nil || u.Scheme == "" || u.Host == "" || u.User != nil || u.Opaque != "" ||
		u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(header, "#?@") {
		return nil, false
	}
	return u, true
}
