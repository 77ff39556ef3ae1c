package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Why a session's calls were cancelled: the cause of their contexts, which
// a Hooks.Call sees through context.Cause (the approval broker records
// it). Each is a context.Canceled (errors.Is), so whoever handles a
// cancelled call handles these too.
var (
	// ErrSessionEnded: the client ended its session (an HTTP DELETE)
	// while the call was running or waiting.
	ErrSessionEnded error = &cancelCause{"the client ended its session"}
	// ErrSessionIdle: the session went without requests for
	// HTTPOptions.SessionIdle and was closed.
	ErrSessionIdle error = &cancelCause{"the client session was idle too long"}
	// ErrShutdown: the gateway is closing.
	ErrShutdown error = &cancelCause{"the gateway is shutting down"}
	// ErrInputEnded: a stdio client closed its input (it is leaving):
	// the calls it made still run to their answers, but one that waits
	// to run, for a human's approval, is withdrawn (Call.Leaving).
	ErrInputEnded error = &cancelCause{"the client closed its input"}
)

// cancelCause is a cancellation with its reason.
type cancelCause struct{ msg string }

func (e *cancelCause) Error() string { return e.msg }
func (e *cancelCause) Unwrap() error { return context.Canceled }

// admit reserves one of the agent's session slots for d before any
// server starts for it: counting and adding under one lock, so that
// concurrent initializes cannot all see room.
func (g *Gateway) admit(d *downstream) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return errStopped
	}
	n := 0
	for o := range g.sessions {
		if o.agent == d.agent {
			n++
		}
	}
	if n >= g.opts.MaxSessions {
		return rpcError(jsonrpc.CodeInternalError, "too many open sessions for this client (%d); close some first", n)
	}
	g.sessions[d] = struct{}{}
	return nil
}

// bind returns ctx, also cancelled (with the session's cause) when the
// session ends, and the function that releases it; it counts the request
// as being handled until then.
func (d *downstream) bind(ctx context.Context) (context.Context, func()) {
	d.mu.Lock()
	d.handlers++
	d.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(d.ctx, func() { cancel(context.Cause(d.ctx)) })
	return ctx, func() {
		stop()
		cancel(nil)
		d.mu.Lock()
		d.handlers--
		d.mu.Unlock()
	}
}

// handlerWait bounds how long an ending session waits for its cancelled
// handlers to return.
const handlerWait = 500 * time.Millisecond

// cancelCalls cancels the session's requests with cause (their servers
// get notifications/cancelled, approvals waiting for them are withdrawn)
// and reports whether any were being handled.
func (d *downstream) cancelCalls(cause error) bool {
	d.mu.Lock()
	busy := d.handlers > 0
	d.mu.Unlock()
	d.cancel(cause)
	return busy
}

// quiesce waits, up to handlerWait, for the cancelled handlers to return,
// and then a moment for the SDK to write their answers: a protocol
// session that is closing refuses to write them, and the client should
// learn that its call was cancelled.
func (d *downstream) quiesce() {
	deadline := time.Now().Add(handlerWait)
	for {
		d.mu.Lock()
		n := d.handlers
		d.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // the answer is written after the handler returns
}

// end ends the session for cause: its calls are cancelled first, so that
// closing the protocol session, which waits for its handlers, does not
// wait for a call that could hang.
func (d *downstream) end(cause error) { d.finish(d.cancelCalls(cause)) }

// finish closes the protocol session and detaches d from its servers,
// after its cancelled handlers (busy) have answered.
func (d *downstream) finish(busy bool) {
	if busy {
		d.quiesce()
	}
	d.mu.Lock()
	ss := d.ss
	d.mu.Unlock()
	if ss != nil {
		d.fast.closing()
		ss.Close()
	}
	d.close()
}

// busy counts an HTTP request of the session in flight (n = 1) or
// finished (n = -1): a session is idle only with none in flight, as the
// SDK's own session timeout counted it.
func (d *downstream) busy(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.posts += n
	if d.timer == nil || d.closed {
		return
	}
	if d.posts > 0 {
		d.timer.Stop()
	} else {
		d.timer.Reset(d.idle)
	}
}

// armIdleLocked starts the idle clock of an HTTP session that just initialized.
// Preconditions: d.mu is held.
func (d *downstream) armIdleLocked() {
	if d.idle <= 0 || d.closed {
		return
	}
	mcpID := d.mcpID
	d.timer = time.AfterFunc(d.idle, func() {
		d.gw.log.Info("closing an idle session", "agent", d.agent, "session", mcpID, "idle", d.idle)
		d.end(ErrSessionIdle)
	})
}

// byMCP returns the open session that the client knows as id, if agent
// owns it.
func (g *Gateway) byMCP(id, agent string) *downstream {
	if id == "" {
		return nil
	}
	g.mu.Lock()
	d := g.mcpIDs[id]
	g.mu.Unlock()
	if d == nil || d.agent != agent {
		return nil
	}
	return d
}

// sessionLife wraps the SDK's Streamable HTTP handler: a DELETE cancels
// the session's calls before the SDK closes it (which waits for them) and
// frees its slot before answering; POSTs keep the session from idling.
// The SDK still checks that the session belongs to the caller.
func (g *Gateway) sessionLife(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agent := LocalAgent
		if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
			agent = ti.UserID
		}
		d := g.byMCP(r.Header.Get("Mcp-Session-Id"), agent)
		if d == nil {
			next.ServeHTTP(w, r)
			return
		}
		switch r.Method {
		case http.MethodDelete:
			if d.cancelCalls(ErrSessionEnded) {
				d.quiesce()
			}
			next.ServeHTTP(w, r)
			d.close()
			return
		case http.MethodPost:
			d.busy(1)
			defer d.busy(-1)
		}
		next.ServeHTTP(w, r)
	})
}
