package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Server is one upstream MCP server and the gateway policy around it.
type Server struct {
	Name string
	// Prefix is prepended to its tool and prompt names; "" for none.
	// Prefixes of one gateway must be unique and none may begin another.
	Prefix string
	Scope  string // ScopeAgent, ScopeSession or ScopeShared
	// Launch starts the server for a scope: a sandboxed process, or a
	// connection to a remote server. An error that wraps ErrNotSetUp
	// (NotSetUp) started nothing.
	Launch func(ctx context.Context, scope Scope) (*Process, error)
	// Ready, if set, returns a channel that is closed once the server is
	// set up (its package, installing in the background for minutes,
	// installed); it may begin a setup that is due (a retry). Launch may
	// then still fail. Each start waits for it outside StartTimeout, and
	// a session's opening request does not: a server still being set up
	// joins the session once it runs, announced by list_changed.
	Ready func() <-chan struct{}
	// Allow and Deny are tool name globs (path.Match) on the server's own
	// names; a tool must match Allow and not Deny. A hidden tool is
	// "unknown" to lists and calls alike.
	Allow, Deny []string
	// CallTimeout bounds each request to the server: tools/call, the other
	// forwarded requests, and the lists and subscriptions the gateway asks for.
	CallTimeout time.Duration // zero: Options.CallTimeout
	// StartTimeout bounds a launch and the server's opening handshake
	// together; zero: 60 s. A backend whose own start may take longer (a
	// pod's image pulled) sets its bound plus the handshake's.
	StartTimeout time.Duration
	MaxOutput    int64  // largest result passed back; zero: no limit
	MaxMessage   int    // largest message read from the server; zero: DefaultMaxMessage
	Restart      string // RestartNo, RestartOnFailure or RestartAlways
	// Release, if set, is called once an instance's scope is over (its
	// session ended, or the gateway closed) and its process stopped: the
	// place to remove what belonged to that scope only.
	Release func(scope Scope)
	// Refresh, if set, replaces a running server with a newly launched one
	// (newly resolved secrets) after this long: short-lived credentials
	// (a secret's ttl). Calls in flight finish on the old process.
	Refresh time.Duration
	// Idle, if set, is how long an instance may go without requests
	// before IdleAction: IdlePause freezes it (Process.Pause; the next
	// request resumes it first), IdleStop stops it (the next request
	// starts a new one). Without Process.Pause, IdlePause stops.
	Idle       time.Duration
	IdleAction string
	// IdleStop stops a paused instance this long after its last request;
	// zero: never.
	IdleStop time.Duration
	// MaxLifetime stops an instance this long after it started, whatever
	// it is doing; the next request starts a new one. Zero: never.
	MaxLifetime time.Duration
}

// Idle actions.
const (
	IdlePause = "pause"
	IdleStop  = "stop"
)

// Scopes: whose sandbox serves a session.
const (
	ScopeAgent   = "agent"   // one per client identity
	ScopeSession = "session" // one per MCP session
	ScopeShared  = "shared"  // one for everybody
)

// Restart policies.
const (
	RestartNo        = "no"
	RestartOnFailure = "on-failure"
	RestartAlways    = "always"
)

// Scope says whom an upstream instance serves.
type Scope struct {
	Agent   string // the client identity; "" for a shared instance
	Session string // the MCP session, for ScopeSession; else ""
	// Modern: the instance serves 2026-07-28 clients. A server speaks one
	// revision per connection, so the clients of the two eras get
	// separate instances (and sandboxes) of a server in the same scope
	// (see modern.go); a launcher keeps one workspace for both.
	Modern bool
}

// Hooks are the seams for policy, redaction and audit. Nil fields do nothing.
type Hooks struct {
	// Filter sees every payload that leaves an upstream server (results,
	// notifications, server→client requests, log samples) before anyone
	// else and returns what to pass on: redaction goes here.
	Filter func(server string, raw []byte) []byte
	// Call runs around every tools/call: it may refuse the call, or
	// observe and replace its result. next forwards the call upstream.
	Call func(ctx context.Context, c *Call, next func(context.Context) (json.RawMessage, error)) (json.RawMessage, error)
	// List, if set, sees each server's list of one kind (KindTools,
	// KindPrompts, KindResources or KindTemplates) as one agent's session
	// is about to see it, after the tool filter and before prefixing, and
	// returns the items that agent may see. The gateway asks it again for
	// the single item a tools/call or prompts/get names, so that what it
	// hides cannot be used either: pinning and per-client policy go here.
	// At initialize it also sees each server's instructions as a list of
	// KindInstructions (see InstructionsItem; empty if the server sent
	// none): the text reaches the client only if the item comes back.
	// gen names the server's list items come from: the hook sees the same
	// items (for the same agent, server and kind) whenever it sees the
	// same gen, so it may remember its answer by it; 0 names no list
	// (instructions), whose answers must not be remembered.
	List func(agent, server, kind string, gen uint64, items []Item) []Item
	// Session, if set, is told when a client session starts (after
	// initialize) and when it ends.
	Session func(ev SessionEvent)
	// Restart, if set, is told what the restart policy decided each time
	// a server's process ended or failed to start: a restart after a
	// delay, or giving up on it for that scope.
	Restart func(ev RestartEvent)
	// Unknown, if set, is told of each tools/call refused as an unknown
	// tool before Call saw it: a name no server's prefix routes (Server
	// ""), a tool its server's Allow/Deny hides, or one the List hook
	// hides or the server does not list. why says which. The audit
	// records these too: a client trying hidden tools is worth knowing.
	// It is also told of a call that ended before its tool could be
	// looked up (UnknownCancelled, UnknownUnlistable, UnknownNotStarted),
	// and of a 2026 call refused because its Mcp-* headers do not match
	// its body (UnknownHeaderMismatch), the go-sdk refused it for its
	// _meta (UnknownProtocolRefused), its session could not be opened
	// (UnknownNoSession), its requestState was refused
	// (UnknownStateRefused) or too many calls wait for input
	// (UnknownTooManyWaiting): nothing ran, and the audit still has one
	// record per call.
	Unknown func(c *Call, why string)
}

// Why a tools/call was refused as an unknown tool (Hooks.Unknown).
const (
	UnknownNoServer = "no server's prefix routes the name"
	UnknownHidden   = "the server's tool filter hides it (mcpbox run --allow-tool/--deny-tool)"
	UnknownUnlisted = "not in the tools/list this client was given"
	// Not unknown, but never run: the call was cancelled, its server's
	// tools could not be listed, or its server is down for the session,
	// before its definition was found.
	UnknownCancelled  = "cancelled before its server's tools were listed"
	UnknownUnlistable = "its server's tools could not be listed"
	UnknownNotStarted = "its server did not start for this session"
	// Refused, not unknown: the call's Mcp-Method, Mcp-Name or
	// Mcp-Param-* headers are missing, do not match its body, or cannot be
	// checked against it (SEP-2243).
	UnknownHeaderMismatch = "its Mcp-* headers do not match its body or cannot be checked"
	// Refused before it ran: a 2026 retry whose requestState is not one
	// the gateway issued for this call and round (tampered, replayed,
	// expired, for other arguments), or a new call while too many of the
	// session's calls wait for input.
	UnknownStateRefused   = "its requestState was refused"
	UnknownTooManyWaiting = "too many of the session's calls were waiting for input"
	// Refused before the gateway's session received it: the go-sdk
	// answered a 2026 call itself (no protocol version in its _meta, or
	// not the one of its MCP-Protocol-Version header; an Accept or
	// Content-Type it does not take).
	UnknownProtocolRefused = "the MCP layer refused it before the session saw it (its _meta or its HTTP headers)"
	// Never run: a 2026 client's gateway session could not be opened
	// (too many sessions for the client, no server started) or has ended.
	UnknownNoSession = "the client's gateway session could not be opened or has ended"
	// Refused before it ran: its arguments are not a JSON object.
	UnknownBadArguments = "its arguments are not a JSON object"
)

// List kinds, as Hooks.List sees them.
const (
	KindTools     = "tools"
	KindPrompts   = "prompts"
	KindResources = "resources"
	KindTemplates = "templates"
	// KindInstructions is a server's initialize instructions: a list of
	// at most one item, InstructionsItem.
	KindInstructions = "instructions"
)

// InstructionsKey is the key of a server's instructions item.
const InstructionsKey = "instructions"

// InstructionsItem is a server's instructions text as the List hook sees
// it: {"instructions": text, "name": "instructions"}.
func InstructionsItem(text string) Item {
	raw, _ := json.Marshal(map[string]string{"name": InstructionsKey, "instructions": text})
	return Item{Key: InstructionsKey, Raw: raw}
}

// Item is one entry of a server's list: its key (a tool or prompt name, a
// resource URI or a URI template) and its raw JSON.
type Item struct {
	Key string
	Raw json.RawMessage
}

// SessionEvent is a client session starting or ending.
type SessionEvent struct {
	Agent, Session string
	// MCPSession is the id the client knows the session by (the
	// Mcp-Session-Id of Streamable HTTP); "" over stdio.
	MCPSession string
	Client     string // the client's name and version from initialize
	End        bool
}

// Call describes a tools/call for Hooks.Call.
type Call struct {
	Agent string
	// Session is the gateway's id of the client session (what scope
	// session sandboxes are keyed by); MCPSession the id the client knows
	// it by (Mcp-Session-Id), "" over stdio.
	Session    string
	MCPSession string
	Server     string
	// Scope is the scope of the server's instance that runs the call
	// (from Server.Scope): whose sandbox it is.
	Scope     Scope
	Tool      string // the server's own name
	Name      string // the name the client called: Tool with the server's prefix
	Arguments json.RawMessage
	// Definition is the tool's entry in the server's current tools/list
	// (untrusted: it comes from the server); nil if it lists no such tool.
	Definition json.RawMessage
	// Elicit, when the calling client declared elicitation, asks it to pick
	// one of choices (a human answering a form) and returns the choice:
	// "deny" when the user declined the form (and "deny" is a choice), ""
	// when they dismissed it. Nil when the client cannot be asked.
	Elicit func(ctx context.Context, message string, choices []string) (string, error)
	// Progress, when the client sent a progressToken with the call, tells
	// it a note on the call's progress (notifications/progress with that
	// token and message), such as that it waits for a person, before the
	// server has the call, at most once a call. Its progress is 0; the
	// server's own notes on that call that would not increase on it (the
	// spec wants each note's progress above the last) are lifted just
	// above the last value sent (upstream.onNotify). Nil when the client
	// sent no token.
	Progress func(message string)
	// Trace is the W3C trace context the client sent with the call
	// (_meta traceparent), "" if none: for the audit record.
	Trace string
	// Leaving is closed when the client is leaving (a stdio client closed
	// its input): its calls still run to their answers, which it reads,
	// but one waiting to run (for a human's approval) should be withdrawn,
	// with ErrInputEnded: nobody would see its result. Nil: never.
	Leaving <-chan struct{}
}

// Options configure a Gateway.
type Options struct {
	Logger  *slog.Logger // nil: discard
	Version string       // reported as the gateway's and client's version
	Hooks   Hooks
	// CallTimeout is the Server.CallTimeout of servers that set none;
	// zero: DefaultCallTimeout. A server that never answers then ties up
	// a call for this long at most.
	CallTimeout time.Duration
	// PageSize is the most items one list response holds; zero: 1000.
	PageSize int
	// MaxSessions bounds the open sessions of one agent (client
	// identity), those still initializing included; zero: 64.
	MaxSessions int
}

// DefaultCallTimeout is the time limit of a request to a server when
// neither Server.CallTimeout nor Options.CallTimeout sets one.
const DefaultCallTimeout = 5 * time.Minute

// Gateway aggregates servers for any number of downstream sessions.
type Gateway struct {
	servers []*Server
	opts    Options
	log     *slog.Logger
	// startWait and startTimeout are sessionStartWait and startTimeout
	// when the gateway was made: its goroutines read them, and may
	// outlive a test that set the package variables.
	startWait, startTimeout time.Duration

	mu       sync.Mutex
	pool     map[poolKey]*upstream
	sessions map[*downstream]struct{} // open, or initializing (their slot reserved)
	mcpIDs   map[string]*downstream   // open HTTP sessions by Mcp-Session-Id
	modern   map[string]*downstream   // the HTTP gateway session of each client identity's 2026 requests
	mrtr     *mrtrKeys                // signs the requestState of translated multi round-trip requests
	closed   bool
	done     chan struct{} // closed by Close

	// lifeDone is closed when the lifecycle goroutine has returned:
	// Close waits for it, so that no pause or idle stop of it runs on
	// after the gateway (and what its hooks write to) is gone.
	lifeDone chan struct{}

	// stopping counts the instances stopped by a session's end whose
	// start was under way (release): Close waits for them too.
	stopping sync.WaitGroup

	// listSeq numbers the server lists fetched: the gen Hooks.List sees.
	listSeq atomic.Uint64

	// schemaWarned holds the "server" and "server\x00tool" keys already
	// warned about by clientTool, so that each list does not repeat it.
	schemaWarned sync.Map

	// fastCalls counts the tools/call requests answered by the stdio
	// fast path (fastcall.go), so that a test notices when calls stop
	// taking it; slowStdio (tests) sends every request through the SDK.
	fastCalls atomic.Int64
	slowStdio bool
}

type poolKey struct {
	server string
	scope  Scope // with the era (Scope.Modern)
}

var prefixRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]{0,64}$`) })

// New checks the servers and returns a gateway for them.
func New(servers []*Server, opts Options) (*Gateway, error) {
	if len(servers) == 0 {
		return nil, errors.New("no servers")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 1000
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 64
	}
	seen := map[string]bool{}
	for i, s := range servers {
		switch {
		case s.Name == "" || seen[s.Name]:
			return nil, fmt.Errorf("server %d: missing or duplicate name %q", i, s.Name)
		case s.Launch == nil:
			return nil, fmt.Errorf("server %s: no launcher", s.Name)
		case !prefixRE().MatchString(s.Prefix):
			return nil, fmt.Errorf("server %s: prefix %q: want up to 64 of A-Z a-z 0-9 _ . -", s.Name, s.Prefix)
		}
		seen[s.Name] = true
		for _, g := range append(append([]string{}, s.Allow...), s.Deny...) {
			if _, err := path.Match(g, ""); err != nil {
				return nil, fmt.Errorf("server %s: tool glob %q: %w", s.Name, g, err)
			}
		}
		for _, o := range servers[:i] {
			if strings.HasPrefix(s.Prefix, o.Prefix) || strings.HasPrefix(o.Prefix, s.Prefix) {
				return nil, fmt.Errorf("servers %s and %s: prefixes %q and %q overlap, so their names could collide", o.Name, s.Name, o.Prefix, s.Prefix)
			}
		}
	}
	g := &Gateway{
		servers: servers, opts: opts, log: opts.Logger, startWait: sessionStartWait, startTimeout: startTimeout,
		pool: map[poolKey]*upstream{}, sessions: map[*downstream]struct{}{}, mcpIDs: map[string]*downstream{}, modern: map[string]*downstream{}, mrtr: newMRTRKeys(),
		done: make(chan struct{}), lifeDone: make(chan struct{}),
	}
	go func() {
		defer close(g.lifeDone)
		g.lifecycle(lifecycleTick(servers))
	}()
	return g, nil
}

// filter applies Hooks.Filter.
func (g *Gateway) filter(server string, raw []byte) []byte {
	if g.opts.Hooks.Filter == nil || len(raw) == 0 {
		return raw
	}
	return g.opts.Hooks.Filter(server, raw)
}

// filterJSON is filter for a JSON value a client is sent: false if the
// filter left it no longer JSON (a redacted secret whose value is JSON
// text, matched across the value's structure), which the client must
// not get. A large result goes out as is (stdioConn.writeRaw, the SDK's
// encoder would refuse a small one and leave the call unanswered), and
// could then shift its strings' quotes. Only a changed value is parsed.
func (g *Gateway) filterJSON(server string, raw json.RawMessage) (json.RawMessage, bool) {
	out := g.filter(server, raw)
	if bytes.Equal(out, raw) || json.Valid(out) {
		return out, true
	}
	return nil, false
}

// callTimeout is the time limit of one request to srv.
func (g *Gateway) callTimeout(srv *Server) time.Duration {
	if srv.CallTimeout > 0 {
		return srv.CallTimeout
	}
	return g.opts.CallTimeout
}

// scopeOf is the scope of srv's instance that serves downstream session
// d: by srv's scope, d's agent and id, and d's era.
func (srv *Server) scopeOf(d *downstream) Scope {
	d.mu.Lock()
	modern := d.modern
	d.mu.Unlock()
	switch srv.Scope {
	case ScopeShared:
		return Scope{Modern: modern}
	case ScopeSession:
		return Scope{Agent: d.agent, Session: d.id, Modern: modern}
	}
	return Scope{Agent: d.agent, Modern: modern}
}

// upstream returns the instance of srv that serves d, creating it.
func (g *Gateway) upstream(srv *Server, d *downstream, caps json.RawMessage) (*upstream, error) {
	scope := srv.scopeOf(d)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, errStopped
	}
	key := poolKey{srv.Name, scope}
	u := g.pool[key]
	if u == nil {
		u = newUpstream(g, srv, scope)
		g.pool[key] = u
	}
	u.attach(d, caps)
	return u, nil
}

// release detaches d from u and stops u if it served only d's session.
func (g *Gateway) release(u *upstream, d *downstream, subs []string) {
	if !u.detach(d, subs) || u.scope.Session == "" {
		return
	}
	g.mu.Lock()
	delete(g.pool, poolKey{u.srv.Name, u.scope})
	g.mu.Unlock()
	if started := u.stop(); started != nil {
		// A start under way ends soon (stop ended its context). Not
		// waited for here, where a session's end (a DELETE, a hang-up)
		// is answered; Close waits for it.
		g.mu.Lock()
		if !g.closed {
			g.stopping.Add(1)
			g.mu.Unlock()
			go func() {
				defer g.stopping.Done()
				<-started
				u.release()
			}()
			return
		}
		g.mu.Unlock()
		<-started
	}
	u.release()
}

// ServeStdio serves one MCP session over r and w (a client that launched
// mcpbox) as agent until the client hangs up or ctx ends.
func (g *Gateway) ServeStdio(ctx context.Context, agent string, r io.ReadCloser, w io.WriteCloser) error {
	d, err := g.newDownstream(agent)
	if err != nil {
		return err
	}
	d.swaps = newSwapTable()
	ss, err := d.server.Connect(ctx, &stdioTransport{r: r, w: w, swaps: d.swaps, log: g.log, d: d}, nil)
	if err != nil {
		d.close()
		return fmt.Errorf("connecting stdio session: %w", err)
	}
	stop := context.AfterFunc(ctx, func() {
		if d.cancelCalls(ErrShutdown) {
			d.quiesce()
		}
		d.fast.closing()
		ss.Close()
	})
	defer stop()
	err = ss.Wait()
	d.fast.wait() // the SDK does not wait for the calls it did not see
	d.close()
	if ctx.Err() != nil || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// Close stops every session and server; it returns when all sandboxes are
// gone and the lifecycle goroutine (idle pauses and stops) has returned. Calls in flight and calls waiting for approval are cancelled first
// (cause ErrShutdown), then the servers stop, then the sessions close: a
// call that hangs cannot hold the gateway open.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if !g.closed {
		close(g.done)
	}
	g.closed = true
	ups := make([]*upstream, 0, len(g.pool))
	for _, u := range g.pool {
		ups = append(ups, u)
	}
	g.pool = map[poolKey]*upstream{}
	sessions := make([]*downstream, 0, len(g.sessions))
	for d := range g.sessions {
		sessions = append(sessions, d)
	}
	g.mu.Unlock()
	busy := make([]bool, len(sessions))
	for i, d := range sessions {
		busy[i] = d.cancelCalls(ErrShutdown)
	}
	var wg sync.WaitGroup
	for _, u := range ups {
		wg.Go(func() {
			if started := u.stop(); started != nil {
				<-started
			}
			u.release()
		})
	}
	wg.Wait()
	g.stopping.Wait()
	for i, d := range sessions {
		wg.Go(func() { d.finish(busy[i]) })
	}
	wg.Wait()
	// Last: a pause or idle stop under way ends with the stops above.
	<-g.lifeDone
	return nil
}

// Refresh replaces every running instance of server with a newly launched
// one (newly resolved secrets: `mcpbox secrets rotate`), waiting until
// they run; calls in flight finish on the old ones. It returns how many
// instances were renewed.
func (g *Gateway) Refresh(server string) int {
	g.mu.Lock()
	var ups []*upstream
	for k, u := range g.pool {
		if k.server == server {
			ups = append(ups, u)
		}
	}
	g.mu.Unlock()
	n := 0
	for _, u := range ups {
		u.mu.Lock()
		p := u.peer
		u.mu.Unlock()
		if p != nil && u.refresh(p) {
			n++
		}
	}
	return n
}

// ListChanged tells every session bound to server that its lists may
// differ (what Hooks.List lets through changed: a tool was trusted, a
// policy reloaded); "" means every server.
func (g *Gateway) ListChanged(server string) {
	g.mu.Lock()
	var ds []*downstream
	for d := range g.sessions {
		ds = append(ds, d)
	}
	g.mu.Unlock()
	for _, d := range ds {
		d.mu.Lock()
		bs := d.bound
		d.mu.Unlock()
		for _, b := range bs {
			if b.ok() && (server == "" || b.srv.Name == server) {
				d.listChanged(b.u, b.u.info().caps)
			}
		}
	}
}

// filter returns the tools of items that srv exposes (items itself when
// that is all of them).
func (srv *Server) filter(items []Item) []Item {
	for i, it := range items {
		if srv.allowed(it.Key) {
			continue
		}
		out := slices.Clone(items[:i])
		for _, it := range items[i+1:] {
			if srv.allowed(it.Key) {
				out = append(out, it)
			}
		}
		return out
	}
	return items
}

// allowed reports whether srv exposes tool.
func (srv *Server) allowed(tool string) bool {
	match := func(globs []string) bool {
		return slices.ContainsFunc(globs, func(g string) bool { return MatchTool(g, tool) })
	}
	return match(srv.Allow) && !match(srv.Deny)
}
