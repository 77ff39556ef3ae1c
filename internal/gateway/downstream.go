package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// downstream is one MCP session with a client and its view of the
// servers: which upstream instance serves it for each server.
type downstream struct {
	// Set by newDownstream, then only read.
	gw     *Gateway
	agent  string
	id     string // the gateway's own id: scopes sandboxes and workspaces
	server *mcp.Server
	// ctx ends with the session (DELETE, idle, hang-up, shutdown); every
	// request's context is bound to it, so ending a session cancels its
	// calls. cancel gives the reason (ErrSessionEnded, ...).
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // closed by close
	// leaving is closed by inputEnded: the client closed its input
	// (Call.Leaving).
	leaving   chan struct{}
	leaveOnce sync.Once
	// Set before the session is served (ServeStdio, Handler), then only read.
	swaps *swapTable    // set when the session runs on stdioTransport
	fast  *fastCalls    // likewise, unless the fast path is off (fastcall.go)
	idle  time.Duration // HTTP: close after this long without a request; zero: never
	// modern: the session serves 2026-07-28 requests (see modern.go): the
	// HTTP gateway session of a client identity (set before it is
	// served), or a stdio session bound by such a request (set then).
	// Guarded by mu once served.
	modern bool

	bindMu sync.Mutex // serializes bindModern

	queued   atomic.Int64 // bytes waiting in out
	starting atomic.Int32 // servers still starting for the session (bound.state nil)
	lists    listNotes    // list_changed waiting, coalesced (flood.go); has its own lock

	mu         sync.Mutex
	ss         *mcp.ServerSession   // guarded by mu
	mcpID      string               // the transport's session id (Mcp-Session-Id), once known; guarded by mu
	bound      []*bound             // guarded by mu; its elements are fixed once published, but for bound.state
	told       bool                 // the client was answered (start): a start ending later joins late; guarded by mu
	subs       map[string]*upstream // resource URI → the upstream it was subscribed on; guarded by mu
	level      string               // guarded by mu
	out        chan func()          // set once, at initialize; guarded by mu
	closed     bool                 // guarded by mu
	started    bool                 // bound by a 2026 request (no ss); guarded by mu
	parked     map[string]*parked   // 2026 calls waiting for input (mrtr.go); guarded by mu
	listens    map[*listen]struct{} // open subscriptions/listen streams (modern.go); guarded by mu
	listenURIs map[string]int       // resource URI → listens that want its updates; guarded by mu
	posts      int                  // HTTP requests in flight; guarded by mu
	handlers   int                  // requests being handled (bind); guarded by mu
	timer      *time.Timer          // the idle clock, once initialized over HTTP; guarded by mu
	once       sync.Once            // for close
}

// outboxSize bounds the notifications queued for one slow client; more
// are dropped so that one client cannot stall a shared server.
const outboxSize = 1024

// newDownstream makes the go-sdk server for one client session.
func (g *Gateway) newDownstream(agent string) (*downstream, error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, errStopped
	}
	g.mu.Unlock()
	// Random, so that a session never meets a leftover of an earlier run.
	id := "s" + strings.ToLower(rand.Text()[:16])
	d := &downstream{gw: g, agent: agent, id: id, subs: map[string]*upstream{}, done: make(chan struct{}), leaving: make(chan struct{})}
	d.ctx, d.cancel = context.WithCancelCause(context.Background())
	d.server = mcp.NewServer(&mcp.Implementation{Name: "mcpbox", Version: g.opts.Version}, &mcp.ServerOptions{
		// A superset, so that the SDK lets every notification through;
		// initialize answers with what the upstreams really have.
		Capabilities: &mcp.ServerCapabilities{
			Tools:       &mcp.ToolCapabilities{ListChanged: true},
			Prompts:     &mcp.PromptCapabilities{ListChanged: true},
			Resources:   &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
			Logging:     &mcp.LoggingCapabilities{},
			Completions: &mcp.CompletionCapabilities{},
		},
		// Both eras: a legacy session binds to its servers at
		// initialize, a 2026-07-28 client at its first request
		// (bindModern). The SDK refuses the new revision on the stateful
		// HTTP handler, which only legacy requests reach.
		SupportedProtocolVersions: mcp.SupportedProtocolVersions(),
		SubscribeHandler:          func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler:        func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	d.server.AddReceivingMiddleware(d.receive)
	d.server.AddSendingMiddleware(d.send)
	return d, nil
}

// receive answers every feature method from the upstreams; the SDK keeps
// initialize's version negotiation, ping and session state. A request of
// the sessionless revision binds the session first if nothing has, and
// its result is finished for that revision (modernResult).
func (d *downstream) receive(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ctx, unbind := d.bind(ctx)
		defer unbind()
		return d.handle(ctx, method, req, next)
	}
}

// handle is receive behind bind: ctx is already cancelled when the
// session ends, and the request counted as handled (the fast path binds
// its calls itself: fastCalls.serve).
func (d *downstream) handle(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	if !isModern(req) {
		d.awaitServer(ctx, req)
		return d.dispatch(ctx, method, req, next)
	}
	if method == "tools/call" && !takePosted(ctx) {
		return nil, rpcError(jsonrpc.CodeInternalError, "the call was answered before it reached the gateway's session")
	}
	if err := d.bindModern(ctx, req); err != nil {
		if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && p != nil {
			d.tellUnknown(p, nil, "", UnknownNoSession)
		}
		return nil, err
	}
	d.awaitServer(ctx, req)
	ctx = modernContext(ctx, req)
	if err := d.checkModernCall(ctx, req); err != nil {
		return nil, err
	}
	switch req.GetParams().(type) {
	case *mcp.DiscoverParams:
		return d.discover(ctx, method, req, next)
	case *mcp.SubscriptionsListenParams:
		return d.serveListen(ctx, method, req, next)
	}
	res, err := d.dispatch(ctx, method, req, next)
	if err != nil {
		return nil, err
	}
	return d.modernResult(method, res), nil
}

// dispatch answers one request of either era.
func (d *downstream) dispatch(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	switch p := req.GetParams().(type) {
	case *mcp.InitializeParams:
		return d.initialize(ctx, method, req, next)
	case *mcp.ListToolsParams:
		var cursor string
		if p != nil {
			cursor = p.Cursor
		}
		return d.list(ctx, "tools", cursor)
	case *mcp.CallToolParamsRaw:
		if p == nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "missing params")
		}
		return d.callTool(ctx, p)
	case *mcp.ListPromptsParams:
		var cursor string
		if p != nil {
			cursor = p.Cursor
		}
		return d.list(ctx, "prompts", cursor)
	case *mcp.GetPromptParams:
		if p == nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "missing params")
		}
		b, name, ok := d.route(p.Name, func(b *bound) bool { return b.ok() && b.u.info().caps.Prompts != nil })
		if !ok {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "unknown prompt %q", echoName(p.Name))
		}
		if _, ok, err := d.lookup(ctx, b, KindPrompts, name); err != nil {
			return nil, d.clientError(b, err)
		} else if !ok {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "unknown prompt %q", echoName(p.Name))
		}
		args, _ := json.Marshal(p.Arguments)
		return d.forwardInput(ctx, b, method, p.Name, args, p.RequestState, p.InputResponses, withField(p, "name", name))
	case *mcp.ListResourcesParams:
		var cursor string
		if p != nil {
			cursor = p.Cursor
		}
		return d.list(ctx, "resources", cursor)
	case *mcp.ListResourceTemplatesParams:
		var cursor string
		if p != nil {
			cursor = p.Cursor
		}
		return d.list(ctx, "templates", cursor)
	case *mcp.ReadResourceParams:
		if p == nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "missing params")
		}
		b, err := d.resourceServer(ctx, p.URI)
		if err != nil {
			return nil, err
		}
		return d.forwardInput(ctx, b, method, p.URI, nil, p.RequestState, p.InputResponses, withField(p))
	case *mcp.SubscribeParams:
		if p == nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "missing params")
		}
		return d.subscribe(ctx, p.URI, true)
	case *mcp.UnsubscribeParams:
		if p == nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "missing params")
		}
		return d.subscribe(ctx, p.URI, false)
	case *mcp.CompleteParams:
		if p == nil || p.Ref == nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "missing params")
		}
		return d.complete(ctx, method, p)
	case *mcp.SetLoggingLevelParams:
		if p == nil {
			break
		}
		d.mu.Lock()
		d.level = string(p.Level)
		bs := d.bound
		d.mu.Unlock()
		for _, b := range bs {
			if b.ok() {
				b.u.setLevel(ctx, string(p.Level))
			}
		}
	}
	return next(ctx, method, req)
}

// initialize starts (or joins) every server before the SDK answers, then
// replaces the answer's capabilities with what the servers offer.
func (d *downstream) initialize(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	d.mu.Lock()
	again := d.ss != nil || d.bound != nil
	d.mu.Unlock()
	if again {
		return next(ctx, method, req) // the SDK answers a second initialize
	}
	if err := d.gw.admit(d); err != nil {
		return nil, err
	}
	var caps json.RawMessage
	if p, ok := req.GetParams().(*mcp.InitializeParams); ok && p != nil {
		caps = upstreamCaps(p.Capabilities)
	}
	if err := d.start(ctx, caps); err != nil {
		d.close()
		return nil, err
	}
	res, err := next(ctx, method, req)
	if err != nil {
		d.close()
		return nil, err
	}
	ss, _ := req.GetSession().(*mcp.ServerSession)
	mcpID, out := ss.ID(), make(chan func(), outboxSize)
	d.mu.Lock()
	d.ss, d.mcpID, d.out = ss, mcpID, out
	d.armIdleLocked()
	d.mu.Unlock()
	d.gw.mu.Lock()
	if mcpID != "" {
		d.gw.mcpIDs[mcpID] = d
	}
	d.gw.mu.Unlock()
	if h := d.gw.opts.Hooks.Session; h != nil {
		h(SessionEvent{Agent: d.agent, Session: d.id, MCPSession: mcpID, Client: clientName(req)})
	}
	go func() {
		ss.Wait()
		d.fast.wait()
		d.close()
	}()
	if ir, ok := res.(*mcp.InitializeResult); ok {
		ir.Capabilities, ir.Instructions = d.capabilities()
	}
	d.fast.initialized()
	go d.drain(out) // last: what it sends must follow the answer (drain)
	return res, nil
}

// inputEnded tells the session's calls that the client is leaving: it
// closed its input (stdioConn.Read), and reads only the answers to what
// it asked (Call.Leaving).
func (d *downstream) inputEnded() { d.leaveOnce.Do(func() { close(d.leaving) }) }

// clientName is "name version" of the client from its initialize request.
func clientName(req mcp.Request) string {
	p, ok := req.GetParams().(*mcp.InitializeParams)
	if !ok || p == nil || p.ClientInfo == nil {
		return ""
	}
	return strings.TrimSpace(p.ClientInfo.Name + " " + p.ClientInfo.Version)
}

// upstreamCaps are the client capabilities a server is told: the
// client's own, except roots, which the gateway answers itself with the
// sandbox's mounts (and which never change): declared whatever the
// client declared, so that a server that takes its directories from
// roots (server-filesystem with none named) serves the same paths with
// every client, as it does under pin (definitionsCaps).
func upstreamCaps(c *mcp.ClientCapabilities) json.RawMessage {
	if c == nil {
		c = &mcp.ClientCapabilities{}
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	m["roots"] = map[string]any{"listChanged": false}
	raw, _ = json.Marshal(m)
	return raw
}

func (d *downstream) capabilities() (*mcp.ServerCapabilities, string) {
	caps := &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}}
	var instructions []string
	d.mu.Lock()
	bs := d.bound
	d.mu.Unlock()
	for _, b := range bs {
		if b.state.Load() == nil {
			// Still starting: it may join the session with any list, and
			// the client must take list_changed for them. (Whether it
			// takes subscriptions is not known until it runs.)
			caps.Tools = &mcp.ToolCapabilities{ListChanged: true}
			caps.Prompts = &mcp.PromptCapabilities{ListChanged: true}
			if caps.Resources == nil {
				caps.Resources = &mcp.ResourceCapabilities{ListChanged: true}
			}
			caps.Completions = &mcp.CompletionCapabilities{}
			continue
		}
		if !b.ok() {
			continue
		}
		info := b.u.info()
		c := info.caps
		if c.Tools != nil {
			caps.Tools = &mcp.ToolCapabilities{ListChanged: true}
		}
		if c.Prompts != nil {
			caps.Prompts = &mcp.PromptCapabilities{ListChanged: true}
		}
		if c.Resources != nil {
			if caps.Resources == nil {
				caps.Resources = &mcp.ResourceCapabilities{ListChanged: true}
			}
			caps.Resources.Subscribe = caps.Resources.Subscribe || c.Resources.Subscribe
		}
		if c.Completions != nil {
			caps.Completions = &mcp.CompletionCapabilities{}
		}
		if text := d.instructions(b, info.Instructions); text != "" {
			if len(bs) == 1 {
				instructions = append(instructions, text)
			} else {
				instructions = append(instructions, fmt.Sprintf("Server %s (names prefixed %q): %s", b.srv.Name, b.srv.Prefix, text))
			}
		}
	}
	return caps, strings.Join(instructions, "\n\n")
}

// instructions returns the server's instructions text if the List hook
// lets it through (it pins and scans it like a description), else "".
// The hook also sees a server that sent none, so that text appearing
// later is new.
func (d *downstream) instructions(b *bound, text string) string {
	hook := d.gw.opts.Hooks.List
	if hook == nil {
		return text
	}
	items := []Item{}
	if text != "" {
		items = append(items, InstructionsItem(text))
	}
	for _, it := range hook(d.agent, b.srv.Name, KindInstructions, 0, items) {
		if it.Key == InstructionsKey && text != "" {
			return text
		}
	}
	return ""
}

// unknownTool refuses a tools/call of a tool the client was not given,
// telling Hooks.Unknown; b is the server the name routes to, if any.
func (d *downstream) unknownTool(p *mcp.CallToolParamsRaw, b *bound, tool, why string) (mcp.Result, error) {
	d.tellUnknown(p, b, tool, why)
	return nil, rpcError(jsonrpc.CodeInvalidParams, "unknown tool %q", echoName(p.Name))
}

// maxEchoName bounds a client's name as an error quotes it back.
const maxEchoName = 200

// echoName is a name the client sent as an error quotes it back: cut to
// maxEchoName bytes (it may be megabytes). It is not redacted: it is the
// client's own text, and a redacted echo would tell a client that guessed
// a secret's value that it had.
func echoName(name string) string {
	if len(name) > maxEchoName {
		name = strings.ToValidUTF8(name[:maxEchoName], "") + "…"
	}
	return name
}

// tellUnknown tells Hooks.Unknown of a call that does not run, and why.
func (d *downstream) tellUnknown(p *mcp.CallToolParamsRaw, b *bound, tool, why string) {
	hook := d.gw.opts.Hooks.Unknown
	if hook == nil {
		return
	}
	d.mu.Lock()
	mcpID := d.mcpID
	d.mu.Unlock()
	c := &Call{Agent: d.agent, Session: d.id, MCPSession: mcpID, Tool: tool, Name: p.Name, Arguments: p.Arguments, Trace: traceOf(p.Meta)}
	if b != nil {
		c.Server, c.Scope = b.srv.Name, b.srv.scopeOf(d)
	}
	hook(c, why)
}

// route finds the server a prefixed name belongs to.
func (d *downstream) route(name string, usable func(*bound) bool) (*bound, string, bool) {
	d.mu.Lock()
	bs := d.bound
	d.mu.Unlock()
	for _, b := range bs {
		if rest, ok := strings.CutPrefix(name, b.srv.Prefix); ok && rest != "" && usable(b) {
			return b, rest, true
		}
	}
	return nil, "", false
}

func (d *downstream) callTool(ctx context.Context, p *mcp.CallToolParamsRaw) (mcp.Result, error) {
	b, tool, ok := d.route(p.Name, func(b *bound) bool { return b.ok() && b.u.info().caps.Tools != nil })
	if !ok {
		// Not "unknown tool" when its server is known to be down: the
		// client would go looking for a typo.
		if b, tool, down := d.route(p.Name, func(b *bound) bool { return !b.ok() }); down {
			d.tellUnknown(p, b, tool, UnknownNotStarted) // audited
			return nil, notStarted(d, b)
		}
	}
	switch {
	case !ok:
		return d.unknownTool(p, nil, "", UnknownNoServer)
	case !b.srv.allowed(tool):
		return d.unknownTool(p, b, tool, UnknownHidden)
	}
	def, ok, err := d.lookup(ctx, b, KindTools, tool)
	if err != nil {
		why := UnknownUnlistable
		if ctx.Err() != nil {
			why = UnknownCancelled
		}
		d.tellUnknown(p, b, tool, why) // audited; the client gets err
		return nil, d.clientError(b, err)
	}
	if !ok {
		return d.unknownTool(p, b, tool, UnknownUnlisted)
	}
	if a := bytes.TrimSpace(p.Arguments); len(a) > 0 && a[0] != '{' && string(a) != "null" {
		// The server's SDK would answer with its decoder's message
		// (Go type names), as a tool's error.
		d.tellUnknown(p, b, tool, UnknownBadArguments)
		return nil, rpcError(jsonrpc.CodeInvalidParams, `invalid params: "arguments" must be an object`)
	}
	params := toolCallParams(p, tool)
	// The output limit is checked here, inside the hook's next, so that a
	// call hook (the audit) sees the result withheld rather than passed.
	forward := func(ctx context.Context) (json.RawMessage, error) {
		raw, err := d.call(ctx, b, "tools/call", params, d.gw.callTimeout(b.srv))
		if err == nil && b.srv.MaxOutput > 0 && int64(len(raw)) > b.srv.MaxOutput {
			d.gw.log.Warn("result over the output limit", "server", b.srv.Name, "tool", tool, "bytes", len(raw), "limit", b.srv.MaxOutput)
			return nil, &OutputLimitError{Name: p.Name, Size: int64(len(raw)), Limit: b.srv.MaxOutput}
		}
		return raw, err
	}
	exec := func(ctx context.Context) (json.RawMessage, error) {
		hook := d.gw.opts.Hooks.Call
		if hook == nil {
			return forward(ctx)
		}
		d.mu.Lock()
		mcpID := d.mcpID
		d.mu.Unlock()
		c := &Call{Agent: d.agent, Session: d.id, MCPSession: mcpID, Server: b.srv.Name, Scope: b.srv.scopeOf(d), Tool: tool, Name: p.Name,
			Arguments: p.Arguments, Definition: def.Raw, Elicit: d.elicitor(), Trace: traceOf(p.Meta), Leaving: d.leaving}
		if modernOf(ctx) != nil {
			c.Elicit = d.modernElicitor(ctx)
		}
		if tok := progressToken(p.Meta); tok != nil {
			note := new(progressNote)
			ctx = context.WithValue(ctx, progressNoteKey{}, note)
			c.Progress = func(message string) {
				if note.sent.Swap(true) {
					return // one note a call: progress must increase
				}
				if raw, err := json.Marshal(map[string]any{"progressToken": tok, "progress": 0, "message": message}); err == nil {
					d.notify(ctx, "notifications/progress", raw)
				}
			}
		}
		defer b.u.hold()()
		return hook(ctx, c, forward)
	}
	var raw json.RawMessage
	if modernOf(ctx) != nil {
		// The server may ask the client something on the way: a 2026
		// client is asked through input_required results (mrtr.go), and
		// policy runs once, on the first round.
		raw, err = d.mrtrCall(ctx, "tools/call", p.Name, p.Arguments, p.RequestState, p.InputResponses, b.u.info().Protocol >= ModernVersion, exec,
			func(why string) { d.tellUnknown(p, b, tool, why) }) // audited
	} else {
		raw, err = exec(ctx)
	}
	if ole := (*OutputLimitError)(nil); errors.As(err, &ole) {
		return d.result(Refusal(ole.Error(), nil)), nil
	}
	if err != nil {
		return nil, d.clientError(b, err)
	}
	return d.result(raw), nil
}

// OutputLimitError is what a call hook's next returns when the server's
// result is larger than limits.output: the result is withheld, and the
// client gets a refusal naming the sizes.
type OutputLimitError struct {
	Name        string // the tool as the client named it
	Size, Limit int64  // bytes
}

func (e *OutputLimitError) Error() string {
	return fmt.Sprintf("mcpbox: the result of %s (%d bytes) exceeds the output limit of %d bytes", e.Name, e.Size, e.Limit)
}

// Refusal is a tool result that tells the model why a call did not run,
// or why its result was withheld: msg as its one text content, with
// isError set, and meta, if non-nil, as its _meta. Call hooks refuse
// with it too, so that every refusal has one shape.
func Refusal(msg string, meta map[string]any) json.RawMessage {
	res := map[string]any{"content": []any{map[string]string{"type": "text", "text": msg}}, "isError": true}
	if meta != nil {
		res["_meta"] = meta
	}
	b, _ := json.Marshal(res)
	return b
}

// forward sends a request to b's server and returns its raw result.
func (d *downstream) forward(ctx context.Context, b *bound, method string, params map[string]any) (mcp.Result, error) {
	raw, err := d.call(ctx, b, method, params, d.gw.callTimeout(b.srv))
	if err != nil {
		return nil, d.clientError(b, err)
	}
	return d.result(raw), nil
}

// forwardInput is forward for a request that may need the client's input
// on the way (prompts/get, resources/read): for a 2026 client, through
// input_required results (mrtr.go).
func (d *downstream) forwardInput(ctx context.Context, b *bound, method, name string, args json.RawMessage, state string, responses mcp.InputResponseMap, params map[string]any) (mcp.Result, error) {
	if modernOf(ctx) == nil {
		return d.forward(ctx, b, method, params)
	}
	raw, err := d.mrtrCall(ctx, method, name, args, state, responses, b.u.info().Protocol >= ModernVersion, func(ctx context.Context) (json.RawMessage, error) {
		return d.call(ctx, b, method, params, d.gw.callTimeout(b.srv))
	}, nil)
	if err != nil {
		return nil, d.clientError(b, err)
	}
	return d.result(raw), nil
}

// ErrCallTimeout is the cause of a call's context when call_timeout (or
// its default) expires; a Hooks.Call sees it in the error next returns.
var ErrCallTimeout = errors.New("call timeout")

// progressToken is the client's progressToken in meta; nil if there is
// none, or if it is a number float64 may not hold exactly: the SDK
// decodes _meta into float64s (2^53+1 into 2^53; toolCallParams's
// json.Number has it from there), and a note echoing such a token would
// name another request, so the call gets none.
func progressToken(meta mcp.Meta) any {
	tok := meta["progressToken"]
	var f float64
	switch t := tok.(type) {
	case float64:
		f = t
	case json.Number:
		f, _ = t.Float64()
	}
	if math.Abs(f) >= 1<<53 {
		return nil
	}
	return tok
}

// call forwards one request and, while waiting, passes on the progress and
// log notifications the server sends for it, on the request's stream.
func (d *downstream) call(ctx context.Context, b *bound, method string, params map[string]any, timeout time.Duration) (json.RawMessage, error) {
	p, err := b.u.getNow(ctx)
	if err != nil {
		return nil, err
	}
	if method == "tools/call" && p.meta != nil {
		ctx = withParamHeaders(ctx, b, params)
	}
	var token any
	meta, _ := params["_meta"].(mcp.Meta)
	if meta != nil {
		token = progressToken(meta)
		if modernOf(ctx) != nil {
			meta = upstreamMeta(meta, p.meta != nil)
			params["_meta"] = meta
		}
	}
	if p.meta != nil && modernOf(ctx) == nil {
		// A 2025 client of a server spoken to in the 2026 revision: the
		// level it set goes with each request (mrtr2025.go).
		d.mu.Lock()
		level := d.level
		d.mu.Unlock()
		if level != "" {
			m := make(mcp.Meta, len(meta)+1)
			for k, v := range meta {
				m[k] = v
			}
			m[mcp.MetaKeyLogLevel] = level
			meta = m
			params["_meta"] = m
		}
	}
	note, _ := ctx.Value(progressNoteKey{}).(*progressNote)
	in := b.u.begin(d, p, ctx, token, method == "tools/call", note != nil && note.sent.Load())
	defer b.u.end(in)
	if _, sent := meta["progressToken"]; in.gwTok != "" || sent {
		// The server sees the gateway's token, never the client's; none
		// where progressToken turned the client's down.
		m := make(map[string]any, len(meta))
		for k, v := range meta {
			m[k] = v
		}
		delete(m, "progressToken")
		if in.gwTok != "" {
			m["progressToken"] = in.gwTok
		}
		params["_meta"] = m
	}
	// The timeout: a context under ctx, or for a stdio server, whose
	// line connection writes on no context of the call's (writeContext),
	// a deadline for callUntil's wait, which spares each call a context
	// registered under its parent (issue 19).
	callCtx := ctx
	var deadline time.Time
	if timeout > 0 {
		if p.lines() {
			deadline = time.Now().Add(timeout)
		} else {
			var cancel context.CancelFunc
			callCtx, cancel = context.WithTimeoutCause(ctx, timeout, ErrCallTimeout)
			defer cancel()
		}
	}
	// Multi round-trip: from a server spoken to in the 2026 revision, or
	// one initialized in the old one that still passes an input_required
	// result on (the go-sdk fulfils only a first round itself for a
	// session-based client). Roots are always the sandbox's.
	input := mrtrMethods[method]
	if input {
		b.upstreamRoots(params) // roots2026.go
	}
	raw, err := p.callUntil(callCtx, deadline, method, params, in.events)
	if err == nil && input {
		if !deadline.IsZero() && mayRequireInput(raw) {
			// Rounds of input may follow, under the same deadline
			// (answerInputs and answerRoots look at ctx only for a
			// result that mayRequireInput).
			var cancel context.CancelFunc
			callCtx, cancel = context.WithDeadlineCause(ctx, deadline, ErrCallTimeout)
			defer cancel()
		}
		// No byte-level shortcut but mayRequireInput's (which sends
		// any escaped value to the parse): a server could escape the key
		// or value past one, and a 2025 client would answer the round
		// itself.
		if modernOf(ctx) == nil {
			// A 2025 client cannot be handed the round (mrtr2025.go).
			raw, err = d.answerInputs(callCtx, b, p, method, params, raw, in.events)
		} else {
			raw, err = d.answerRoots(callCtx, b, p, method, params, raw, in.events)
		}
	}
	if err != nil {
		if d.ctx.Err() != nil {
			// The session ended (Close stops the servers right after
			// cancelling): that, not the server going away, ended the call.
			return nil, context.Cause(d.ctx)
		}
		return nil, b.u.endError(ctx, p, err)
	}
	if p.meta != nil && modernOf(ctx) == nil {
		raw = d.gw.ownServerInfo(raw)
	}
	out, ok := d.gw.filterJSON(b.srv.Name, raw)
	if !ok {
		return nil, rpcError(jsonrpc.CodeInternalError, "mcpbox: the result of server %s is not JSON once redacted", b.srv.Name)
	}
	return out, nil
}

// clientError turns an error into what the client may see: the server's
// own JSON-RPC errors pass (filtered); gateway failures get a short text.
func (d *downstream) clientError(b *bound, err error) error {
	var werr *jsonrpc.Error
	var cm ClientMessage
	switch {
	case errors.As(err, &cm): // before werr: a transport wraps it in one
		return rpcError(codeUnavailable, "%s", cm.ClientMessage())
	case unreached(err) && !givenUp(err): // before werr: the go-sdk's "rejected by transport"
		// A request that never reached a remote server (DNS, dial,
		// TLS): the connection's failure, named, not an answer.
		return rpcError(codeUnavailable, "server %s is unavailable: %s", b.srv.Name, d.safe(err))
	case errors.As(err, &werr) && !(werr.Code == codeRejected && givenUp(err)):
		// (A timeout or cancellation the transport wrapped is told below.)
		out := *werr
		out.Message = string(d.gw.filter(b.srv.Name, []byte(werr.Message)))
		out.Data, _ = d.gw.filterJSON(b.srv.Name, werr.Data) // not JSON once redacted: none
		return &out
	case errors.Is(err, ErrCallTimeout):
		return rpcError(codeTimeout, "%s: call timed out after %s", b.srv.Name, d.gw.callTimeout(b.srv))
	case errors.As(err, new(*cancelCause)):
		// Cancelled by the gateway (shutting down, the session closed),
		// not by the client, which still waits for an answer: a plain
		// error would reach it with code 0 ("MCP error 0: ...").
		return rpcError(codeUnavailable, "%s", err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// Cancelled by the client. A stdio client is sent nothing
		// (inFlight.cancelled), but the SDK's HTTP transport answers
		// every request, and a plain error reaches the client with code
		// 0, which JSON-RPC has no meaning for.
		return rpcError(codeCancelled, "request cancelled: %v", err)
	case errors.As(err, new(*RestartError)):
		return rpcError(codeUnavailable, "%s", d.safe(err)) // it names the server
	}
	d.gw.log.Warn("request failed", "server", b.srv.Name, "agent", d.agent, "err", err)
	return rpcError(codeUnavailable, "server %s is unavailable: %s", b.srv.Name, d.safe(err))
}

// givenUp reports whether err is a call the gateway or its client gave
// up on (a timeout, a cancellation), which a transport error may wrap:
// the request reached the server, and the cases after unreached's say so.
func givenUp(err error) bool {
	return errors.Is(err, ErrCallTimeout) || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded) || errors.As(err, new(*cancelCause))
}

// safe is an error's text as a client may see it.
func (d *downstream) safe(err error) string {
	var names []string
	for _, s := range d.gw.servers {
		names = append(names, s.Name)
	}
	msg := err.Error()
	for _, n := range names {
		msg = string(d.gw.filter(n, []byte(msg)))
	}
	return msg
}
