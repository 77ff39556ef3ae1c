package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// peer is the client end of a raw JSON-RPC session with one upstream
// server. It numbers its own requests, so downstream ids never reach the
// upstream and cannot collide; results come back as raw JSON.
type peer struct {
	conn conn
	// onRequest answers a server→client request (sampling, elicitation,
	// roots/list, ping). It runs on its own goroutine; ctx ends when the
	// server cancels the request or the session ends.
	onRequest func(ctx context.Context, req *jsonrpc.Request) (json.RawMessage, error)
	// onNotify receives notifications other than cancellation. It runs on
	// the read loop and must not block.
	onNotify func(req *jsonrpc.Request)

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan *jsonrpc.Response
	inbound map[jsonrpc.ID]context.CancelFunc
	done    chan struct{}
	err     error // why the session ended; set before done is closed
	ctx     context.Context
	cancel  context.CancelFunc

	// meta, once set (before the peer is shared), is the _meta every
	// request carries unless it has its own keys: a server spoken to in
	// the sessionless revision (2026-07-28) needs the protocol version,
	// client info and capabilities on each request.
	meta map[string]any

	// accounted is closed once the upstream has applied its restart
	// policy to the end of this session (upstream.watch); set before the
	// watch starts.
	accounted chan struct{}
}

// maxInbound bounds concurrent server→client requests per upstream.
const maxInbound = 32

func newPeer(c conn, onRequest func(context.Context, *jsonrpc.Request) (json.RawMessage, error), onNotify func(*jsonrpc.Request)) *peer {
	ctx, cancel := context.WithCancel(context.Background())
	p := &peer{
		conn: c, onRequest: onRequest, onNotify: onNotify,
		pending: make(map[int64]chan *jsonrpc.Response),
		inbound: make(map[jsonrpc.ID]context.CancelFunc),
		done:    make(chan struct{}),
		ctx:     ctx, cancel: cancel,
	}
	go p.readLoop()
	return p
}

// errClosed is the end of a session the gateway closed itself.
var errClosed = errors.New("connection closed")

// call sends a request and waits for its response. When ctx ends first, the
// server is told with notifications/cancelled and ctx's error is returned.
// A JSON-RPC error from the server is returned as *jsonrpc.Error.
func (p *peer) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return p.callWith(ctx, method, params, nil)
}

// callWith is call that, while it waits, runs the functions queued on
// evs (the notifications the server sends for this request), so that they
// reach the client before the response. evs may be nil.
func (p *peer) callWith(ctx context.Context, method string, params any, evs *events) (json.RawMessage, error) {
	return p.callUntil(ctx, time.Time{}, method, params, evs)
}

// callUntil is callWith that, unless deadline is zero, gives up at
// deadline as if ctx had it, with ErrCallTimeout as the cause: for a
// stdio server (lines) a timer here costs a call less than a context
// with a deadline (downstream.call).
func (p *peer) callUntil(ctx context.Context, deadline time.Time, method string, params any, evs *events) (json.RawMessage, error) {
	raw, err := marshalParams(params)
	if err != nil {
		return nil, err
	}
	if p.meta != nil {
		if raw, err = withMeta(raw, p.meta); err != nil {
			return nil, err
		}
	}
	ch := make(chan *jsonrpc.Response, 1)
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return nil, p.err
	}
	p.nextID++
	n := p.nextID
	p.pending[n] = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.pending, n)
		p.mu.Unlock()
	}()
	id, _ := jsonrpc.MakeID(float64(n))
	wctx, release := p.writeContext(ctx)
	defer release()
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	if err := p.conn.Write(wctx, &jsonrpc.Request{ID: id, Method: method, Params: raw}); err != nil {
		return nil, fmt.Errorf("sending %s: %w", method, err)
	}
	for {
		select {
		case <-evs.signal():
			evs.run()
			continue
		case resp := <-ch:
			evs.run()
			if resp.Error != nil {
				return nil, resp.Error
			}
			return resp.Result, nil
		case <-ctx.Done():
			return nil, p.abandon(wctx, n, context.Cause(ctx))
		case <-expired:
			return nil, p.abandon(wctx, n, ErrCallTimeout)
		case <-p.done:
			return nil, p.err
		}
	}
}

// abandon tells the server that the caller of request n has left, for
// cause, and returns cause.
func (p *peer) abandon(wctx context.Context, n int64, cause error) error {
	cancelled, _ := json.Marshal(map[string]any{"requestId": n, "reason": cause.Error()})
	// Best effort, bounded by the write timeout: the caller is leaving.
	_ = p.conn.Write(context.WithoutCancel(wctx), &jsonrpc.Request{Method: "notifications/cancelled", Params: cancelled})
	return cause
}

// notify sends a notification.
func (p *peer) notify(ctx context.Context, method string, params any) error {
	raw, err := marshalParams(params)
	if err != nil {
		return err
	}
	wctx, release := p.writeContext(ctx)
	defer release()
	return p.conn.Write(wctx, &jsonrpc.Request{Method: method, Params: raw})
}

// writeContext is the context a message to the server is written with.
// To a server spoken to in the session-based revision (no p.meta), it is
// ctx's cancellation without ctx's values: a request runs on its client's
// context, and the go-sdk's HTTP client transport takes the protocol
// version header of a message that names none from the context, so a
// 2026-07-28 client's version would reach a remote server that speaks an
// older one, which refuses it. release ends it; call it once the answer
// is in (the transport reads the response on this context). A stdio
// server's line connection, in either revision, reads neither values nor
// cancellation, only a deadline, and a call's deadline must not cut a
// message half written (that closes the connection; the write timeout
// bounds the write): it gets Background, which saves every call two
// contexts.
func (p *peer) writeContext(ctx context.Context) (context.Context, func()) {
	if p.lines() {
		return context.Background(), nop
	}
	if p.meta != nil {
		return ctx, nop
	}
	out, cancel := context.WithCancelCause(context.Background())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	return out, func() { stop(); cancel(context.Canceled) }
}

func nop() {}

// lines reports whether p is a stdio server's line connection.
func (p *peer) lines() bool {
	_, ok := p.conn.(*lineConn)
	return ok
}

func marshalParams(params any) (json.RawMessage, error) {
	switch v := params.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return v, nil
	case map[string]any:
		if raw, ok := marshalCallParams(v); ok {
			return raw, nil
		}
	}
	// Without HTML escaping: strings the client sent with "<" or "&"
	// reach the server as they were written.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(params); err != nil {
		return nil, fmt.Errorf("encoding params: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// marshalCallParams encodes the params of a plain tools/call
// (toolCallParams: a name, and arguments as the client's JSON text)
// without reflection, in the bytes the encoder below writes: keys
// sorted, the arguments compacted, nothing HTML-escaped. Anything else,
// and anything it would have to escape or could not compact, is the
// encoder's (ok false). TestMarshalCallParamsMatchesEncoder holds it to
// the encoder.
func marshalCallParams(m map[string]any) (json.RawMessage, bool) {
	name, ok := m["name"].(string)
	if !ok || !plainString(name) || len(m) > 2 {
		return nil, false
	}
	args, has := m["arguments"]
	if len(m) == 2 && !has {
		return nil, false
	}
	buf := make([]byte, 0, 64+len(name))
	buf = append(buf, '{')
	if has {
		raw, ok := args.(json.RawMessage)
		if !ok || raw == nil {
			return nil, false
		}
		buf = append(buf, `"arguments":`...)
		out := bytes.NewBuffer(buf)
		if json.Compact(out, raw) != nil {
			return nil, false
		}
		buf = append(out.Bytes(), ',')
	}
	buf = append(buf, `"name":"`...)
	buf = append(buf, name...)
	return append(buf, `"}`...), true
}

// close ends the session; pending calls fail with errClosed.
func (p *peer) close() { p.closeFor("") }

// closeFor is close for a reason the gateway's own ("stopped by an
// admin", "idle for 5m0s"), which pending calls' errors give.
func (p *peer) closeFor(reason string) {
	err := errClosed
	if reason != "" {
		err = fmt.Errorf("%w: %s before it answered", errClosed, reason)
	}
	p.finish(err)
	p.conn.Close()
}

// wait returns when the session has ended, with the reason.
func (p *peer) wait() error {
	<-p.done
	return p.err
}

func (p *peer) finish(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return
	}
	p.err = err
	p.cancel()
	close(p.done)
}

func (p *peer) readLoop() {
	for {
		msg, err := p.conn.Read(p.ctx)
		if err != nil {
			p.finish(fmt.Errorf("server connection ended: %w", err))
			p.conn.Close()
			return
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			p.deliver(m)
		case *jsonrpc.Request:
			switch {
			case m.IsCall():
				p.serve(m)
			case m.Method == "notifications/cancelled":
				p.cancelInbound(m.Params)
			case p.onNotify != nil:
				p.onNotify(m)
			}
		}
	}
}

func (p *peer) deliver(resp *jsonrpc.Response) {
	n, ok := intID(resp.ID)
	if !ok {
		p.unmatched(resp)
		return
	}
	p.mu.Lock()
	ch := p.pending[n]
	delete(p.pending, n)
	p.mu.Unlock()
	if ch != nil {
		ch <- resp // buffered; each id is delivered once
	}
}

// unmatched takes a response whose id the peer never made. A null id
// with an error is JSON-RPC's answer to a request whose id could not be
// read (and what lineConn makes of a malformed response); an id of
// another type cannot answer anything the peer sent either. Either
// answers one of the calls waiting, and nobody can tell which, so every
// call waiting fails now rather than hanging until its timeout.
func (p *peer) unmatched(resp *jsonrpc.Response) {
	if resp.ID.IsValid() || resp.Error == nil {
		id := fmt.Sprint(resp.ID.Raw()) // a string: numbers are the peer's
		resp = &jsonrpc.Response{Error: rpcError(jsonrpc.CodeInternalError, "the server answered with id %.64q, which was never sent to it", id)}
	}
	p.mu.Lock()
	pending := p.pending
	p.pending = make(map[int64]chan *jsonrpc.Response)
	p.mu.Unlock()
	for _, ch := range pending {
		ch <- resp
	}
}

// intID returns the number of an id the peer made.
func intID(id jsonrpc.ID) (int64, bool) {
	switch v := id.Raw().(type) {
	case int64:
		return v, true
	case float64:
		return int64(v), v == float64(int64(v))
	}
	return 0, false
}

// serve answers one server→client request on its own goroutine.
func (p *peer) serve(req *jsonrpc.Request) {
	p.mu.Lock()
	if _, dup := p.inbound[req.ID]; dup || len(p.inbound) >= maxInbound {
		p.mu.Unlock()
		_ = p.conn.Write(p.ctx, &jsonrpc.Response{ID: req.ID, Error: rpcError(jsonrpc.CodeInvalidRequest, "too many or duplicate requests in flight")})
		return
	}
	ctx, cancel := context.WithCancel(p.ctx)
	p.inbound[req.ID] = cancel
	p.mu.Unlock()
	go func() {
		defer func() {
			p.mu.Lock()
			delete(p.inbound, req.ID)
			p.mu.Unlock()
			cancel()
		}()
		var result json.RawMessage
		err := errors.New("no handler")
		if p.onRequest != nil {
			result, err = p.onRequest(ctx, req)
		}
		if ctx.Err() != nil {
			return // cancelled by the server, or the session ended: no reply
		}
		resp := &jsonrpc.Response{ID: req.ID, Result: result}
		if err != nil {
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) {
				werr = rpcError(jsonrpc.CodeInternalError, "%s", err.Error())
			}
			resp = &jsonrpc.Response{ID: req.ID, Error: werr}
		}
		_ = p.conn.Write(ctx, resp)
	}()
}

func (p *peer) cancelInbound(params json.RawMessage) {
	var c struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &c) != nil {
		return
	}
	id, err := jsonrpc.MakeID(c.RequestID)
	if err != nil {
		return
	}
	p.mu.Lock()
	cancel := p.inbound[id]
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// withMeta adds meta's keys to the _meta of raw params, keeping the keys
// the params already have (a client's own protocol version, capabilities
// and trace context win over the gateway's).
func withMeta(raw json.RawMessage, meta map[string]any) (json.RawMessage, error) {
	fields := map[string]json.RawMessage{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, fmt.Errorf("params are not an object: %w", err)
		}
	}
	m := map[string]json.RawMessage{}
	if old, ok := fields["_meta"]; ok && string(old) != "null" {
		if err := json.Unmarshal(old, &m); err != nil {
			return nil, fmt.Errorf("_meta is not an object: %w", err)
		}
	}
	for k, v := range meta {
		if _, ok := m[k]; ok {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		m[k] = b
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	fields["_meta"] = b
	return marshalParams(fields)
}
