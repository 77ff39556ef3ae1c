package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
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
// goes on it. The gateway sees one connection throughout. The requests
// that had reached the old session and wait for their answers are
// answered with an error, as the server will not answer them.
type renewingConn struct {
	connect func(context.Context) (mcp.Connection, error)
	log     *slog.Logger // nil: none

	mu          sync.Mutex
	cur         mcp.Connection
	init        *jsonrpc.Request // the gateway's initialize
	version     string           // the protocol version its answer agreed on
	initialized *jsonrpc.Request
	level       *jsonrpc.Request            // the last logging/setLevel
	subs        map[string]*jsonrpc.Request // resources/subscribe by uri
	sent        map[jsonrpc.ID]mcp.Connection
	renewals    []time.Time
	lost        []jsonrpc.Message // answers for requests lost with a session
	closed      bool
}

func newRenewingConn(c mcp.Connection, connect func(context.Context) (mcp.Connection, error), log *slog.Logger) *renewingConn {
	return &renewingConn{connect: connect, log: log, cur: c, subs: map[string]*jsonrpc.Request{}, sent: map[jsonrpc.ID]mcp.Connection{}}
}

// Write sends m on the current session; on a 404 for it, on a new one.
func (r *renewingConn) Write(ctx context.Context, m jsonrpc.Message) error {
	r.mu.Lock()
	r.noteLocked(m)
	c := r.cur
	r.mu.Unlock()
	err := r.write(ctx, c, m)
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		// The server is not there (refused, no route): the go-sdk keeps
		// the connection, which would look alive while every request
		// fails. Ended, the gateway's restart policy takes it up, and
		// says when it tries again.
		c.Close()
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

// noteLocked keeps what m sets up of a session, to repeat on a new one.
func (r *renewingConn) noteLocked(m jsonrpc.Message) {
	req, ok := m.(*jsonrpc.Request)
	if !ok {
		return
	}
	var p struct {
		URI string `json:"uri"`
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
	}
}

// write sends m on c, and notes a request delivered there until its
// answer is read.
func (r *renewingConn) write(ctx context.Context, c mcp.Connection, m jsonrpc.Message) error {
	req, call := m.(*jsonrpc.Request)
	call = call && req.IsCall()
	if call {
		// Before the write: the answer may be read before it returns.
		r.mu.Lock()
		r.sent[req.ID] = c
		r.mu.Unlock()
	}
	err := c.Write(ctx, m)
	if err != nil && call {
		r.mu.Lock()
		if r.sent[req.ID] == c {
			delete(r.sent, req.ID)
		}
		r.mu.Unlock()
	}
	return err
}

// Read returns the answers for requests lost with an old session, then
// the next message of the current one.
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
		r.mu.Unlock()
		m, err := c.Read(ctx)
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
		// A write's 404 fails c's reads too, perhaps before that write
		// renews; the event stream's 404 is read here first.
		if errors.Is(err, mcp.ErrSessionMissing) && r.renew(c, err) == nil {
			continue
		}
		r.mu.Lock()
		moved := r.cur != c
		r.mu.Unlock()
		if !moved {
			return nil, err
		}
	}
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
// within renewWindow, or the new session cannot be opened.
func (r *renewingConn) renew(old mcp.Connection, why error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != old {
		return nil // renewed by another caller
	}
	if r.closed || r.version == "" {
		return why
	}
	now := time.Now()
	for len(r.renewals) > 0 && now.Sub(r.renewals[0]) > renewWindow {
		r.renewals = r.renewals[1:]
	}
	if len(r.renewals) >= renewMax {
		return fmt.Errorf("%w (%d new sessions within %s)", why, len(r.renewals), renewWindow)
	}
	r.renewals = append(r.renewals, now)
	ctx, cancel := context.WithTimeout(context.Background(), renewWait)
	defer cancel()
	c, err := r.openLocked(ctx)
	if err != nil {
		if r.log != nil {
			r.log.Warn("the server lost its session, and a new one could not be opened", "lost", why, "err", err)
		}
		return err
	}
	r.cur = c
	for id, on := range r.sent {
		if on != old {
			continue
		}
		delete(r.sent, id)
		r.lost = append(r.lost, &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: codeSessionLost,
			Message: "the server lost its session before it answered (it answered 404: it restarted, or let the session expire); a new session is open, and this request may or may not have run"}})
	}
	go old.Close() // wakes a Read of it, which then reads r.lost
	if r.log != nil {
		r.log.Info("the server lost its session; a new one is open", "lost", why, "unanswered", len(r.lost))
	}
	return nil
}

// codeSessionLost answers a request that reached a session the server
// then lost: JSON-RPC's "server error" range, as the gateway's
// unavailable.
const codeSessionLost = -32000

// openLocked connects afresh and sends what set up the old session
// again, each request under an id of its own whose answer is read here.
func (r *renewingConn) openLocked(ctx context.Context) (mcp.Connection, error) {
	c, err := r.connect(ctx)
	if err != nil {
		return nil, err
	}
	ask := func(n int, req *jsonrpc.Request) (*jsonrpc.Response, error) {
		again := *req
		again.ID, _ = jsonrpc.MakeID(fmt.Sprintf("mcpbox-renew-%d", n))
		if err := c.Write(ctx, &again); err != nil {
			return nil, err
		}
		for {
			m, err := c.Read(ctx)
			if err != nil {
				return nil, err
			}
			if resp, ok := m.(*jsonrpc.Response); ok && resp.ID == again.ID {
				return resp, nil
			}
			// Nothing else is the gateway's: it has sent nothing here.
		}
	}
	resp, err := ask(0, r.init)
	if err == nil && resp.Error != nil {
		err = resp.Error
	}
	if err == nil && protocolOf(resp) != r.version {
		err = fmt.Errorf("the new session agreed on protocol version %q, not %q", protocolOf(resp), r.version)
	}
	if err == nil && r.initialized != nil {
		err = c.Write(ctx, r.initialized)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	again := slices.Collect(maps.Values(r.subs))
	if r.level != nil {
		again = append(again, r.level)
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

// Close closes the current session; later renewals are refused.
func (r *renewingConn) Close() error {
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
