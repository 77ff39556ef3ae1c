package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// How a session starts its servers. A session binds to an upstream per
// server at its opening request (initialize, or a 2026 client's first
// request) and waits for their starts, but not without end: one hung
// server must not fail the whole session, so a server still starting
// after sessionStartWait joins the session once it runs.

// bound is a server as one session sees it.
type bound struct {
	srv *Server
	u   *upstream
	// state is how the server's start for the session ended: nil while it
	// is still starting (one slower than sessionStartWait joins the
	// session late: settle), then set once, before settled is closed.
	state   atomic.Pointer[startState]
	settled chan struct{}
}

// startState is how a server's start for a session ended: err is nil if
// it runs for the session, else why not.
type startState struct{ err error }

// errStillStarting is the reason of a server still starting for a session.
var errStillStarting = errors.New("it is still starting; it joins this session once it runs")

// ok reports whether the server runs for the session.
func (b *bound) ok() bool {
	s := b.state.Load()
	return s != nil && s.err == nil
}

// err is why the server does not serve the session (errStillStarting if
// it may still join it); nil if it does.
func (b *bound) err() error {
	s := b.state.Load()
	if s == nil {
		return errStillStarting
	}
	return s.err
}

// start binds the session to an upstream per server and starts them. A
// server that cannot start is left out, unless none can.
//
// It waits for every start at most sessionStartWait, and longer only
// while no server runs and one is starting: a server still starting
// then joins the session once it runs (settle). Once one runs, it does
// not wait for a server still being set up (Server.Ready): that takes
// minutes, and it joins the same way. When none runs and every server
// left is being set up (serve's first start, whose packages all install
// for minutes), the session opens with none after sessionStartWait, and
// they join it too: a client that gave up on initialize would end the
// session, and a stdio client's serve, so nothing would ever install.
// One hung server must not hold the client's
// opening request past the client's own timeout (60 s in the TypeScript
// SDK), which would fail the whole session, not only that server. So
// the starts are bound to the session, not to this request: one that
// outlasts the wait goes on, and its failure still counts toward the
// give-up (hangMax), also when the session has ended by then. Each start
// runs in its instance's life, which its stop ends (a session-scope
// instance's at the session's end; the others' at the gateway's).
func (d *downstream) start(ctx context.Context, caps json.RawMessage) error {
	bs := make([]*bound, len(d.gw.servers))
	for i, srv := range d.gw.servers {
		u, err := d.gw.upstream(srv, d, caps)
		if err != nil {
			for _, b := range bs[:i] {
				d.gw.release(b.u, d, nil)
			}
			return err
		}
		bs[i] = &bound{srv: srv, u: u, settled: make(chan struct{})}
	}
	// Published before the starts, so that closing the session (its
	// request given up) releases them.
	d.mu.Lock()
	d.bound = bs
	d.mu.Unlock()
	d.starting.Add(int32(len(bs)))
	settled := make(chan *bound, len(bs))
	for _, b := range bs {
		go func() {
			_, err := b.u.get(b.u.life)
			d.settle(b, err)
			settled <- b
		}()
	}
	wait := time.NewTimer(d.gw.startWait)
	defer wait.Stop()
	ran, ended, late := 0, 0, false
	for ended < len(bs) && keepWaiting(ran, late, bs) {
		select {
		case b := <-settled:
			ended++
			if b.ok() {
				ran++
			}
		case <-wait.C:
			late = true
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	d.mu.Lock()
	d.told = true
	d.mu.Unlock()
	var errs []error
	ran, joining := 0, 0
	for _, b := range bs {
		switch err := b.err(); {
		case err == nil:
			ran++
		case errors.Is(err, errStillStarting):
			joining++
		default:
			errs = append(errs, err)
		}
	}
	if ran == 0 && joining == 0 {
		return rpcError(jsonrpc.CodeInternalError, "no server could start: %s", d.safe(errors.Join(errs...)))
	}
	return nil
}

// keepWaiting reports whether the session's opening request waits on,
// with ran of bs's servers running, and late once sessionStartWait has
// passed. Until then it waits while none runs or one is starting; after,
// only while none runs and one is starting (not only being set up).
func keepWaiting(ran int, late bool, bs []*bound) bool {
	if ran == 0 {
		return !late || startingNow(bs)
	}
	return !late && startingNow(bs)
}

// startingNow reports whether a server of bs is starting for the
// session, not only being set up (Server.Ready).
func startingNow(bs []*bound) bool {
	for _, b := range bs {
		if b.state.Load() == nil && !settingUp(b.srv) {
			return true
		}
	}
	return false
}

// settingUp reports whether srv is still being set up (Server.Ready).
func settingUp(srv *Server) bool {
	if srv.Ready == nil {
		return false
	}
	select {
	case <-srv.Ready():
		return false
	default:
		return true
	}
}

// settle records how b's start for the session ended. A server that runs
// only after the client was answered (start) joins the session late: it
// gets the session's logging level, and the client is told that its
// lists changed.
func (d *downstream) settle(b *bound, err error) {
	d.mu.Lock()
	b.state.Store(&startState{err: err})
	late, level := d.told, d.level
	d.mu.Unlock()
	close(b.settled)
	d.starting.Add(-1)
	switch {
	case d.ctx.Err() != nil:
		// The session has ended: its client hears nothing more.
	case err != nil:
		d.gw.log.Error("server did not start", "server", b.srv.Name, "agent", d.agent, "err", err)
		if late {
			// The client has its initialize answer and no other word of
			// the server (a package whose install failed after serve went
			// on without it): tell it, as a log message it may show.
			data, _ := json.Marshal(notStarted(d, b).Error())
			d.post(b.u, "notifications/message", json.RawMessage(`{"level":"error","logger":"mcpbox","data":`+string(data)+`}`))
		}
	case late:
		d.gw.log.Info("server joined the session late", "server", b.srv.Name, "agent", d.agent, "wait", d.gw.startWait)
		// Again while the level changed meanwhile: a logging/setLevel
		// that saw the server running sends its own, which this one's
		// could otherwise overtake.
		for level != "" {
			b.u.setLevel(d.ctx, level)
			d.mu.Lock()
			now := d.level
			d.mu.Unlock()
			if now == level {
				break
			}
			level = now
		}
		d.listChanged(b.u, b.u.info().caps)
	}
}

// awaitServer waits, at most sessionStartWait, for the servers still
// starting that the tool or prompt of req may belong to (by prefix), so
// that a call made just after the session opened reaches a server that
// joins it late (not for one still being set up: Server.Ready, which
// takes minutes). It runs before any check of the call; a call for a
// server still starting after that is refused (callTool,
// paramHeaderCheck).
func (d *downstream) awaitServer(ctx context.Context, req mcp.Request) {
	if d.starting.Load() == 0 {
		return
	}
	var name string
	switch p := req.GetParams().(type) {
	case *mcp.CallToolParamsRaw:
		if p != nil {
			name = p.Name
		}
	case *mcp.GetPromptParams:
		if p != nil {
			name = p.Name
		}
	}
	d.mu.Lock()
	bs := d.bound
	d.mu.Unlock()
	var limit <-chan time.Time
	for _, b := range bs {
		if rest, ok := strings.CutPrefix(name, b.srv.Prefix); !ok || rest == "" || b.state.Load() != nil || settingUp(b.srv) {
			continue // a setup takes minutes: no use waiting
		}
		if limit == nil {
			t := time.NewTimer(d.gw.startWait)
			defer t.Stop()
			limit = t.C
		}
		select {
		case <-b.settled:
		case <-limit:
			return
		case <-ctx.Done():
			return
		}
	}
}

// settingUpWhy says what a server still being set up waits for: the
// gateway does not know which.
const settingUpWhy = "its package installing, a retry of its setup"

// notStarted is the client's error for a call to b's server, which does
// not run for the session.
func notStarted(d *downstream, b *bound) error {
	if err := b.err(); errors.Is(err, errStillStarting) && settingUp(b.srv) {
		return rpcError(jsonrpc.CodeInternalError, "server %s is still being set up (%s): it joins this session once it runs; try again later", b.srv.Name, settingUpWhy)
	} else if errors.Is(err, errStillStarting) {
		return rpcError(jsonrpc.CodeInternalError, "server %s is still starting after %s: it joins this session once it runs; try again shortly", b.srv.Name, d.gw.startWait)
	}
	return rpcError(jsonrpc.CodeInternalError, "server %s did not start for this session: %s", b.srv.Name, d.safe(b.err()))
}
