package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawResultValue carries an upstream's raw JSON as a go-sdk Result. It
// embeds a CallToolResult only to satisfy the interface; MarshalJSON
// writes the raw bytes, so fields the SDK does not model pass through.
// On the gateway's own stdio transport it writes a small placeholder
// instead, which the transport swaps for the raw bytes: the SDK's
// encoder validates and copies a Marshaler's output twice, which for a
// 1 MiB result costs more than everything else on the way.
type rawResultValue struct {
	*mcp.CallToolResult
	raw   json.RawMessage
	swaps *swapTable // nil: marshal the raw bytes
}

func (r rawResultValue) MarshalJSON() ([]byte, error) {
	if r.swaps != nil && len(r.raw) >= swapMin {
		return r.swaps.put(r.raw), nil
	}
	return r.raw, nil
}

// result wraps raw as the result of a request of d's client.
func (d *downstream) result(raw json.RawMessage) mcp.Result {
	return rawResultValue{CallToolResult: &mcp.CallToolResult{}, raw: raw, swaps: d.swaps}
}

// rawParams is the same trick for notification params.
type rawParams struct {
	*mcp.ProgressNotificationParams
	raw json.RawMessage
}

func (p rawParams) MarshalJSON() ([]byte, error) {
	if len(p.raw) == 0 {
		return []byte("{}"), nil
	}
	return p.raw, nil
}

type rawNoteKey struct{}

type rawNote struct {
	method string
	params json.RawMessage
}

// send lets a raw notification out: notify calls the SDK's NotifyProgress
// with a rawNote in the context, and this swaps in the real method and
// params, so the SDK's stream routing (the request's SSE stream) applies.
func (d *downstream) send(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "notifications/subscriptions/acknowledged" {
			d.acknowledged(ctx, req)
		}
		if n, ok := ctx.Value(rawNoteKey{}).(*rawNote); ok && method == "notifications/progress" {
			ss, _ := req.GetSession().(*mcp.ServerSession)
			params := rawParams{ProgressNotificationParams: &mcp.ProgressNotificationParams{}, raw: n.params}
			return next(ctx, n.method, &mcp.ServerRequest[rawParams]{Session: ss, Params: params})
		}
		return next(ctx, method, req)
	}
}

// logLevels orders logging levels (RFC 5424 names, as MCP uses them).
var logLevels = map[string]int{"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5, "alert": 6, "emergency": 7}

// notify sends a raw notification to the client now. ctx decides the
// stream: a request's handler context puts it on that request's stream.
func (d *downstream) notify(ctx context.Context, method string, params json.RawMessage) {
	// The SDK sends a request method as a request and waits for its
	// answer: a server's "notification" named sampling/createMessage
	// would reach the client unchecked (see request) and stall the call.
	if !strings.HasPrefix(method, "notifications/") {
		d.gw.log.Debug("notification not forwarded: not a notification method", "method", method)
		return
	}
	d.mu.Lock()
	ss, level := d.ss, d.level
	d.mu.Unlock()
	m := modernOf(ctx)
	if m != nil {
		// A 2026 request: its own protocol session, and its log level
		// if it names one.
		ss = m.ss
		if m.level != "" {
			level = m.level
		}
	} else if strings.HasSuffix(method, "/list_changed") || method == "notifications/resources/updated" {
		// Not a request's: 2026 clients hear it on their listen streams.
		d.notifyListens(method, params)
	}
	if ss == nil {
		return
	}
	if method == "notifications/message" && level != "" {
		var m struct {
			Level string `json:"level"`
		}
		if json.Unmarshal(params, &m) == nil && logLevels[m.Level] < logLevels[level] {
			return
		}
	}
	ctx = context.WithValue(ctx, rawNoteKey{}, &rawNote{method: method, params: params})
	if err := ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{}); err != nil {
		d.gw.log.Debug("notification not delivered", "method", method, "agent", d.agent, "err", err)
	}
}

// post queues a notification from u that belongs to no request. A client
// that does not keep up loses notifications instead of stalling the server.
func (d *downstream) post(u *upstream, method string, params json.RawMessage) {
	d.mu.Lock()
	out, closed := d.out, d.closed
	d.mu.Unlock()
	if out == nil || closed {
		return
	}
	size := int64(len(params))
	if d.queued.Add(size) > queueBytes {
		d.queued.Add(-size)
		u.warns.warn(u.log, "client too slow: notification dropped", "method", method, "client", d.agent)
		return
	}
	select {
	case out <- func() { d.queued.Add(-size); d.notify(context.Background(), method, params) }:
	default:
		d.queued.Add(-size)
		u.warns.warn(u.log, "client too slow: notification dropped", "method", method, "client", d.agent)
	}
}

// drain sends the queued notifications (out, the session's outbox), and
// the pending list_changed ones at most every listChangedEvery, the
// first one listChangedEvery after drain began. initialize begins it just
// before it returns, and the SDK writes the answer only then: a
// list_changed that came up while the session opened (a server's own at
// its start, a server joining just then) must not overtake it.
func (d *downstream) drain(out <-chan func()) {
	kick := d.lists.kicked()
	var later <-chan time.Time // armed while list_changed wait for the interval
	last := time.Now()
	for {
		select {
		case f := <-out:
			f()
		case <-kick:
			if later != nil {
				continue // they go out when the interval is over
			}
			if wait := listChangedEvery - time.Since(last); wait > 0 {
				later = time.After(wait)
				continue
			}
			if d.sendLists() {
				last = time.Now()
			}
		case <-later:
			later = nil
			if d.sendLists() {
				last = time.Now()
			}
		case <-d.done:
			return
		}
	}
}

// listChanged tells the client that a restarted server's lists may differ.
func (d *downstream) listChanged(u *upstream, c capabilities) {
	if c.Tools != nil {
		d.postListChanged("tools")
	}
	if c.Prompts != nil {
		d.postListChanged("prompts")
	}
	if c.Resources != nil {
		d.postListChanged("resources")
	}
}

// request forwards a server→client request (sampling, elicitation, ping)
// and returns the client's answer as raw JSON.
func (d *downstream) request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if p := parkedOf(ctx); p != nil {
		// A 2026 client's call: asked through an input_required result.
		return p.ask(ctx, method, params)
	}
	d.mu.Lock()
	ss := d.ss
	d.mu.Unlock()
	if ss == nil {
		return nil, rpcError(jsonrpc.CodeInternalError, "client session is not ready")
	}
	var res any
	var err error
	switch method {
	case "sampling/createMessage":
		var p mcp.CreateMessageWithToolsParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "bad sampling request: %v", err)
		}
		res, err = ss.CreateMessageWithTools(ctx, &p)
	case "elicitation/create":
		var p mcp.ElicitParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "bad elicitation request: %v", err)
		}
		res, err = ss.Elicit(ctx, &p)
	case "ping":
		err = ss.Ping(ctx, nil)
		res = struct{}{}
	default:
		return nil, rpcError(jsonrpc.CodeMethodNotFound, "method %q is not forwarded to clients", method)
	}
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("encoding %s result: %w", method, err)
	}
	return raw, nil
}

// close detaches the session from its servers; once.
func (d *downstream) close() {
	d.once.Do(func() {
		d.cancel(ErrSessionEnded)
		d.mu.Lock()
		d.closed = true
		if d.timer != nil {
			d.timer.Stop()
		}
		started := d.ss != nil || d.started
		mcpID := d.mcpID
		bs := d.bound
		subs := d.subs
		d.subs = map[string]*upstream{}
		d.mu.Unlock()
		close(d.done)
		d.gw.mu.Lock()
		delete(d.gw.sessions, d)
		if d.gw.mcpIDs[mcpID] == d {
			delete(d.gw.mcpIDs, mcpID)
		}
		if d.gw.modern[d.agent] == d {
			delete(d.gw.modern, d.agent)
		}
		d.gw.mu.Unlock()
		if h := d.gw.opts.Hooks.Session; h != nil && started {
			h(SessionEvent{Agent: d.agent, Session: d.id, MCPSession: mcpID, End: true})
		}
		for _, b := range bs {
			var mine []string
			for uri, u := range subs {
				if u == b.u {
					mine = append(mine, uri)
				}
			}
			d.gw.release(b.u, d, mine)
		}
	})
}
