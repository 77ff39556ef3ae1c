package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The sessionless revision (2026-07-28, SEP-2575): no initialize and no
// Mcp-Session-Id; every request carries its protocol version, client info
// and capabilities in _meta.
//
// Without a protocol session, the gateway's per-session state (the
// servers a client is bound to, its scope "session" sandboxes, approvals
// remembered for the session) belongs to the credential: one gateway
// session per HTTP client identity (bearer token; LocalAgent without
// tokens), made on its first 2026 request and ended after
// HTTPOptions.SessionIdle without one, and over stdio the one the stdio
// connection already is. Legacy sessions of the same client stay separate
// gateway sessions, as they are today.

// ModernVersion is the first protocol revision without sessions.
const ModernVersion = "2026-07-28"

// modernKey marks a request's context as a 2026-07-28 request and carries
// what it needs of the request itself: the SDK makes a protocol session
// per stateless HTTP request, and progress and log notifications for the
// request go out on that one.
type modernKey struct{}

type modernReq struct {
	ss    *mcp.ServerSession
	level string          // per-request log level (io.modelcontextprotocol/logLevel); "": all
	caps  map[string]bool // the top-level client capabilities this request declares
}

// requestMeta returns the _meta of a request's params, if any.
func requestMeta(req mcp.Request) mcp.Meta {
	p := req.GetParams()
	if p == nil {
		return nil
	}
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil // a typed nil: no params
	}
	type metaGetter interface{ GetMeta() map[string]any }
	if g, ok := p.(metaGetter); ok {
		return g.GetMeta()
	}
	return nil
}

// isModern reports whether req follows the sessionless revision: its
// _meta names a protocol version of 2026-07-28 or later.
func isModern(req mcp.Request) bool {
	v, _ := requestMeta(req)[mcp.MetaKeyProtocolVersion].(string)
	return v >= ModernVersion
}

// modernContext marks ctx for a 2026 request.
func modernContext(ctx context.Context, req mcp.Request) context.Context {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	meta := requestMeta(req)
	level, _ := meta[mcp.MetaKeyLogLevel].(string)
	caps := map[string]bool{}
	var declared map[string]json.RawMessage
	if b, err := json.Marshal(meta[mcp.MetaKeyClientCapabilities]); err == nil && json.Unmarshal(b, &declared) == nil {
		for k, v := range declared {
			caps[k] = string(v) != "null"
		}
	}
	return context.WithValue(ctx, modernKey{}, &modernReq{ss: ss, level: level, caps: caps})
}

func modernOf(ctx context.Context) *modernReq {
	m, _ := ctx.Value(modernKey{}).(*modernReq)
	return m
}

// bindModern binds d to its servers on its first 2026 request, as
// initialize does for a legacy session: the slot under MaxSessions, the
// servers (told the capabilities of this first request), the outbox and
// Hooks.Session. Later requests find it bound.
func (d *downstream) bindModern(ctx context.Context, req mcp.Request) error {
	d.bindMu.Lock()
	defer d.bindMu.Unlock()
	d.mu.Lock()
	bound, closed := d.bound != nil, d.closed
	d.mu.Unlock()
	switch {
	case closed:
		return rpcError(codeUnavailable, "the gateway session for this client has ended; retry")
	case bound:
		return nil
	}
	if err := d.gw.admit(d); err != nil {
		return err
	}
	d.mu.Lock()
	d.modern = true // its servers are instances of the new revision
	d.mu.Unlock()
	var caps json.RawMessage
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
		if ip := ss.InitializeParams(); ip != nil && ip.Capabilities != nil {
			caps = upstreamCaps(ip.Capabilities)
		}
	}
	if err := d.start(ctx, translatable(caps)); err != nil {
		d.close()
		return err
	}
	out := make(chan func(), outboxSize)
	d.mu.Lock()
	d.out, d.started = out, true
	d.armIdleLocked()
	d.mu.Unlock()
	go d.drain(out)
	if h := d.gw.opts.Hooks.Session; h != nil {
		h(SessionEvent{Agent: d.agent, Session: d.id, Client: modernClientName(req)})
	}
	return nil
}

// translatable adds to a 2026 client's capabilities, as a server is told
// them, what the gateway can ask any such client through input requests
// (mrtr.go): form elicitation and sampling. Whether one request's client
// can answer is decided per request, from its own _meta.
func translatable(caps json.RawMessage) json.RawMessage {
	m := map[string]any{}
	if len(caps) > 0 {
		json.Unmarshal(caps, &m)
	}
	if _, ok := m["elicitation"]; !ok {
		m["elicitation"] = map[string]any{"form": map[string]any{}}
	}
	if _, ok := m["sampling"]; !ok {
		m["sampling"] = map[string]any{}
	}
	out, _ := json.Marshal(m)
	return out
}

// modernClientName is "name version" from a 2026 request's clientInfo.
func modernClientName(req mcp.Request) string {
	raw, err := json.Marshal(requestMeta(req)[mcp.MetaKeyClientInfo])
	if err != nil {
		return ""
	}
	var info mcp.Implementation
	if json.Unmarshal(raw, &info) != nil {
		return ""
	}
	return strings.TrimSpace(info.Name + " " + info.Version)
}

// sep2575Keys are the _meta keys of the sessionless revision that
// describe the client.
var sep2575Keys = []string{mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientInfo, mcp.MetaKeyClientCapabilities, mcp.MetaKeyLogLevel}

// upstreamMeta is the _meta a 2026 request is forwarded with. To a server
// spoken to in the new revision (modern), the protocol version, client
// info and log level pass, so that it answers in it (multi round-trip
// results go back to the client as they are), and the client's
// capabilities as a server may see them: without roots, as at a legacy
// initialize. To a session-based server, which knows them from the
// gateway's initialize and would refuse a version it does not speak,
// none of them. Trace context (traceparent, tracestate) passes to both.
func upstreamMeta(meta mcp.Meta, modern bool) mcp.Meta {
	out := make(mcp.Meta, len(meta))
	for k, v := range meta {
		out[k] = v
	}
	if !modern {
		for _, k := range sep2575Keys {
			delete(out, k)
		}
		return out
	}
	if raw, ok := meta[mcp.MetaKeyClientCapabilities]; ok {
		var caps map[string]any
		b, _ := json.Marshal(raw)
		if json.Unmarshal(b, &caps) == nil && caps != nil {
			delete(caps, "roots")
			out[mcp.MetaKeyClientCapabilities] = caps
		}
	}
	return out
}

// cacheTTL is the ttlMs of every list and read result: zero, because a
// pin change, a policy reload or a server's list_changed can change what a
// client may see at any time, and the gateway cannot promise otherwise.
const cacheTTL = 0

// modernResult finishes the raw result of a 2026 request: resultType
// "complete" unless the server chose one (input_required passes through),
// the gateway in _meta as the server that answered, and for cacheable
// methods ttlMs and cacheScope. The scope is always "private": what a
// client sees is filtered for its identity (tool filters, pins, policy,
// its own scoped instances), so no shared cache may serve it to another.
func (d *downstream) modernResult(method string, res mcp.Result) mcp.Result {
	r, ok := res.(rawResultValue)
	if !ok {
		return res
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(r.raw, &m) != nil || m == nil {
		return res
	}
	if _, ok := m["resultType"]; !ok {
		m["resultType"] = json.RawMessage(`"complete"`)
	}
	if cacheable(method) {
		m["ttlMs"] = json.RawMessage("0")
		m["cacheScope"] = json.RawMessage(`"private"`)
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := m["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		meta = nil // not an object: leave it as the server sent it
	}
	if meta != nil {
		if _, ok := meta[mcp.MetaKeyServerInfo]; !ok {
			info, _ := json.Marshal(&mcp.Implementation{Name: "mcpbox", Version: d.gw.opts.Version})
			meta[mcp.MetaKeyServerInfo] = info
		}
		m["_meta"], _ = json.Marshal(meta)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return res
	}
	return d.result(raw)
}

// cacheable reports whether results of method carry ttlMs and cacheScope
// (SEP-2549).
func cacheable(method string) bool {
	switch method {
	case "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read":
		return true
	}
	return false
}

// discover answers server/discover with what the servers the client may
// see offer, as initialize does for a legacy client.
func (d *downstream) discover(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	res, err := next(ctx, method, req)
	if err != nil {
		return nil, err
	}
	if dr, ok := res.(*mcp.DiscoverResult); ok {
		dr.Capabilities, dr.Instructions = d.capabilities()
		dr.TTLMs, dr.CacheScope = cacheTTL, "private"
	}
	return res, nil
}

// isModernHTTP reports whether an HTTP request is of the sessionless
// revision: it names one in MCP-Protocol-Version and no legacy session.
func isModernHTTP(r *http.Request) bool {
	return r.Header.Get("Mcp-Session-Id") == "" && r.Header.Get("MCP-Protocol-Version") >= ModernVersion
}

// modernDownstream returns the gateway session of an HTTP client identity
// for its 2026 requests, making it if there is none (or it ended).
func (g *Gateway) modernDownstream(agent string, idle func(*downstream)) (*downstream, error) {
	g.mu.Lock()
	if d := g.modern[agent]; d != nil {
		d.mu.Lock()
		closed := d.closed
		d.mu.Unlock()
		if !closed {
			g.mu.Unlock()
			return d, nil
		}
	}
	g.mu.Unlock()
	d, err := g.newDownstream(agent)
	if err != nil {
		return nil, err
	}
	d.modern = true
	idle(d)
	g.mu.Lock()
	defer g.mu.Unlock()
	if o := g.modern[agent]; o != nil {
		o.mu.Lock()
		closed := o.closed
		o.mu.Unlock()
		if !closed {
			return o, nil // another request made it first
		}
	}
	g.modern[agent] = d
	return d, nil
}

// modernHandler serves 2026 requests: the SDK's stateless Streamable HTTP
// handler (it validates Mcp-Method and Mcp-Name against the body and the
// per-request _meta), with the client identity's gateway session as the
// server of every request.
func (g *Gateway) modernHandler(o HTTPOptions) http.Handler {
	getServer := func(r *http.Request) *mcp.Server {
		d, _ := g.modernDownstream(agentOf(r), func(d *downstream) { d.idle = o.SessionIdle })
		if d == nil {
			return nil
		}
		return d.server
	}
	h := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		MaxRequestBodyBytes: o.MaxBody,
		Logger:              g.log,
		// In the new revision the POST is the whole request: a client
		// that drops it has cancelled the call, and its server is told.
		PropagateRequestCancellation: true,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if d, _ := g.modernDownstream(agentOf(r), func(d *downstream) { d.idle = o.SessionIdle }); d != nil {
				d.busy(1)
				defer d.busy(-1)
				if !g.paramHeaderGuard(d, o.MaxBody, w, r) {
					return
				}
				if r.Header.Get("Mcp-Method") == "logging/setLevel" || r.Header.Get("Mcp-Method") == "" {
					body, err := io.ReadAll(io.LimitReader(r.Body, o.MaxBody+1))
					r.Body.Close()
					r.Body = io.NopCloser(bytes.NewReader(body))
					if err == nil && int64(len(body)) <= o.MaxBody && d.setLevelWithoutMeta(w, body) {
						return
					}
				}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// agentOf is the client identity of an HTTP request.
func agentOf(r *http.Request) string {
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		return ti.UserID
	}
	return LocalAgent
}

// checkParamHeaders checks the Mcp-Param-* headers of a 2026 tools/call
// against its arguments (SEP-2243): each argument the tool's input schema
// marks with x-mcp-header must be mirrored in its header, and no such
// header may stand for an absent one, so that an intermediary routing on
// the headers sees what the server will run. The SDK can only check the
// tools it serves itself; these are the upstreams'. A session not bound
// yet knows no tools and checks nothing.
func (d *downstream) checkParamHeaders(ctx context.Context, header http.Header, body []byte) error {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name      string                     `json:"name"`
			Arguments map[string]json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" {
		return nil
	}
	b, tool, ok := d.route(msg.Params.Name, func(b *bound) bool { return b.ok && b.u.info().caps.Tools != nil })
	if !ok {
		return nil
	}
	// The server's own definition: the List hook (lookup) may pass an
	// item without it, and a tool it hides is refused later anyway.
	l, err := b.u.listing(ctx, KindTools)
	if err != nil {
		return nil
	}
	i := slices.IndexFunc(l.items, func(it Item) bool { return it.Key == tool })
	if i < 0 {
		return nil
	}
	def := l.items[i]
	var schema struct {
		InputSchema struct {
			Properties map[string]headerProp `json:"properties"`
		} `json:"inputSchema"`
	}
	if json.Unmarshal(def.Raw, &schema) != nil {
		return nil
	}
	for _, hp := range paramHeaders(schema.InputSchema.Properties, nil) {
		name := "Mcp-Param-" + hp.header
		got := header.Get(name)
		arg, present := lookupArg(msg.Params.Arguments, hp.path)
		if !present || string(arg) == "null" {
			if got != "" {
				return fmt.Errorf("header mismatch: unexpected %s header for absent parameter %q", name, strings.Join(hp.path, "."))
			}
			continue
		}
		if got == "" {
			return fmt.Errorf("header mismatch: missing %s header for parameter %q", name, strings.Join(hp.path, "."))
		}
		decoded, ok := decodeParamHeader(got)
		if !ok {
			return fmt.Errorf("header mismatch: %s header contains invalid Base64 encoding", name)
		}
		want, ok := primitiveText(arg)
		if !ok || decoded != want {
			return fmt.Errorf("header mismatch: %s header does not match parameter %q", name, strings.Join(hp.path, "."))
		}
	}
	return nil
}

// headerProp is what checkParamHeaders reads of a schema property.
type headerProp struct {
	XMCPHeader string                `json:"x-mcp-header"`
	Properties map[string]headerProp `json:"properties"`
}

type paramHeader struct {
	header string
	path   []string
}

// paramHeaders lists the x-mcp-header annotations at any depth, in a
// stable order.
func paramHeaders(props map[string]headerProp, prefix []string) []paramHeader {
	var out []paramHeader
	for _, name := range slices.Sorted(maps.Keys(props)) {
		p := props[name]
		path := append(slices.Clone(prefix), name)
		if p.XMCPHeader != "" {
			out = append(out, paramHeader{header: p.XMCPHeader, path: path})
		}
		out = append(out, paramHeaders(p.Properties, path)...)
	}
	return out
}

func lookupArg(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	var cur json.RawMessage
	obj := args
	for i, part := range path {
		v, ok := obj[part]
		if !ok {
			return nil, false
		}
		cur = v
		if i < len(path)-1 {
			obj = nil
			if json.Unmarshal(cur, &obj) != nil {
				return nil, false
			}
		}
	}
	return cur, cur != nil
}

// decodeParamHeader undoes SEP-2243's =?base64?...?= wrapping.
func decodeParamHeader(v string) (string, bool) {
	if enc, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if enc, ok = strings.CutSuffix(enc, "?="); ok {
			b, err := base64.StdEncoding.DecodeString(enc)
			return string(b), err == nil
		}
	}
	return v, true
}

// primitiveText is a string, boolean or safe integer argument as its
// header text.
func primitiveText(raw json.RawMessage) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case json.Number:
		n, err := strconv.ParseInt(v.String(), 10, 64)
		if err != nil || n > 1<<53-1 || n < -(1<<53-1) {
			return "", false
		}
		return strconv.FormatInt(n, 10), true
	}
	return "", false
}

// codeHeaderMismatch is SEP-2243's error code for headers that do not
// match the body.
const codeHeaderMismatch = -32020

// paramHeaderGuard answers a 2026 tools/call whose Mcp-Param-* headers do
// not match its arguments with 400 and codeHeaderMismatch, before the
// SDK reads it.
func (g *Gateway) paramHeaderGuard(d *downstream, maxBody int64, w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Method") != "tools/call" {
		return true
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil || int64(len(body)) > maxBody {
		return true // the SDK refuses it
	}
	if err := d.checkParamHeaders(r.Context(), r.Header, body); err != nil {
		var id struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal(body, &id)
		if len(id.ID) == 0 {
			id.ID = json.RawMessage("null")
		}
		msg, _ := json.Marshal(err.Error())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, id.ID, codeHeaderMismatch, msg)
		return false
	}
	return true
}

// traceOf is the W3C traceparent in a request's _meta, if well-formed
// enough to record (printable, bounded).
func traceOf(meta mcp.Meta) string {
	tp, _ := meta["traceparent"].(string)
	if len(tp) == 0 || len(tp) > 128 {
		return ""
	}
	for _, c := range tp {
		if c < 0x21 || c > 0x7e {
			return ""
		}
	}
	return tp
}

// A listen is an open subscriptions/listen stream of a 2026 client: the
// gateway's list_changed notifications for the session go out on it.
// The SDK answers the request (its acknowledgement names what the stream
// carries and its subscription id); the gateway only remembers where to
// send.
type listen struct {
	ss  *mcp.ServerSession
	ctx context.Context // the listen request's: routes onto its stream
	// Set from the acknowledgement; guarded by downstream.mu.
	subID                     any
	tools, prompts, resources bool
	uris                      map[string]bool // resources whose updates it carries
}

type listenKey struct{}

// serveListen registers a listen for as long as its request is open.
func (d *downstream) serveListen(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	l := &listen{ss: ss}
	ctx = context.WithValue(ctx, listenKey{}, l)
	l.ctx = ctx
	d.mu.Lock()
	if d.listens == nil {
		d.listens = map[*listen]struct{}{}
	}
	d.listens[l] = struct{}{}
	d.mu.Unlock()
	// Resource updates: subscribed at the resources' servers for as long
	// as some listen of the session wants them.
	var uris []string
	if p, ok := req.GetParams().(*mcp.SubscriptionsListenParams); ok && p != nil && p.Notifications != nil {
		uris = p.Notifications.ResourceSubscriptions
	}
	var mine []string
	for _, uri := range uris {
		if d.listenSubscribe(ctx, uri, true) {
			mine = append(mine, uri)
		}
	}
	defer func() {
		d.mu.Lock()
		delete(d.listens, l)
		d.mu.Unlock()
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, uri := range mine {
			d.listenSubscribe(uctx, uri, false)
		}
	}()
	return next(ctx, method, req)
}

// listenSubscribe counts the session's listens that want uri's updates,
// and subscribes at (or unsubscribes from) its server on the first (the
// last). It reports whether the subscription was taken.
func (d *downstream) listenSubscribe(ctx context.Context, uri string, on bool) bool {
	d.mu.Lock()
	if d.listenURIs == nil {
		d.listenURIs = map[string]int{}
	}
	n := d.listenURIs[uri]
	if on {
		d.listenURIs[uri] = n + 1
	} else if n <= 1 {
		delete(d.listenURIs, uri)
	} else {
		d.listenURIs[uri] = n - 1
	}
	d.mu.Unlock()
	if (on && n > 0) || (!on && n != 1) {
		return true
	}
	if _, err := d.subscribe(ctx, uri, on); err != nil {
		d.gw.log.Debug("resource subscription for a listen failed", "uri", uri, "agent", d.agent, "err", err)
		if on {
			d.mu.Lock()
			if d.listenURIs[uri]--; d.listenURIs[uri] <= 0 {
				delete(d.listenURIs, uri)
			}
			d.mu.Unlock()
		}
		return false
	}
	return true
}

// acknowledged notes what a listen carries, from the SDK's
// notifications/subscriptions/acknowledged on its way out.
func (d *downstream) acknowledged(ctx context.Context, req mcp.Request) {
	l, _ := ctx.Value(listenKey{}).(*listen)
	p, _ := req.GetParams().(*mcp.SubscriptionsAcknowledgedParams)
	if l == nil || p == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	l.subID = p.Meta[mcp.MetaKeySubscriptionID]
	l.tools, l.prompts, l.resources = p.Notifications.ToolsListChanged, p.Notifications.PromptsListChanged, p.Notifications.ResourcesListChanged
	l.uris = map[string]bool{}
	for _, uri := range p.Notifications.ResourceSubscriptions {
		l.uris[uri] = true
	}
}

// notifyListens sends a list_changed or resources/updated notification on
// every listen that asked for it, with the listen's subscription id in
// _meta.
func (d *downstream) notifyListens(method string, params json.RawMessage) {
	var uri string
	if method == "notifications/resources/updated" {
		var p struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(params, &p) != nil || p.URI == "" {
			return
		}
		uri = p.URI
	}
	d.mu.Lock()
	var to []*listen
	var ids []any
	for l := range d.listens {
		var want bool
		switch method {
		case "notifications/resources/updated":
			want = l.uris[uri]
		case "notifications/tools/list_changed":
			want = l.tools
		case "notifications/prompts/list_changed":
			want = l.prompts
		case "notifications/resources/list_changed":
			want = l.resources
		}
		if want {
			to = append(to, l)
			ids = append(ids, l.subID)
		}
	}
	d.mu.Unlock()
	for i, l := range to {
		raw, err := withMeta(params, map[string]any{mcp.MetaKeySubscriptionID: ids[i]})
		if err != nil {
			continue
		}
		ctx := context.WithValue(l.ctx, rawNoteKey{}, &rawNote{method: method, params: raw})
		if err := l.ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{}); err != nil {
			d.gw.log.Debug("notification not delivered", "method", method, "agent", d.agent, "err", err)
		}
	}
}

// setLevelWithoutMeta answers a logging/setLevel that a 2026 client sent
// without the per-request _meta (the go-sdk client does: the method is
// gone from the new revision, and the SDK's transport would refuse it).
// The level becomes the session's default for requests that name none.
func (d *downstream) setLevelWithoutMeta(w http.ResponseWriter, body []byte) bool {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Level string         `json:"level"`
			Meta  map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "logging/setLevel" || len(msg.ID) == 0 {
		return false
	}
	if _, ok := msg.Params.Meta[mcp.MetaKeyProtocolVersion]; ok {
		return false // a request of the new revision: the SDK refuses the method
	}
	if _, ok := logLevels[msg.Params.Level]; !ok {
		return false
	}
	d.mu.Lock()
	d.level = msg.Params.Level
	d.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, msg.ID)
	return true
}
