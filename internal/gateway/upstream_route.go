package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// begin registers a forwarded request, a tools/call if tool; the returned
// token replaces the client's progress token (nil: the client asked for
// no progress). noted: the gateway already sent the client a progress
// note (at 0) on that token.
func (u *upstream) begin(d *downstream, p *peer, ctx context.Context, token any, tool, noted bool) *inflight {
	in := &inflight{d: d, p: p, ctx: ctx, token: token, events: newEvents(), noted: noted}
	u.mu.Lock()
	defer u.mu.Unlock()
	if tool {
		u.called = time.Now()
	}
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
	u.used = time.Now()
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
func (in *inflight) queue(size int, f func()) bool { return in.events.put(size, f) }

// events carries the notifications a server sends for one request from
// its reader to the request's handler, in order. It is a slice and a
// one-token signal rather than a buffered channel: most calls see no
// notification, and a channel deep enough for a burst cost every call
// 2 KiB.
type events struct {
	ready chan struct{} // holds a token while something may be queued
	mu    sync.Mutex
	queue []event // queue[head:] waits
	head  int
	bytes int
}

type event struct {
	size int
	f    func()
}

// maxEvents bounds how many notifications wait for one request.
const maxEvents = 256

func newEvents() *events { return &events{ready: make(chan struct{}, 1)} }

// put queues f, of size bytes, or reports false when the request already
// has maxEvents or queueBytes waiting. It never blocks.
func (e *events) put(size int, f func()) bool {
	e.mu.Lock()
	if len(e.queue)-e.head >= maxEvents || e.bytes+size > queueBytes {
		e.mu.Unlock()
		return false
	}
	e.queue = append(e.queue, event{size, f})
	e.bytes += size
	e.mu.Unlock()
	select {
	case e.ready <- struct{}{}:
	default: // a token is already there
	}
	return true
}

// signal is readable once something was queued: then run. Nil (never
// readable) for a nil e, a request that takes no notifications.
func (e *events) signal() <-chan struct{} {
	if e == nil {
		return nil
	}
	return e.ready
}

// run runs what was queued when it was called, oldest first, and no
// more: a server that keeps sending cannot hold the call in here past
// its timeout or its client's cancellation. A function's bytes stop
// counting when it starts, as it then leaves the queue.
func (e *events) run() {
	if e == nil {
		return
	}
	e.mu.Lock()
	n := len(e.queue) - e.head
	e.mu.Unlock()
	for range n {
		e.mu.Lock()
		ev := e.queue[e.head]
		e.queue[e.head] = event{}
		e.head++
		if e.head == len(e.queue) {
			e.queue, e.head = e.queue[:0], 0
		}
		e.bytes -= ev.size
		e.mu.Unlock()
		ev.f()
	}
}

// queueBytes bounds what is queued for one request or one session, so
// that a server flooding a slow client cannot grow the gateway's memory.
const queueBytes = 16 << 20

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
		if in.noted {
			out = in.lift(out)
		}
		in.queue(len(out), func() { in.d.notify(in.ctx, n.Method, out) })
	case "notifications/subscriptions/acknowledged":
		// The gateway's own listen (upstream.listen); no client's.
		u.mu.Lock()
		if u.peer != nil && u.init.Protocol >= ModernVersion {
			u.listening = u.peer
		}
		u.mu.Unlock()
	case "notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed":
		u.mu.Lock()
		delete(u.lists, listKind(n.Method))
		u.listGen++
		sessions := u.sessionsLocked()
		u.mu.Unlock()
		for _, d := range sessions {
			d.postListChanged(listKind(n.Method)) // coalesced: see flood.go
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
			if d.subscribed(u, p.URI) {
				d.post(u, n.Method, params)
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
			if !in.queue(len(params), func() { in.d.notify(in.ctx, n.Method, params) }) {
				u.warns.warn(u.log, "client too slow: notification dropped", "method", n.Method, "client", in.d.agent)
			}
			return
		}
		if agents > 1 {
			u.log.Debug("notification not forwarded: the server is shared by several agents", "method", n.Method)
			return
		}
		for _, d := range sessions {
			d.post(u, n.Method, params)
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

// lift keeps the progress of a server's note above the last one the
// client got on in's token, where the gateway sent a note of its own
// first (at 0): a server that starts at 0, as many do, would otherwise
// repeat it. A value that would not increase becomes the next float64
// above the last, and a total it would pass (a server repeating its final
// note) is raised with it, so that progress never reads above total; a
// note whose progress is not a number passes as it is.
func (in *inflight) lift(params json.RawMessage) json.RawMessage {
	var p struct {
		Progress *float64 `json:"progress"`
		Total    *float64 `json:"total"`
	}
	if json.Unmarshal(params, &p) != nil || p.Progress == nil {
		return params
	}
	v := *p.Progress
	if v <= in.last {
		v = math.Nextafter(in.last, math.Inf(1))
		out, err := setField(params, "progress", v)
		if err == nil && p.Total != nil && v > *p.Total {
			out, err = setField(out, "total", v)
		}
		if err == nil {
			params = out
		}
	}
	in.last = v
	return params
}
