package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// renewWait bounds the opening of a new session: the connect, the
// initialize's answer and the answers of the requests repeated after it.
var renewWait = 30 * time.Second

// renewMax renewals within renewWindow are taken as a server that keeps
// losing sessions: the next loss ends the connection, as any other end,
// and the gateway's restart policy decides.
const (
	renewMax    = 3
	renewWindow = time.Minute
)

// renewingConn is a Streamable HTTP connection that opens a new session
// when the server answers 404 for the one it has (it restarted, was
// redeployed, or let the session expire): the spec's client "MUST start a
// new session", and the request that met the 404 was not handled. The
// new session gets what the gateway sent to set the old one up, again
// under ids of its own: the initialize (whose answer must agree on the
// same protocol version), notifications/initialized, the last
// logging/setLevel and the resource subscriptions; then the request
// goes on it. The gateway sees one connection throughout, and is told
// that the lists may have changed (a redeployed server's may). A request
// the old session had taken (its write done) and not answered is
// answered with an error, as the server will not answer it; one whose
// write met the 404 is sent again instead, never both.
//
// A request that cannot reach the server at all (nothing listens: the
// dial to the server's own host fails) ends the connection with that
// error, so that the gateway's restart policy takes the server up.
type renewingConn struct {
	connect func(context.Context) (mcp.Connection, error)
	log     *slog.Logger // nil: none

	// renewing serializes renewals; the network I/O of one is done
	// holding it, not mu.
	renewing sync.Mutex
	life     context.Context // ends at Close: a renewal under way stops
	stop     context.CancelFunc

	mu          sync.Mutex
	cur         mcp.Connection
	init        *jsonrpc.Request // the gateway's initialize
	version     string           // the protocol version its answer agreed on
	initialized *jsonrpc.Request
	level       *jsonrpc.Request            // the last logging/setLevel
	subs        map[string]*jsonrpc.Request // resources/subscribe by uri
	sent        map[jsonrpc.ID]*sentRequest
	renewals    []time.Time
	failedOn    mcp.Connection // the session a renewal failed for, and why
	failed      error
	ended       error             // why cur was ended here (a dial's failure)
	lost        []jsonrpc.Message // to read before cur's next message
	wake        context.CancelFunc
	closed      bool
}

// sentRequest is a request written on a session, until its answer is
// read; taken once its write returned.
type sentRequest struct {
	on    mcp.Connection
	taken bool
}

func newRenewingConn(c mcp.Connection, connect func(context.Context) (mcp.Connection, error), log *slog.Logger) *renewingConn {
	life, stop := context.WithCancel(context.Background())
	return &renewingConn{connect: connect, log: log, life: life, stop: stop, cur: c,
		subs: map[string]*jsonrpc.Request{}, sent: map[jsonrpc.ID]*sentRequest{}}
}

// Write sends m on the current session; on a 404 for it, on a new one.
func (r *renewingConn) Write(ctx context.Context, m jsonrpc.Message) error {
	r.mu.Lock()
	r.noteLocked(m)
	c := r.cur
	r.mu.Unlock()
	err := r.write(ctx, c, m)
	if errors.As(err, new(*unreachableError)) {
		// The go-sdk keeps the connection, which would look alive while
		// every request fails.
		r.end(c, err)
		return err
	}
	if !errors.Is(err, mcp.ErrSessionMissing) || r.renew(c, err) != nil {
		return err
	}
	r.mu.Lock()
	c = r.cur
	r.mu.Unlock()
	return r.write(ctx, c, m)
}

// noteLocked keeps what m sets up of a session, to repeat on a new one,
// and forgets a request the gateway gave up on.
func (r *renewingConn) noteLocked(m jsonrpc.Message) {
	req, ok := m.(*jsonrpc.Request)
	if !ok {
		return
	}
	var p struct {
		URI       string `json:"uri"`
		RequestID any    `json:"requestId"`
	}
	switch req.Method {
	case "initialize":
		if r.init == nil {
			r.init = req
		}
	case "notifications/initialized":
		r.initialized = req
	case "logging/setLevel":
		r.level = req
	case "resources/subscribe":
		if json.Unmarshal(req.Params, &p) == nil {
			r.subs[p.URI] = req
		}
	case "resources/unsubscribe":
		if json.Unmarshal(req.Params, &p) == nil {
			delete(r.subs, p.URI)
		}
	case "notifications/cancelled":
		if json.Unmarshal(req.Params, &p) == nil {
			if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
				delete(r.sent, id)
			}
		}
	}
}

// write sends m on c, and keeps a request written there until its
// answer is read. One taken by a session that was lost while it was
// written is answered at once: that session will not answer it.
func (r *renewingConn) write(ctx context.Context, c mcp.Connection, m jsonrpc.Message) error {
	req, call := m.(*jsonrpc.Request)
	call = call && req.IsCall()
	var s *sentRequest
	if call {
		// Before the write: the answer may be read before it returns.
		s = &sentRequest{on: c}
		r.mu.Lock()
		r.sent[req.ID] = s
		r.mu.Unlock()
	}
	err := c.Write(ctx, m)
	if !call {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.sent[req.ID] != s: // answered already
	case err != nil:
		delete(r.sent, req.ID)
	case r.cur != c:
		delete(r.sent, req.ID)
		r.loseLocked(req.ID)
	default:
		s.taken = true
	}
	return err
}

// loseLocked queues the error answer of request id, which a lost session
// had taken, and wakes the Read waiting on the current one.
func (r *renewingConn) loseLocked(id jsonrpc.ID) {
	r.lost = append(r.lost, &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: codeSessionLost,
		Message: "the server lost its session before it answered (it answered 404: it restarted, or let the session expire); a new session is open, and this request may or may not have run"}})
	if r.wake != nil {
		r.wake()
	}
}

// codeSessionLost answers a request that reached a session the server
// then lost: JSON-RPC's "server error" range, as the gateway's
// unavailable.
const codeSessionLost = -32000

// Read returns what lost sessions leave to answer, then the next
// message of the current one.
func (r *renewingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		r.mu.Lock()
		if len(r.lost) > 0 {
			m := r.lost[0]
			r.lost = r.lost[1:]
			r.mu.Unlock()
			return m, nil
		}
		c := r.cur
		rctx, wake := context.WithCancel(ctx)
		r.wake = wake
		r.mu.Unlock()
		m, err := c.Read(rctx)
		woken := rctx.Err() != nil
		wake()
		if err == nil {
			if resp, ok := m.(*jsonrpc.Response); ok {
				r.mu.Lock()
				delete(r.sent, resp.ID)
				if r.init != nil && resp.ID == r.init.ID && r.version == "" {
					r.version = protocolOf(resp)
				}
				r.mu.Unlock()
			}
			return m, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if woken {
			continue // answers to read
		}
		// A write's 404 fails c's reads too, perhaps before that write
		// renews; the event stream's 404 is read here first.
		if errors.Is(err, mcp.ErrSessionMissing) && r.renew(c, err) == nil {
			continue
		}
		r.mu.Lock()
		moved, ended := r.cur != c, r.ended
		r.mu.Unlock()
		switch {
		case moved:
			continue
		case ended != nil:
			return nil, ended // not c's bare EOF
		}
		return nil, err
	}
}

// end closes c, the current session, for err, which Read then returns.
func (r *renewingConn) end(c mcp.Connection, err error) {
	r.mu.Lock()
	if r.cur == c && r.ended == nil {
		r.ended = err
	}
	r.mu.Unlock()
	c.Close()
}

// protocolOf is the protocol version an initialize's answer agreed on.
func protocolOf(resp *jsonrpc.Response) string {
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if resp.Error != nil || json.Unmarshal(resp.Result, &res) != nil {
		return ""
	}
	return res.ProtocolVersion
}

// renew replaces old, whose session the server no longer has (why), with
// a new session, unless another caller did already. It fails when the
// gateway's initialize has not been answered, too many renewals came
// within renewWindow, or the new session cannot be opened; callers that
// waited for a renewal of old that failed get its error, not another try.
func (r *renewingConn) renew(old mcp.Connection, why error) error {
	r.renewing.Lock()
	defer r.renewing.Unlock()
	r.mu.Lock()
	switch {
	case r.cur != old:
		r.mu.Unlock()
		return nil // renewed by another caller
	case r.failedOn == old:
		r.mu.Unlock()
		return r.failed
	case r.closed || r.version == "":
		r.mu.Unlock()
		return why
	}
	now := time.Now()
	for len(r.renewals) > 0 && now.Sub(r.renewals[0]) > renewWindow {
		r.renewals = r.renewals[1:]
	}
	if len(r.renewals) >= renewMax {
		r.failedOn, r.failed = old, fmt.Errorf("%w (%d new sessions within %s)", why, len(r.renewals), renewWindow)
		r.mu.Unlock()
		return r.failed
	}
	r.renewals = append(r.renewals, now)
	again := slices.Collect(maps.Values(r.subs))
	if r.level != nil {
		again = append(again, r.level)
	}
	init, initialized, version := r.init, r.initialized, r.version
	r.mu.Unlock()

	ctx, cancel := context.WithTimeout(r.life, renewWait)
	defer cancel()
	c, err := r.open(ctx, init, initialized, version, again)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil && r.closed {
		c.Close()
		err = errors.New("the connection was closed")
	}
	if err != nil {
		r.failedOn, r.failed = old, err
		if r.log != nil {
			r.log.Warn("the server lost its session, and a new one could not be opened", "lost", why, "err", err)
		}
		return err
	}
	r.cur = c
	n := 0
	for id, s := range r.sent {
		if s.on == old && s.taken {
			delete(r.sent, id)
			r.loseLocked(id)
			n++
		}
	}
	// A redeployed server's tools, prompts and resources may differ: the
	// gateway drops its lists and tells its clients, as if it had said so.
	for _, kind := range []string{"tools", "prompts", "resources"} {
		r.lost = append(r.lost, &jsonrpc.Request{Method: "notifications/" + kind + "/list_changed"})
	}
	if r.wake != nil {
		r.wake()
	}
	go old.Close() // and a Read of it wakes
	if r.log != nil {
		r.log.Info("the server lost its session; a new one is open", "lost", why, "unanswered", n)
	}
	return nil
}

// open connects afresh and sends what set up the old session again,
// each request under an id of its own whose answer is read here.
func (r *renewingConn) open(ctx context.Context, init, initialized *jsonrpc.Request, version string, again []*jsonrpc.Request) (mcp.Connection, error) {
	c, err := r.connect(ctx)
	if err != nil {
		return nil, err
	}
	ask := func(n int, req *jsonrpc.Request) (*jsonrpc.Response, error) {
		sent := *req
		sent.ID, _ = jsonrpc.MakeID(fmt.Sprintf("mcpbox-renew-%d", n))
		if err := c.Write(ctx, &sent); err != nil {
			return nil, err
		}
		for {
			m, err := c.Read(ctx)
			if err != nil {
				return nil, err
			}
			if resp, ok := m.(*jsonrpc.Response); ok && resp.ID == sent.ID {
				return resp, nil
			}
			// Nothing else is the gateway's: it has sent nothing here.
		}
	}
	resp, err := ask(0, init)
	if err == nil && resp.Error != nil {
		err = resp.Error
	}
	if err == nil && protocolOf(resp) != version {
		err = fmt.Errorf("the new session agreed on protocol version %q, not %q", protocolOf(resp), version)
	}
	if err == nil && initialized != nil {
		err = c.Write(ctx, initialized)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	for i, req := range again {
		// Their refusal leaves the session as good as the server makes it.
		if _, err := ask(i+1, req); err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: %w", req.Method, err)
		}
	}
	return c, nil
}

// Close closes the current session and stops a renewal under way; later
// renewals are refused.
func (r *renewingConn) Close() error {
	r.stop()
	r.mu.Lock()
	r.closed = true
	c := r.cur
	r.mu.Unlock()
	return c.Close()
}

// SessionID is the current session's.
func (r *renewingConn) SessionID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur.SessionID()
}

// unreachableError is a request that could not reach the server's own
// host: its dial failed (nothing listens, no route). unreachable marks it
// below the OAuth layer, so that a token endpoint's failure is not taken
// for the server's.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// unreachable marks the failed dials of requests to host.
type unreachable struct {
	host string
	next http.RoundTripper
}

func (t unreachable) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	var op *net.OpError
	if err != nil && req.URL.Host == t.host && errors.As(err, &op) && op.Op == "dial" {
		err = &unreachableError{err}
	}
	return resp, err
}
