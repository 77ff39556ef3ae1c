package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	sjson "github.com/segmentio/encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fastCalls answers a stdio client's tools/call requests on the
// connection's own read loop instead of through the go-sdk's
// ServerSession (issue 19: the gateway's overhead on a small call).
//
// Why: for each request the ServerSession decodes the params twice, each
// time through a fresh 32 KiB decoder, and hands the request over twice
// (a queue goroutine, then a goroutine per request), which on a small
// call is more of the gateway's CPU than the call itself. Here the
// request is decoded once and runs on one goroutine that writes its own
// response.
//
// What must stay identical, and how it does:
//   - The pipeline: the request goes to the session's own receive
//     middleware (d.handle, what receive runs once bound: dispatch,
//     callTool), so every check (Hooks.Call: policy, pins, approval,
//     audit; routing; the output limit; Hooks.Filter on the result and
//     on errors; the call timeout; progress; restart errors) is the one
//     the SDK path runs. A call's context ends with the session's, as
//     bind's does (sessionEnded).
//   - What is taken: a call (with an id) of tools/call, once initialize
//     has finished (ready), whose params are present, decode with the
//     SDK's parser and flags into the SDK's type, and carry no protocol
//     version in _meta (a 2026-07-28 request). Anything else, and every
//     other message, goes to the SDK as before; every failure to decode
//     is the SDK's to answer, so its errors stay its own.
//   - The response: the SDK's encoding (processResult, NewResponse, the
//     transport's Write): the same result bytes, the same error shapes
//     (the "method not found" rewrite included), no response for a
//     result that is not valid JSON, and none once the connection is
//     shutting down (read ended, a write failed, the session closing).
//     It is written through the same connection lock, whole.
//   - Ids: a call whose id is in flight is dropped, as the SDK drops it;
//     one whose id the SDK has in flight goes to the SDK.
//   - Cancellation: notifications/cancelled cancels a fast call as the
//     SDK's preempter cancels its own (and still reaches the SDK); the
//     end of the input cancels them with the read error as cause.
//   - Lifecycle: calls count as handlers (bind), and write their
//     response before they stop counting, so quiesce waits for them;
//     the session is closed only after they have returned (wait).
//
// One difference in timing is left: the SDK handles a client's
// notification before it starts a call that came after it, and a fast
// call does not wait for the SDK's goroutine. No notification a client
// sends (initialized, roots/list_changed, progress) changes how a call
// is answered; cancellation is seen here first.
//
// TestFastCallsMatchSDK holds the two paths to the same bytes;
// TestFastCallsTaken fails if calls silently stop taking this path.
// With MCPGODEBUG set (the SDK's compatibility switches), or
// Gateway.slowStdio, every request goes to the SDK.
type fastCalls struct {
	d    *downstream
	conn *stdioConn
	base context.Context // the connection's context without its cancellation, as the SDK's

	// ready: the answer to initialize has been written, so that a call
	// never starts before initialize is done, nor is answered before it.
	ready atomic.Bool

	mu      sync.Mutex
	initID  jsonrpc.ID                             // the initialize request's
	inited  bool                                   // its handler finished binding the session
	calls   map[jsonrpc.ID]context.CancelCauseFunc // fast calls in flight
	sdk     map[jsonrpc.ID]struct{}                // calls the SDK has, until it answers
	stopped bool                                   // no more responses are written
	idle    []chan fastJob                         // workers waiting for a call
	ended   error                                  // the session's cause, once its context has ended
	wg      sync.WaitGroup
	warns   warnings // rate-limits the warnings a client can cause at will; has its own lock
}

// fastJob is one call for a worker.
type fastJob struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	id     jsonrpc.ID
	p      *mcp.CallToolParamsRaw
}

// maxIdle bounds the workers kept waiting for calls. A worker is kept
// because a new goroutine's stack grows (is copied) two or three times
// on the way down a call, which was a tenth of a small call's CPU.
const maxIdle = 4

// fastOff: the SDK's compatibility switches change its error shapes.
var fastOff = os.Getenv("MCPGODEBUG") != ""

// The SDK's errors that the fast path reproduces.
var (
	errMethodNotFound = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}
	errServerClosing  = &jsonrpc.Error{Code: -32004, Message: "server is closing"}
)

func newFastCalls(ctx context.Context, d *downstream, c *stdioConn) *fastCalls {
	f := &fastCalls{d: d, conn: c, base: context.WithoutCancel(ctx),
		calls: map[jsonrpc.ID]context.CancelCauseFunc{}, sdk: map[jsonrpc.ID]struct{}{}}
	// Released when the session's context ends, which closing the
	// session always does (downstream.close).
	context.AfterFunc(d.ctx, f.sessionEnded)
	return f
}

// sessionEnded cancels the fast calls with the session's cause when its
// context ends, as receive's bind cancels the SDK's requests, and marks
// the calls taken after it to be cancelled at once: one watch of the
// session's context for the connection instead of one per call.
func (f *fastCalls) sessionEnded() {
	cause := context.Cause(f.d.ctx)
	f.mu.Lock()
	f.ended = cause
	cancels := make([]context.CancelCauseFunc, 0, len(f.calls))
	for _, c := range f.calls {
		cancels = append(cancels, c)
	}
	f.mu.Unlock()
	for _, c := range cancels {
		c(cause)
	}
}

// take handles msg if it is a call for the fast path, and reports
// whether it did; the read loop passes on everything else.
func (f *fastCalls) take(msg jsonrpc.Message) bool {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return false
	}
	if !req.IsCall() {
		if req.Method == "notifications/cancelled" {
			f.cancel(req.Params)
		}
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.calls[req.ID]; dup {
		// The SDK drops a request whose id is in use, unanswered (an
		// answer would be taken for the first one's).
		f.warns.warn(f.d.gw.log, "client reused the id of a request still in flight: dropped, unanswered",
			"agent", f.d.agent, "method", req.Method)
		return true
	}
	if req.Method == "initialize" && !f.inited {
		f.initID = req.ID // the last before one succeeds
	}
	var p *mcp.CallToolParamsRaw
	if _, sdkHas := f.sdk[req.ID]; !sdkHas && !f.stopped && req.Method == "tools/call" && f.ready.Load() {
		p = fastParams(req.Params)
	}
	if p == nil {
		f.sdk[req.ID] = struct{}{}
		return false
	}
	ctx, cancel := context.WithCancelCause(f.base)
	if f.ended != nil {
		cancel(f.ended) // the session has ended (sessionEnded)
	}
	f.calls[req.ID] = cancel
	f.wg.Add(1)
	f.d.gw.fastCalls.Add(1)
	job := fastJob{ctx, cancel, req.ID, p}
	if n := len(f.idle); n > 0 {
		w := f.idle[n-1]
		f.idle = f.idle[:n-1]
		w <- job // buffered: never blocks
	} else {
		go f.work(job)
	}
	return true
}

// work serves job, then waits for more calls while there are few idle
// workers and the connection is up.
func (f *fastCalls) work(job fastJob) {
	var next chan fastJob
	for {
		f.serve(job.ctx, job.cancel, job.id, job.p)
		f.mu.Lock()
		if f.stopped || len(f.idle) >= maxIdle {
			f.mu.Unlock()
			return
		}
		if next == nil {
			next = make(chan fastJob, 1)
		}
		f.idle = append(f.idle, next)
		f.mu.Unlock()
		var ok bool
		if job, ok = <-next; !ok {
			return
		}
	}
}

// fastParams decodes tools/call params as the SDK does (its checks for
// missing params, its depth bound, its parser and flags, its type), or
// returns nil for whatever the SDK should see: a failure, null params,
// and a 2026-07-28 request.
func fastParams(raw json.RawMessage) *mcp.CallToolParamsRaw {
	p := callParams(raw)
	if p == nil {
		return nil
	}
	if _, modern := p.Meta[mcp.MetaKeyProtocolVersion]; modern {
		return nil
	}
	return p
}

// callParams decodes tools/call params as the SDK does, or returns nil
// where the SDK would fail.
func callParams(raw json.RawMessage) *mcp.CallToolParamsRaw {
	if len(raw) == 0 || checkDepth(raw, maxDepth) != nil {
		return nil
	}
	var p *mcp.CallToolParamsRaw
	if _, err := sjson.Parse(raw, &p, sjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return nil
	}
	return p
}

// serve runs one call through the session's receive middleware and
// writes its response as the SDK's processResult would.
func (f *fastCalls) serve(ctx context.Context, cancel context.CancelCauseFunc, id jsonrpc.ID, p *mcp.CallToolParamsRaw) {
	defer f.wg.Done()
	defer cancel(nil)
	d := f.d
	// Counted as handled until its response is written (receive's bind
	// counts the SDK's only until the result is in): quiesce waits for it.
	d.mu.Lock()
	ss := d.ss
	d.handlers++
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.handlers--
		d.mu.Unlock()
	}()
	// ctx is bound to the session as receive's bind binds the SDK's
	// requests: sessionEnded cancels it with the session's cause.
	res, err := d.handle(ctx, "tools/call", &mcp.ServerRequest[*mcp.CallToolParamsRaw]{Session: ss, Params: p}, fastNext)
	if err != nil && errors.Is(err, errMethodNotFound) {
		err = fmt.Errorf("%w: %q", errMethodNotFound, "tools/call")
	}
	f.mu.Lock()
	delete(f.calls, id)
	stopped := f.stopped
	f.mu.Unlock()
	if stopped {
		return // the SDK writes nothing once shutting down
	}
	if err != nil {
		f.conn.writeFast(&jsonrpc.Response{ID: id, Error: err}, nil)
		return
	}
	r, ok := res.(rawResultValue)
	if !ok {
		d.gw.log.Error("fast tools/call: unexpected result type", "type", fmt.Sprintf("%T", res))
		f.conn.writeFast(&jsonrpc.Response{ID: id, Error: rpcError(jsonrpc.CodeInternalError, "mcpbox: the call's result could not be written")}, nil)
		return
	}
	f.conn.writeFast(&jsonrpc.Response{ID: id}, r.raw)
}

// fastNext is the SDK's handler behind the receive middleware, which a
// tools/call never reaches (dispatch answers it).
func fastNext(context.Context, string, mcp.Request) (mcp.Result, error) {
	return nil, rpcError(jsonrpc.CodeInternalError, "mcpbox: tools/call reached the SDK's handler")
}

// cancel cancels the fast call that notifications/cancelled names, as
// the SDK's preempter cancels its own (its type, its parser, no cause).
func (f *fastCalls) cancel(params json.RawMessage) {
	var c mcp.CancelledParams
	if checkDepth(params, maxDepth) != nil {
		return
	}
	if _, err := sjson.Parse(params, &c, sjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return
	}
	id, err := jsonrpc.MakeID(c.RequestID)
	if err != nil {
		return
	}
	f.mu.Lock()
	cancel := f.calls[id]
	f.mu.Unlock()
	if cancel != nil {
		cancel(nil)
	}
}

// answered forgets an id the SDK had, as its response goes out; the
// answer to a successful initialize makes the fast path ready.
func (f *fastCalls) answered(resp *jsonrpc.Response) {
	if !resp.ID.IsValid() {
		return
	}
	f.mu.Lock()
	delete(f.sdk, resp.ID)
	if f.inited && resp.Error == nil && resp.ID == f.initID {
		f.ready.Store(true)
	}
	f.mu.Unlock()
}

// initialized is called when the session's initialize has bound it to
// its servers (and the Session hook has run).
func (f *fastCalls) initialized() {
	if f != nil {
		f.mu.Lock()
		f.inited = true
		f.mu.Unlock()
	}
}

// stop ends the writing of responses, as the SDK's shutting down does,
// and cancels the calls in flight with cause (nil: leave them running,
// as closing the session does).
func (f *fastCalls) stop(cause error) {
	f.mu.Lock()
	f.stopped = true
	for _, w := range f.idle {
		close(w)
	}
	f.idle = nil
	var cancels []context.CancelCauseFunc
	if cause != nil {
		for _, c := range f.calls {
			cancels = append(cancels, c)
		}
	}
	f.mu.Unlock()
	for _, c := range cancels {
		c(cause)
	}
}

// wait returns when every fast call has returned.
func (f *fastCalls) wait() {
	if f != nil {
		f.wg.Wait()
	}
}

// closing is called before the session is closed: the SDK writes no
// response after that.
func (f *fastCalls) closing() {
	if f != nil {
		f.stop(nil)
	}
}
