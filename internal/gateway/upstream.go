package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// upstreamProtocol is the protocol version the gateway asks upstream
// servers for; they may answer with an older one.
const upstreamProtocol = "2025-11-25"

// startTimeout bounds launching a server and its initialize handshake
// (node servers in a fresh sandbox take a while on a loaded host).
const startTimeout = 60 * time.Second

// Restart limits: a server that ends more than crashLoopMax times within
// crashWindow is given up on; between attempts the delay doubles from
// restartBase up to restartMax.
const (
	crashLoopMax = 5
	crashWindow  = 2 * time.Minute
	restartBase  = 250 * time.Millisecond
	restartMax   = 30 * time.Second
)

// upstream is one server for one scope: at most one running process (and
// its MCP session) at a time, restarted per Server.Restart.
type upstream struct {
	gw    *Gateway
	srv   *Server
	scope Scope
	log   *slog.Logger
	// life ends when the upstream is stopped: background restarts and
	// refreshes run under it.
	life    context.Context
	endLife context.CancelFunc

	mu   sync.Mutex
	peer *peer
	proc *Process
	// watched is closed once the end of peer has been accounted for
	// (restart policy); a get that finds peer ended waits for it.
	watched  chan struct{}
	starting chan struct{} // non-nil while a start is under way
	init     initInfo
	lists    map[string][]item // cached list results by kind
	listGen  int               // bumped when the server announces a change
	sessions map[*downstream]struct{}
	calls    []*inflight // in flight, oldest first
	tokens   map[string]*inflight
	subs     map[string]int // resource URI → downstream subscriptions
	level    string         // most recent logging/setLevel
	// clientCaps are the capabilities of the first client attached, which
	// the server is told (roots, sampling, elicitation): a server may offer
	// tools only to clients that can serve them.
	clientCaps json.RawMessage
	crashes    []time.Time
	lastErr    error // why the last process ended
	failed     error // permanent: restart is off or the crash loop limit hit
	stopped    bool
	nextTok    int64
	stale      *peer // the running session, once Server.Refresh has passed
}

// initInfo is what the upstream said in its initialize result.
type initInfo struct {
	Protocol     string          `json:"protocolVersion"`
	Capabilities json.RawMessage `json:"capabilities"`
	ServerInfo   json.RawMessage `json:"serverInfo"`
	Instructions string          `json:"instructions,omitempty"`
	caps         capabilities
}

// capabilities are the upstream capabilities the gateway routes by.
type capabilities struct {
	Tools     *struct{} `json:"tools"`
	Prompts   *struct{} `json:"prompts"`
	Resources *struct {
		Subscribe bool `json:"subscribe"`
	} `json:"resources"`
	Logging     *struct{} `json:"logging"`
	Completions *struct{} `json:"completions"`
}

// inflight is a request a downstream session forwarded and is waiting on.
// Notifications the upstream sends while it runs (progress, logging) are
// queued on events and sent by the waiting handler, on the request's own
// stream and before its response.
type inflight struct {
	d      *downstream
	p      *peer           // the session the request went to
	ctx    context.Context // the downstream handler's context
	token  any             // the client's progress token, nil if none
	gwTok  string          // the token the upstream sees
	events chan func()
}

func newUpstream(gw *Gateway, srv *Server, scope Scope) *upstream {
	life, end := context.WithCancel(context.Background())
	return &upstream{
		gw: gw, srv: srv, scope: scope, life: life, endLife: end,
		log:      gw.log.With("server", srv.Name, "agent", scope.Agent),
		lists:    map[string][]item{},
		sessions: map[*downstream]struct{}{},
		tokens:   map[string]*inflight{},
		subs:     map[string]int{},
	}
}

// errStopped is returned once the gateway stopped an upstream.
var errStopped = errors.New("server stopped")

// get returns a live session with the server, starting or restarting it
// as its restart policy allows.
func (u *upstream) get(ctx context.Context) (*peer, error) {
	for {
		u.mu.Lock()
		if u.stopped {
			u.mu.Unlock()
			return nil, errStopped
		}
		if u.peer != nil && u.peer != u.stale {
			select {
			case <-u.peer.done:
				watched := u.watched
				u.mu.Unlock()
				select {
				case <-watched:
					continue
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			default:
				p := u.peer
				u.mu.Unlock()
				return p, nil
			}
		}
		if u.failed != nil {
			err := u.failed
			u.mu.Unlock()
			return nil, err
		}
		if wait := u.starting; wait != nil {
			u.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		delay := u.backoff()
		if u.stale != nil && u.stale == u.peer {
			delay = 0 // a refresh, not a crash
		}
		done := make(chan struct{})
		u.starting = done
		u.mu.Unlock()

		err := u.start(ctx, delay)

		u.mu.Lock()
		u.starting = nil
		if err != nil {
			u.recordFailureLocked(err)
		}
		u.mu.Unlock()
		close(done)
		if err != nil {
			return nil, err
		}
	}
}

// backoff is the delay before the next start: zero for the first one.
// Called with u.mu held.
func (u *upstream) backoff() time.Duration {
	n := len(u.crashes)
	if n == 0 {
		return 0
	}
	d := restartBase << (n - 1)
	if d > restartMax || d <= 0 {
		d = restartMax
	}
	return time.Until(u.crashes[n-1].Add(d))
}

// recordFailureLocked notes that the process ended or could not start and
// decides whether a later get may try again.
func (u *upstream) recordFailureLocked(err error) {
	now := time.Now()
	u.crashes = slices.DeleteFunc(u.crashes, func(t time.Time) bool { return now.Sub(t) > crashWindow })
	u.crashes = append(u.crashes, now)
	u.lastErr = err
	switch {
	case u.srv.Restart == RestartNo:
		u.failed = fmt.Errorf("server %s ended (%v); restart is off", u.srv.Name, err)
	case len(u.crashes) > crashLoopMax:
		u.failed = fmt.Errorf("server %s ended %d times within %s; giving up (last: %v)", u.srv.Name, len(u.crashes), crashWindow, err)
	}
}

// start launches the server, runs the initialize handshake and restores
// the log level and subscriptions an earlier process had.
func (u *upstream) start(ctx context.Context, delay time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	proc, err := u.srv.Launch(ctx, u.scope)
	if err != nil {
		return fmt.Errorf("starting server %s: %w", u.srv.Name, err)
	}
	var c conn = proc.Conn
	if proc.Conn == nil {
		// Closing the connection closes the server's stdin only, which asks
		// it to exit; its stdout stays open until it has (Process.Stop), so
		// that a server writing while it shuts down does not die of EPIPE.
		c = newLineConn(proc.Stdout, proc.Stdin, proc.Stdin, u.srv.MaxMessage, u.dropped)
	}
	p := newPeer(c, u.onRequest, u.onNotify)
	info, err := u.handshake(ctx, p)
	if err != nil {
		p.close()
		proc.stop()
		return fmt.Errorf("server %s: %w", u.srv.Name, err)
	}
	u.mu.Lock()
	if u.stopped {
		u.mu.Unlock()
		p.close()
		proc.stop()
		return errStopped
	}
	restarted := u.init.Protocol != ""
	oldPeer, oldProc := u.peer, u.proc
	u.peer, u.proc, u.init = p, proc, info
	u.stale = nil
	watched := make(chan struct{})
	u.watched = watched
	u.lists = map[string][]item{}
	level, subs := u.level, make([]string, 0, len(u.subs))
	for uri := range u.subs {
		subs = append(subs, uri)
	}
	sessions := u.sessionsLocked()
	u.mu.Unlock()

	if level != "" && info.caps.Logging != nil {
		_, _ = p.call(ctx, "logging/setLevel", map[string]string{"level": level})
	}
	for _, uri := range subs {
		_, _ = p.call(ctx, "resources/subscribe", map[string]string{"uri": uri})
	}
	go u.watch(p, proc, watched)
	if oldPeer != nil {
		go u.retire(oldPeer, oldProc)
	}
	if d := u.srv.Refresh; d > 0 {
		time.AfterFunc(d, func() { u.refresh(p) })
	}
	if restarted {
		u.log.Info("server restarted")
		// Its lists may differ from the last process's.
		for _, d := range sessions {
			d.listChanged(u, info.caps)
		}
	}
	return nil
}

func (u *upstream) handshake(ctx context.Context, p *peer) (initInfo, error) {
	u.mu.Lock()
	caps := u.clientCaps
	u.mu.Unlock()
	if caps == nil {
		caps = json.RawMessage(`{}`)
	}
	params := map[string]any{
		"protocolVersion": upstreamProtocol,
		"capabilities":    caps,
		"clientInfo":      map[string]any{"name": "mcpbox", "version": u.gw.opts.Version},
	}
	raw, err := p.call(ctx, "initialize", params)
	if err != nil {
		return initInfo{}, fmt.Errorf("initialize: %w", err)
	}
	raw = u.gw.filter(u.srv.Name, raw) // instructions and serverInfo reach clients
	var info initInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		return initInfo{}, fmt.Errorf("initialize: bad result: %w", err)
	}
	if len(info.Capabilities) > 0 {
		if err := json.Unmarshal(info.Capabilities, &info.caps); err != nil {
			return initInfo{}, fmt.Errorf("initialize: bad capabilities: %w", err)
		}
	}
	if err := p.notify(ctx, "notifications/initialized", nil); err != nil {
		return initInfo{}, err
	}
	return info, nil
}

// watch waits for the session to end and stops the process.
func (u *upstream) watch(p *peer, proc *Process, watched chan struct{}) {
	defer close(watched)
	err := p.wait()
	proc.stop()
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.peer != p {
		return
	}
	u.peer, u.proc = nil, nil
	if u.stopped {
		return
	}
	if d := proc.describe(); d != "" {
		err = fmt.Errorf("%s", d)
	}
	u.log.Warn("server ended", "err", err)
	u.recordFailureLocked(err)
	if u.failed == nil && u.srv.Restart == RestartOnFailure && proc.Clean != nil && proc.Clean() {
		u.failed = fmt.Errorf("server %s exited with status 0; restart is on-failure", u.srv.Name)
	}
	if u.failed == nil && len(u.sessions) > 0 {
		// Back at once (after the backoff), so that clients waiting for
		// notifications need not send a request first.
		go func() {
			ctx, cancel := context.WithTimeout(u.life, startTimeout+restartMax)
			defer cancel()
			if _, err := u.get(ctx); err != nil {
				u.log.Warn("restart failed", "err", err)
			}
		}()
	}
}

// retireWait bounds how long a replaced process may finish its calls.
const retireWait = time.Minute

// refresh replaces session p with a new process now, unless p has
// already ended or been replaced.
func (u *upstream) refresh(p *peer) {
	u.mu.Lock()
	if u.peer != p || u.stopped {
		u.mu.Unlock()
		return
	}
	u.stale = p
	u.mu.Unlock()
	u.log.Info("refreshing server (secret ttl)")
	ctx, cancel := context.WithTimeout(u.life, startTimeout)
	defer cancel()
	if _, err := u.get(ctx); err != nil {
		u.log.Warn("refresh failed", "err", err)
	}
}

// retire ends a replaced session once no call is using it.
func (u *upstream) retire(p *peer, proc *Process) {
	deadline := time.Now().Add(retireWait)
	for time.Now().Before(deadline) {
		u.mu.Lock()
		busy := slices.ContainsFunc(u.calls, func(in *inflight) bool { return in.p == p })
		u.mu.Unlock()
		if !busy {
			break
		}
		select {
		case <-p.done:
		case <-time.After(50 * time.Millisecond):
			continue
		}
		break
	}
	p.close()
	proc.stop()
}

// release calls Server.Release once the process is gone.
func (u *upstream) release() {
	if u.srv.Release != nil {
		u.srv.Release(u.scope)
	}
}

// stop ends the server for good.
func (u *upstream) stop() {
	u.endLife()
	u.mu.Lock()
	u.stopped = true
	p, proc := u.peer, u.proc
	u.peer, u.proc = nil, nil
	u.mu.Unlock()
	if p != nil {
		p.close()
	}
	if proc != nil {
		proc.stop()
	}
}

// dropped records a message the server sent that was not forwarded.
func (u *upstream) dropped(reason string, sample []byte) {
	// Redacted whole, then cut: a cut first could split a value and leave
	// its first bytes unrecognised.
	sample = u.gw.filter(u.srv.Name, sample)
	if len(sample) > 120 {
		sample = sample[:120]
	}
	u.log.Warn("dropped a message from the server", "reason", reason, "sample", string(sample))
}

func (u *upstream) attach(d *downstream, caps json.RawMessage) {
	u.mu.Lock()
	if u.clientCaps == nil {
		u.clientCaps = caps
	}
	u.sessions[d] = struct{}{}
	u.mu.Unlock()
}

// detach forgets d and its subscriptions; it reports whether no session
// is left.
func (u *upstream) detach(d *downstream, subs []string) bool {
	u.mu.Lock()
	delete(u.sessions, d)
	for _, uri := range subs {
		if u.subs[uri]--; u.subs[uri] <= 0 {
			delete(u.subs, uri)
		}
	}
	empty := len(u.sessions) == 0
	u.mu.Unlock()
	return empty
}

func (u *upstream) sessionsLocked() []*downstream {
	out := make([]*downstream, 0, len(u.sessions))
	for d := range u.sessions {
		out = append(out, d)
	}
	return out
}

func (u *upstream) info() initInfo {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.init
}

// begin registers a forwarded request; the returned token replaces the
// client's progress token (nil: the client asked for no progress).
func (u *upstream) begin(d *downstream, p *peer, ctx context.Context, token any) *inflight {
	in := &inflight{d: d, p: p, ctx: ctx, token: token, events: make(chan func(), 256)}
	u.mu.Lock()
	defer u.mu.Unlock()
	if token != nil {
		u.nextTok++
		in.gwTok = fmt.Sprintf("mcpbox-%d", u.nextTok)
		u.tokens[in.gwTok] = in
	}
	u.calls = append(u.calls, in)
	return in
}

func (u *upstream) end(in *inflight) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if in.gwTok != "" {
		delete(u.tokens, in.gwTok)
	}
	u.calls = slices.DeleteFunc(u.calls, func(c *inflight) bool { return c == in })
}

// soleCallLocked returns the latest request in flight when all requests
// in flight come from one session, else nil.
func (u *upstream) soleCallLocked() *inflight {
	n := len(u.calls)
	if n == 0 {
		return nil
	}
	last := u.calls[n-1]
	for _, in := range u.calls {
		if in.d != last.d {
			return nil
		}
	}
	return last
}

// agentsLocked counts the distinct agents attached.
func (u *upstream) agentsLocked() int {
	seen := map[string]bool{}
	for d := range u.sessions {
		seen[d.agent] = true
	}
	return len(seen)
}

// queue hands f to the request's handler; when the client is too slow to
// keep up, the notification is dropped rather than stalling the server.
func (in *inflight) queue(f func()) bool {
	select {
	case in.events <- f:
		return true
	default:
		return false
	}
}

// onNotify routes a notification from the server. It runs on the peer's
// read loop and never blocks on a client.
func (u *upstream) onNotify(n *jsonrpc.Request) {
	params := u.gw.filter(u.srv.Name, n.Params)
	switch n.Method {
	case "notifications/progress":
		var p struct {
			Token any `json:"progressToken"`
		}
		if json.Unmarshal(params, &p) != nil {
			return
		}
		tok, _ := p.Token.(string)
		u.mu.Lock()
		in := u.tokens[tok]
		u.mu.Unlock()
		if in == nil {
			return
		}
		out, err := setField(params, "progressToken", in.token)
		if err != nil {
			return
		}
		in.queue(func() { in.d.notify(in.ctx, n.Method, out) })
	case "notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed":
		u.mu.Lock()
		delete(u.lists, listKind(n.Method))
		u.listGen++
		sessions := u.sessionsLocked()
		u.mu.Unlock()
		for _, d := range sessions {
			d.post(context.Background(), n.Method, params)
		}
	case "notifications/resources/updated":
		var p struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(params, &p) != nil {
			return
		}
		u.mu.Lock()
		sessions := u.sessionsLocked()
		u.mu.Unlock()
		for _, d := range sessions {
			if d.subscribed(p.URI) {
				d.post(context.Background(), n.Method, params)
			}
		}
	default:
		// Logging and anything newer: to the session whose calls are in
		// flight, on its latest call's stream; with no call in flight, to
		// every session. Never across agents when several are in flight
		// or attached: a log line may carry one client's data.
		u.mu.Lock()
		in, sessions, agents := u.soleCallLocked(), u.sessionsLocked(), u.agentsLocked()
		u.mu.Unlock()
		if in != nil {
			if !in.queue(func() { in.d.notify(in.ctx, n.Method, params) }) {
				u.log.Warn("client too slow: notification dropped", "method", n.Method)
			}
			return
		}
		if agents > 1 {
			u.log.Debug("notification not forwarded: the server is shared by several agents", "method", n.Method)
			return
		}
		for _, d := range sessions {
			d.post(context.Background(), n.Method, params)
		}
	}
}

func listKind(notification string) string {
	switch notification {
	case "notifications/tools/list_changed":
		return "tools"
	case "notifications/prompts/list_changed":
		return "prompts"
	}
	return "resources" // also drops templates: see list
}

// onRequest answers a server→client request.
func (u *upstream) onRequest(ctx context.Context, req *jsonrpc.Request) (json.RawMessage, error) {
	switch req.Method {
	case "ping":
		return json.RawMessage("{}"), nil
	case "roots/list":
		u.mu.Lock()
		roots := u.proc.roots()
		u.mu.Unlock()
		return json.Marshal(map[string]any{"roots": roots})
	}
	params := u.gw.filter(u.srv.Name, req.Params)
	d, dctx, err := u.requester(req.Method)
	if err != nil {
		return nil, err
	}
	// Cancelled when the server cancels, not when some call ends.
	dctx, cancel := context.WithCancel(context.WithoutCancel(dctx))
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	return d.request(dctx, req.Method, params)
}

// requester finds the client a server→client request is meant for. A
// stdio server's request does not say which call it serves, so the
// gateway only answers when that is unambiguous: the one session with
// calls in flight, or the one session attached. It never guesses: a
// sampling prompt sent to the wrong client would hand one client's data
// to another. The context routes the request onto the stream of the
// session's only call in flight, if there is exactly one.
func (u *upstream) requester(method string) (*downstream, context.Context, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var d *downstream
	var only *inflight
	n := 0
	for _, in := range u.calls {
		if d != nil && in.d != d {
			return nil, nil, rpcError(jsonrpc.CodeInternalError, "mcpbox: %s: several client sessions have calls in flight on this server, so it cannot tell whose this request is (give the server scope: session)", method)
		}
		d, only = in.d, in
		n++
	}
	if d == nil {
		if len(u.sessions) != 1 {
			return nil, nil, rpcError(jsonrpc.CodeInternalError, "mcpbox: %s: no single client session to ask", method)
		}
		for s := range u.sessions {
			d = s
		}
	}
	ctx := context.Background()
	if n == 1 {
		ctx = only.ctx
	}
	return d, ctx, nil
}

// item is one entry of a list result: its key (name, uri or uriTemplate)
// and its raw JSON.
type item struct {
	key string
	raw json.RawMessage
}

// listSpec says how to list one kind of thing.
type listSpec struct{ method, field, key string }

var listSpecs = map[string]listSpec{
	"tools":     {"tools/list", "tools", "name"},
	"prompts":   {"prompts/list", "prompts", "name"},
	"resources": {"resources/list", "resources", "uri"},
	"templates": {"resources/templates/list", "resourceTemplates", "uriTemplate"},
}

// maxPages bounds how many pages of one list the gateway follows.
const maxPages = 100

// list returns every item of kind, following pagination, from the cache
// when the server has not announced a change since.
func (u *upstream) list(ctx context.Context, kind string) ([]item, error) {
	if kind == "templates" {
		// Templates have no list_changed of their own: cache them with resources.
		u.mu.Lock()
		_, fresh := u.lists["resources"]
		if !fresh {
			delete(u.lists, "templates")
		}
		u.mu.Unlock()
	}
	u.mu.Lock()
	if items, ok := u.lists[kind]; ok {
		u.mu.Unlock()
		return items, nil
	}
	gen := u.listGen
	u.mu.Unlock()
	p, err := u.get(ctx)
	if err != nil {
		return nil, err
	}
	spec := listSpecs[kind]
	var items []item
	cursor := ""
	for range maxPages {
		var params any
		if cursor != "" {
			params = map[string]string{"cursor": cursor}
		}
		raw, err := p.call(ctx, spec.method, params)
		if err != nil {
			return nil, err
		}
		raw = u.gw.filter(u.srv.Name, raw)
		var page map[string]json.RawMessage
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("%s: bad result: %w", spec.method, err)
		}
		var entries []json.RawMessage
		if err := json.Unmarshal(page[spec.field], &entries); err != nil && page[spec.field] != nil {
			return nil, fmt.Errorf("%s: bad %s: %w", spec.method, spec.field, err)
		}
		for _, e := range entries {
			var k map[string]json.RawMessage
			var key string
			if json.Unmarshal(e, &k) != nil || json.Unmarshal(k[spec.key], &key) != nil || key == "" {
				u.dropped(spec.method+": entry without "+spec.key, e)
				continue
			}
			items = append(items, item{key: key, raw: e})
		}
		cursor = ""
		_ = json.Unmarshal(page["nextCursor"], &cursor)
		if cursor == "" {
			break
		}
	}
	u.mu.Lock()
	if u.peer == p && u.listGen == gen {
		u.lists[kind] = items // not if a change was announced meanwhile
	}
	u.mu.Unlock()
	return items, nil
}

// setLevel forwards logging/setLevel and remembers it for restarts.
func (u *upstream) setLevel(ctx context.Context, level string) {
	u.mu.Lock()
	u.level = level
	u.mu.Unlock()
	if u.info().caps.Logging == nil {
		return
	}
	if p, err := u.get(ctx); err == nil {
		_, _ = p.call(ctx, "logging/setLevel", map[string]string{"level": level})
	}
}

// subscribe counts a downstream subscription and forwards the first one.
func (u *upstream) subscribe(ctx context.Context, uri string, on bool) error {
	u.mu.Lock()
	n := u.subs[uri]
	if on {
		u.subs[uri] = n + 1
	} else if n > 0 {
		if u.subs[uri] = n - 1; n == 1 {
			delete(u.subs, uri)
		}
	}
	u.mu.Unlock()
	if (on && n > 0) || (!on && n != 1) {
		return nil
	}
	p, err := u.get(ctx)
	if err != nil {
		return err
	}
	method := "resources/subscribe"
	if !on {
		method = "resources/unsubscribe"
	}
	_, err = p.call(ctx, method, map[string]string{"uri": uri})
	return err
}

// Process is a running upstream server, as a Launch function returns it.
// Set either Stdin and Stdout (a stdio server) or Conn (e.g. a go-sdk
// StreamableClientTransport's connection to a remote server).
type Process struct {
	Stdin  io.WriteCloser
	Stdout io.ReadCloser
	Conn   mcp.Connection
	// Roots answer the server's roots/list: the sandbox's own mounts,
	// never the client's host paths.
	Roots []Root
	// Stop ends the process and frees what it holds; it is called once,
	// after the connection is closed, and may block until the process is gone.
	Stop func()
	// Describe, if set, says how the process ended (e.g. its exit status),
	// for logs and error messages.
	Describe func() string
	// Clean, if set, reports whether the process ended by exiting with
	// status 0 (restart on-failure leaves such a server stopped).
	Clean func() bool

	once sync.Once
}

// Root is one entry of a roots/list answer.
type Root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

func (p *Process) stop() {
	p.once.Do(func() {
		if p.Conn != nil {
			p.Conn.Close()
		}
		if p.Stop != nil {
			p.Stop()
		}
	})
}

func (p *Process) describe() string {
	if p == nil || p.Describe == nil {
		return ""
	}
	return p.Describe()
}

func (p *Process) roots() []Root {
	if p == nil || p.Roots == nil {
		return []Root{}
	}
	return p.Roots
}
