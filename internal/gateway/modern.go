package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

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
	if _, ok := m["roots"]; !ok { // the gateway answers them (upstreamCaps)
		m["roots"] = map[string]any{"listChanged": false}
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
// capabilities as a server may see them: roots declared whatever the
// client declared, since the gateway answers them (roots2026.go), as at
// a legacy initialize (upstreamCaps). To a session-based server, which
// knows them from the gateway's initialize and would refuse a version it
// does not speak, none of them. Trace context (traceparent, tracestate)
// passes to both.
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
			caps["roots"] = map[string]any{"listChanged": false}
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
		// The gateway's, also over a server's own: the client talks to
		// the gateway, and the aggregate does not disclose which server
		// (or which version of it) answered.
		meta[mcp.MetaKeyServerInfo] = d.gw.serverInfo()
		m["_meta"], _ = json.Marshal(meta)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return res
	}
	return d.result(raw)
}

// serverInfo is the gateway's implementation, as _meta names a server.
func (g *Gateway) serverInfo() json.RawMessage {
	info, _ := json.Marshal(&mcp.Implementation{Name: "mcpbox", Version: g.opts.Version})
	return info
}

// ownServerInfo replaces a 2026 server's name in the _meta of a result
// for a 2025 client (which has no such key, but is the gateway's client
// all the same) with the gateway's; raw is returned as it is if it names
// none.
func (g *Gateway) ownServerInfo(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(m["_meta"], &meta) != nil || meta == nil {
		return raw
	}
	if _, ok := meta[mcp.MetaKeyServerInfo]; !ok {
		return raw
	}
	meta[mcp.MetaKeyServerInfo] = g.serverInfo()
	m["_meta"], _ = json.Marshal(meta)
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
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
				c, ok := g.paramHeaderGuard(d, o.MaxBody, w, r)
				if !ok {
					return
				}
				if c != nil {
					r = r.WithContext(context.WithValue(r.Context(), postedKey{}, c))
					defer d.tellUnclaimed(c, r)
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
	if json.Unmarshal(body, &msg) != nil || msg.Method != "logging/setLevel" || !validID(msg.ID) {
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

// traceOf is the W3C traceparent in a request's _meta if it is one
// (Trace Context level 1: version-traceid-parentid-flags, lower-case hex,
// neither id all zeros, version ff invalid; a later version may add
// fields after a "-"), bounded; else "". What it returns is recorded in
// the audit and parents the call's span, so junk is neither.
func traceOf(meta mcp.Meta) string {
	tp, _ := meta["traceparent"].(string)
	if len(tp) < 55 || len(tp) > 128 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return ""
	}
	version, trace, parent, flags := tp[:2], tp[3:35], tp[36:52], tp[53:55]
	switch {
	case !lowerHex(version) || version == "ff" || !lowerHex(trace) || !lowerHex(parent) || !lowerHex(flags),
		strings.Trim(trace, "0") == "", strings.Trim(parent, "0") == "",
		version == "00" && len(tp) != 55,
		len(tp) > 55 && tp[55] != '-':
		return ""
	}
	for _, c := range tp[55:] {
		if c < 0x21 || c > 0x7e {
			return ""
		}
	}
	return tp
}

// lowerHex reports whether s is lower-case hex digits only.
func lowerHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// validID reports whether raw is a JSON-RPC request id (a string or a
// number), so that it may be echoed in an answer the gateway writes itself.
func validID(raw json.RawMessage) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return false
	}
	switch v.(type) {
	case string, json.Number:
		return true
	}
	return false
}
