package launch

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/cgroup"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/redact"
)

// RemoteOptions configure a Remote.
type RemoteOptions struct {
	// URL is the server's Streamable HTTP endpoint, or with SSE its SSE
	// endpoint.
	URL string
	// SSE speaks the legacy HTTP+SSE transport (2024-11-05): a GET that
	// streams events, the first naming the endpoint to POST messages to,
	// which must be on URL's origin.
	SSE bool
	// Detect chooses between Streamable HTTP and SSE at each connect, by
	// the spec's backwards-compatibility probe (detectSSE).
	Detect bool
	// Headers maps header names (e.g. Authorization) to the secret
	// references of their values, resolved at each connect; nil: none.
	Headers map[string]string
	// Query maps URL query parameter names (e.g. api_key) to the secret
	// references of their values, resolved at each connect and set on
	// every request (of URL's origin only); nil: none.
	Query map[string]string
	// Book learns the header and query values (and the token of "Bearer
	// TOKEN"), so that the gateway redacts them if the server echoes
	// them. Nil: no book learns them.
	Book *redact.Book
	// OAuth, if set, adds the token of a login (see RemoteOAuth).
	OAuth *RemoteOAuth
	// Logger, if non-nil, is told of each session the server lost and
	// the new one opened for it (renewingConn); nil: nothing is logged.
	Logger *slog.Logger
}

// Remote connects to a remote server over Streamable HTTP, with
// headers (e.g. Authorization) whose values come from secret references.
type Remote struct {
	url     string
	sse     bool
	detect  bool
	headers map[string]string // header name → secret reference
	query   map[string]string // query parameter name → secret reference
	book    *redact.Book
	oauth   *RemoteOAuth
	log     *slog.Logger

	live liveSet // the connections open
}

// NewRemote returns the backend of a remote server.
func NewRemote(opts RemoteOptions) *Remote {
	return &Remote{url: opts.URL, sse: opts.SSE, detect: opts.Detect, headers: opts.Headers, query: opts.Query, book: opts.Book, oauth: opts.OAuth, log: opts.Logger}
}

// remoteInstance is one connection to a remote server.
type remoteInstance struct {
	l     *Remote
	scope gateway.Scope
	conn  mcp.Connection
	once  sync.Once
	// version is the protocol version the gateway's initialize agreed on
	// (a string; unset before it and for the sessionless revision).
	version *atomic.Value
	cancel  context.CancelFunc // ends the SSE event stream's request
}

// Start connects to the remote server (Remote.connect).
func (l *Remote) Start(ctx context.Context, scope gateway.Scope) (Instance, error) {
	in, err := l.connect(ctx, scope)
	if err != nil {
		return nil, err
	}
	return in, nil
}

// Release keeps nothing: a remote server's state is its own.
func (l *Remote) Release(gateway.Scope) {}

// List returns the connections open.
func (l *Remote) List() []Instance { return l.live.list() }

// connect resolves the headers' and query parameters' secrets with ctx
// and connects.
func (l *Remote) connect(ctx context.Context, scope gateway.Scope) (*remoteInstance, error) {
	h, q, err := l.credentials(ctx)
	if err != nil {
		return nil, err
	}
	o, err := originOf(l.url)
	if err != nil {
		return nil, err
	}
	version := new(atomic.Value)
	bottom := unreachable{o.Host, http.DefaultTransport}
	base := headerTransport{h, q, version, gateway.BoundedBodies(bottom, gateway.DefaultMaxMessage+1024, "server")}
	sse := l.sse
	if l.detect {
		rt, err := l.withOAuth(scope, base, false)
		if err != nil {
			return nil, err
		}
		if sse, err = detectSSE(ctx, &http.Client{Transport: rt, CheckRedirect: noRedirect}, l.url); err != nil {
			return nil, fmt.Errorf("connecting to %s: %w", l.url, err)
		}
	}
	rt, err := l.withOAuth(scope, base, sse)
	if err != nil {
		return nil, err
	}
	// headerTransport sets the headers on every request it makes, a
	// redirect's too: a redirect may stay on the origin, never leave it.
	post := &firstStatus{rt: sameOrigin{o, rt}, method: http.MethodPost}
	var t mcp.Transport = &mcp.StreamableClientTransport{Endpoint: l.url, HTTPClient: &http.Client{Transport: post}, MaxRetries: 2}
	cctx, cancel := ctx, context.CancelFunc(func() {})
	var gs *firstStatus
	if sse {
		// The event stream is the GET of Connect and lives as long as its
		// context: not ctx (the start's), but until the connection closes.
		cctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
		defer context.AfterFunc(ctx, cancel)()
		// The server names the message endpoint: it must not send the
		// headers or the token anywhere but to the configured origin.
		gs = &firstStatus{rt: sameOrigin{o, rt}, method: http.MethodGet}
		client := &http.Client{Transport: gs, CheckRedirect: noRedirect}
		t = &mcp.SSEClientTransport{Endpoint: l.url, HTTPClient: client}
	}
	c, err := t.Connect(cctx)
	if err != nil {
		cancel()
		if !l.detect && gs.is(http.StatusBadRequest, http.StatusMethodNotAllowed) {
			// What a Streamable HTTP server answers a GET without a session.
			return nil, fmt.Errorf("connecting to %s over HTTP+SSE (transport: sse): %w; a Streamable HTTP server takes transport: streamable (the default) or auto", l.url, err)
		}
		if gs != nil {
			err = fmt.Errorf("%w%s", err, l.refusedHint(gs.status.Load()))
		}
		return nil, fmt.Errorf("connecting to %s: %w", l.url, err)
	}
	if !sse {
		c = newRenewingConn(&hintConn{c, post, !l.detect, l.refusedHint}, func(ctx context.Context) (mcp.Connection, error) {
			c, err := t.Connect(ctx)
			if err != nil {
				return nil, err
			}
			return &hintConn{c, post, !l.detect, l.refusedHint}, nil
		}, l.log)
	}
	in := &remoteInstance{l: l, scope: scope, conn: c, version: version, cancel: cancel}
	l.live.add(in)
	return in, nil
}

// firstStatus records the status of the first request of its method it
// passes (the SSE event stream's GET, the initialize POST), so that a
// connection error can say the server looks like one of the other
// transport.
type firstStatus struct {
	rt     http.RoundTripper
	method string
	status atomic.Int32
}

// RoundTrip passes r on and notes the status of the first of its method.
func (g *firstStatus) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := g.rt.RoundTrip(r)
	if err == nil && r.Method == g.method {
		g.status.CompareAndSwap(0, int32(resp.StatusCode))
	}
	return resp, err
}

// is says whether the recorded status is one of codes.
func (g *firstStatus) is(codes ...int) bool {
	return g != nil && slices.Contains(codes, int(g.status.Load()))
}

// hintConn adds to a failed write of a Streamable HTTP connection whose
// first POST the server answered with 401 or 403 which credentials it was
// sent (refused), and, with transport, one it answered as one of the
// HTTP+SSE transport would (a 4xx other than 401 and 403: the spec's
// backwards-compatibility test, as detectSSE), naming the transport to
// configure.
type hintConn struct {
	mcp.Connection
	post      *firstStatus
	transport bool
	refused   func(status int32) string
}

func (c hintConn) Write(ctx context.Context, m jsonrpc.Message) error {
	err := c.Connection.Write(ctx, m)
	if err == nil {
		return nil
	}
	switch st := c.post.status.Load(); {
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		return fmt.Errorf("%w%s", err, c.refused(st))
	case c.transport && st >= 400 && st < 500 && !isDiscover(m):
		// Not for the 2026 probe, which a 2025 server refuses with 400.
		return fmt.Errorf("%w (if it speaks the HTTP+SSE transport of 2024-11-05, it takes transport: sse, or auto)", err)
	}
	return err
}

// isDiscover reports whether m is the server/discover request with which
// the gateway asks a server whether it speaks 2026.
func isDiscover(m jsonrpc.Message) bool {
	r, ok := m.(*jsonrpc.Request)
	return ok && r.Method == "server/discover"
}

// refusedHint says, for a 401 or 403 of the server, which credentials it
// was sent (their references, never their values), so that the user
// knows what to check; "" for another status.
func (l *Remote) refusedHint(status int32) string {
	if status != http.StatusUnauthorized && status != http.StatusForbidden {
		return ""
	}
	var sent []string
	for _, n := range slices.Sorted(maps.Keys(l.headers)) {
		sent = append(sent, "header "+n+" from "+l.headers[n])
	}
	for _, n := range slices.Sorted(maps.Keys(l.query)) {
		sent = append(sent, "query parameter "+n+" from "+l.query[n])
	}
	if l.oauth != nil {
		sent = append(sent, "the token of its login (mcpbox login)")
	}
	if len(sent) == 0 {
		return " (the server wants credentials: give it headers, query or oauth in the config)"
	}
	return " (the server refused the credentials it was sent: check " + strings.Join(sent, ", ") + ")"
}

// withOAuth wraps rt with the OAuth token of the scope's agent, if the
// server has oauth; sse widens the token to the server's origin.
func (l *Remote) withOAuth(scope gateway.Scope, rt http.RoundTripper, sse bool) (http.RoundTripper, error) {
	if l.oauth == nil {
		return rt, nil
	}
	return l.oauthTransport(scope, rt, sse)
}

// detectSSE is the spec's backwards-compatibility probe: a POST of
// initialize that a Streamable HTTP server answers 2xx (the session it
// made is deleted at once), and a server of the old HTTP+SSE transport
// with a 4xx such as 404 or 405. 401 and 403 are about credentials, not
// the transport: Streamable HTTP is assumed, and its connection reports
// them.
func detectSSE(ctx context.Context, hc *http.Client, u string) (bool, error) {
	body := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"mcpbox","version":"transport-probe"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
			if del, err := http.NewRequestWithContext(ctx, http.MethodDelete, u, nil); err == nil {
				del.Header.Set("Mcp-Session-Id", sid)
				if r, err := hc.Do(del); err == nil {
					r.Body.Close()
				}
			}
		}
		return false, nil
	case c == http.StatusUnauthorized || c == http.StatusForbidden:
		return false, nil
	case c >= 400 && c < 500:
		return true, nil
	}
	return false, nil
}

// credentials resolves the headers and query parameters and teaches the
// book their values.
func (l *Remote) credentials(ctx context.Context) (http.Header, url.Values, error) {
	h := http.Header{}
	for name, ref := range l.headers {
		v, err := l.learn(ctx, "header", name, ref)
		if err != nil {
			return nil, nil, err
		}
		// The token of "Bearer TOKEN" may show up alone.
		if scheme, token, ok := strings.Cut(v, " "); l.book != nil && ok && len(token) >= redact.MinValueLen && !strings.ContainsAny(scheme, "=:") {
			if err := l.book.Add(name, []byte(token)); err != nil {
				return nil, nil, fmt.Errorf("header %s: %w", name, err)
			}
		}
		h.Set(name, v)
	}
	var q url.Values
	for name, ref := range l.query {
		v, err := l.learn(ctx, "query parameter", name, ref)
		if err != nil {
			return nil, nil, err
		}
		// A key inside the value (base64 JSON, as Smithery's config=)
		// may come back alone.
		for _, inner := range config.EncodedCredentials(v, redact.Shaped) {
			if l.book == nil || len(inner) < redact.MinValueLen {
				continue
			}
			if err := l.book.Add(name, []byte(inner)); err != nil {
				return nil, nil, fmt.Errorf("query parameter %s: %w", name, err)
			}
		}
		if q == nil {
			q = url.Values{}
		}
		q.Set(name, v)
	}
	return h, q, nil
}

// learn resolves ref, the value of the header or query parameter
// (what) name, and teaches the book the value.
func (l *Remote) learn(ctx context.Context, what, name, ref string) (string, error) {
	v, err := ResolveSecret(ctx, name, ref, false)
	if err == nil && l.book != nil {
		err = l.book.Add(name, v.Value)
	}
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", what, name, err)
	}
	return string(v.Value), nil
}

// Scope is the scope the connection serves.
func (in *remoteInstance) Scope() gateway.Scope { return in.scope }

// Stop closes the connection.
func (in *remoteInstance) Stop() {
	in.once.Do(func() {
		in.conn.Close()
		in.cancel()
		in.l.live.remove(in)
	})
}

// Pause is not supported: the server runs elsewhere.
func (in *remoteInstance) Pause() error { return ErrUnsupported }

// Resume is not supported: the server runs elsewhere.
func (in *remoteInstance) Resume() error { return ErrUnsupported }

// Stats is not supported: the server runs elsewhere.
func (in *remoteInstance) Stats() (cgroup.Stats, error) { return cgroup.Stats{}, ErrUnsupported }

// process hands the gateway the connection; the gateway closes it
// itself, so its Stop only forgets it.
func (in *remoteInstance) Process() *gateway.Process {
	return &gateway.Process{Conn: in.conn, Stop: func() { in.cancel(); in.l.live.remove(in) },
		Negotiated: func(v string) { in.version.Store(v) }}
}

// sameOrigin refuses requests to another scheme or host than origin's.
type sameOrigin struct {
	origin *url.URL
	next   http.RoundTripper
}

func (t sameOrigin) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != t.origin.Scheme || r.URL.Host != t.origin.Host {
		return nil, fmt.Errorf("refusing to send to %s://%s: the server's message endpoint must be on %s://%s", r.URL.Scheme, r.URL.Host, t.origin.Scheme, t.origin.Host)
	}
	return t.next.RoundTrip(r)
}

func originOf(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("remote server url %q is not an absolute URL", raw)
	}
	return u, nil
}

// noRedirect keeps a redirect from taking a request (and its headers)
// elsewhere: the answer is passed on as it is.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// headerTransport adds the configured headers, and the negotiated
// protocol version where a request names none: the gateway speaks to the
// connection directly, so the go-sdk transport never learns the version
// its initialize agreed on.
type headerTransport struct {
	h       http.Header
	q       url.Values    // set on every request's URL
	version *atomic.Value // string, set by Process.Negotiated
	next    http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	if len(t.q) > 0 {
		// On the clone's URL: the caller's (which errors quote) stays
		// without the values. The server's own query is kept as it is
		// written unless it names one of the parameters.
		q := r.URL.Query()
		if slices.ContainsFunc(slices.Collect(maps.Keys(t.q)), q.Has) {
			maps.Copy(q, t.q)
			r.URL.RawQuery = q.Encode()
		} else if r.URL.RawQuery == "" {
			r.URL.RawQuery = t.q.Encode()
		} else {
			r.URL.RawQuery += "&" + t.q.Encode()
		}
	}
	if v, _ := t.version.Load().(string); v != "" && r.Header.Get("Mcp-Protocol-Version") == "" {
		r.Header.Set("Mcp-Protocol-Version", v)
	}
	// A 2026 server's tools/call gets its Mcp-Param-* headers, which the
	// go-sdk adds only to calls made through its own CallTool.
	for k, v := range gateway.ParamHeaders(r.Context()) {
		r.Header.Set(k, v)
	}
	return t.next.RoundTrip(r)
}
