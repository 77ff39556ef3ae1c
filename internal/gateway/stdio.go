package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioTransport is the downstream stdio transport: newline-delimited
// JSON-RPC like the SDK's IOTransport, except that a raw result (see
// rawResultValue) is written as it came from the server.
type stdioTransport struct {
	r     io.ReadCloser
	w     io.WriteCloser
	swaps *swapTable
	log   *slog.Logger
	d     *downstream // the session served: its tools/calls take the fast path (fastcall.go)
}

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c := &stdioConn{t: t, closed: make(chan struct{})}
	c.lines = newLineConn(t.r, t.w, closeBoth{t.r, t.w}, "the client", DefaultMaxMessage, func(reason string, _ []byte) {
		t.log.Warn("dropped a message from the client", "reason", reason)
	})
	c.lines.oversized = func(id jsonrpc.ID) {
		_ = c.write(ctx, &jsonrpc.Response{ID: id, Error: rpcError(jsonrpc.CodeInvalidRequest, "the request is larger than the %d-byte message limit", DefaultMaxMessage)})
	}
	c.lines.invalid = c.answerInvalid
	if d := t.d; d != nil && !fastOff && !d.gw.slowStdio {
		c.fast = newFastCalls(ctx, d, c)
		d.fast = c.fast // before the SDK reads the first message
	}
	return c, nil
}

type stdioConn struct {
	t      *stdioTransport
	lines  *lineConn
	fast   *fastCalls // nil: every message goes to the SDK
	wmu    sync.Mutex
	open   inFlight      // what the client asked, and was asked, not answered yet
	closed chan struct{} // closed by Close
	once   sync.Once
}

// Read returns the next message for the SDK; the calls the fast path
// takes are answered without it. At the end of the client's input it
// waits for the answers to what the client asked (inFlight.drain):
// reading's end makes the SDK cancel every request in flight.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.lines.Read(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				if c.t.d != nil {
					c.t.d.inputEnded() // a call waiting for approval is withdrawn
				}
				if !c.open.drain(ctx, c.closed, func() bool { return hungUp(c.t.w) }) {
					c.t.log.Warn("the client's input ended before it was answered; the requests still in flight are cancelled")
				}
			}
			if c.fast != nil {
				c.fast.stop(err) // as the SDK cancels its calls when reading ends
			}
			return nil, err
		}
		c.open.read(msg)
		if req, ok := msg.(*jsonrpc.Request); ok {
			if e := badParams(req); e != nil {
				_ = c.write(ctx, &jsonrpc.Response{ID: req.ID, Error: e})
				continue
			}
		}
		if c.fast == nil || !c.fast.take(msg) {
			return msg, nil
		}
	}
}

func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	resp, _ := msg.(*jsonrpc.Response)
	if resp != nil && c.fast != nil {
		c.fast.answered(resp)
	}
	if req, ok := msg.(*jsonrpc.Request); ok {
		c.open.sent(req)
		if req.IsCall() {
			defer c.open.written()
		}
	}
	return c.write(ctx, msg)
}

func (c *stdioConn) write(ctx context.Context, msg jsonrpc.Message) (err error) {
	resp, _ := msg.(*jsonrpc.Response)
	if resp != nil {
		defer func() { c.open.answered(resp.ID, err) }()
	}
	if resp != nil && resp.Error == nil {
		if raw, ok := c.t.swaps.take(resp.Result); ok {
			if c.open.cancelled(resp.ID) {
				return nil
			}
			return c.writeRaw(resp.ID, raw)
		}
	}
	if resp != nil && c.open.cancelled(resp.ID) {
		return nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	err = c.lines.Write(ctx, msg)
	if err != nil && c.fast != nil && !errors.Is(err, errEncoding) {
		c.fast.stop(fmt.Errorf("%w: %v", errServerClosing, err)) // as the SDK does on a failed write
	}
	return err
}

// writeRaw writes a response whose result is raw, as the server sent it,
// but on one line: a remote server's result can hold line breaks (a
// pretty-printed HTTP body), and a line of it could pass for a message
// of its own to a stdio client. Compacting only such results keeps the
// copy off the common case.
func (c *stdioConn) writeRaw(rid jsonrpc.ID, raw json.RawMessage) error {
	id, err := json.Marshal(rid.Raw())
	if err != nil {
		return fmt.Errorf("encoding id: %w", err)
	}
	if bytes.ContainsAny(raw, "\r\n") {
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return fmt.Errorf("%w: %w", errEncoding, err)
		}
		raw = b.Bytes()
	}
	buf := make([]byte, 0, len(raw)+len(id)+40)
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = append(buf, id...)
	buf = append(buf, `,"result":`...)
	buf = append(buf, raw...)
	buf = append(buf, "}\n"...)
	return c.writeLine(buf)
}

// answerInvalid answers a line from the client that is not a JSON-RPC
// message, as JSON-RPC 2.0 asks, rather than leaving the client waiting:
// -32700 if it is not JSON, else -32600 (a batch, which MCP no longer
// has, or an object that is not a request), under the id the line names
// when that can be read, else null. It is written raw: the SDK's encoder
// omits a null id.
func (c *stdioConn) answerInvalid(line []byte) {
	id := []byte("null")
	code, msg := int64(jsonrpc.CodeInvalidRequest), "not a JSON-RPC 2.0 request"
	switch t := scanTop(line); {
	case !json.Valid(line):
		code, msg = jsonrpc.CodeParseError, "parse error: the line is not JSON"
	case !t.object:
		if line[0] == '[' {
			msg = "batches are not supported: send one JSON-RPC message per line"
		}
	case t.id != nil && utf8.Valid(t.id) && validID(t.id):
		id = t.id
		if _, exact := parseID(t.id); !exact {
			msg = errInexactID.Error()
		}
	}
	text, _ := json.Marshal(msg)
	buf := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`+"\n", id, code, text)
	if err := c.writeLine(buf); err != nil {
		c.t.log.Warn("answering an invalid message", "error", err)
	}
}

// writeLine writes one message of ours, already encoded and ending in a
// newline.
func (c *stdioConn) writeLine(buf []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	// One write, so that a message is never torn.
	_, err := c.t.w.Write(buf)
	if err != nil && c.fast != nil {
		c.fast.stop(fmt.Errorf("%w: %v", errServerClosing, err))
	}
	return err
}

// writeFast writes the response of a fast call: resp, with raw as its
// result if resp has no error, in the bytes the SDK's path writes (its
// marshalling compacts a result; one of swapMin bytes or more goes out
// as it came, as through the swap table). A result that is not valid
// JSON is not answered, as the SDK does not answer it.
func (c *stdioConn) writeFast(resp *jsonrpc.Response, raw json.RawMessage) {
	if resp.Error == nil {
		if len(raw) >= swapMin {
			var err error
			if !c.open.cancelled(resp.ID) {
				err = c.writeRaw(resp.ID, raw)
			}
			c.open.answered(resp.ID, err)
			return
		}
		resp.Result = raw
	}
	if err := c.write(context.Background(), resp); errors.Is(err, errEncoding) {
		c.t.log.Error("jsonrpc2 internal error", "error", fmt.Errorf("tools/call returned a malformed result: %w", err))
	}
}

func (c *stdioConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.lines.Close()
}
func (c *stdioConn) SessionID() string { return "" }

// drainMax bounds how long the end of a stdio client's input waits for
// the answers to what it asked: a call's own timeout ends it sooner,
// unless a server answers with what cannot be written.
const drainMax = 2 * time.Minute

// gonePoll is how often a drain looks whether the client has gone.
const gonePoll = 100 * time.Millisecond

// inFlight keeps the requests a stdio client sent and has not been
// answered, and those it was sent and has not answered, so that the end
// of its input does not cancel them: a client may write its requests
// and close its input at once (a script piping them in), and still read
// every answer. The zero value is ready to use.
type inFlight struct {
	mu    sync.Mutex
	asked map[jsonrpc.ID]struct{} // by the client; guarded by mu
	// dropped holds what the client asked and then cancelled, until its
	// answer comes, which is not written: the receiver of a cancellation
	// does not answer (MCP's cancellation utility), and the SDK would
	// answer "context canceled" with code 0. Only ids still in asked go
	// in, so that a cancellation racing its answer cannot silence a
	// later request under the same id. Guarded by mu.
	dropped map[jsonrpc.ID]struct{}
	ours    map[jsonrpc.ID]struct{} // of the client; guarded by mu
	broken  bool                    // a write failed: no more answers get out; guarded by mu
	// writing counts the requests of ours in ours still being written: a
	// drain that gives up on them waits until they are out, so that
	// the client sees what it was asked. Guarded by mu.
	writing int
	kick    chan struct{} // made by drain; guarded by mu
}

// read notes a message from the client: a request to answer, an answer
// to a request of ours, or the cancellation of a request (which the
// client then no longer waits for).
func (f *inFlight) read(msg jsonrpc.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if m.IsCall() {
			if f.asked == nil {
				f.asked = map[jsonrpc.ID]struct{}{}
			}
			f.asked[m.ID] = struct{}{}
		} else if m.Method == "notifications/cancelled" {
			if id, ok := cancelledID(m); ok {
				if _, open := f.asked[id]; open {
					delete(f.asked, id)
					if f.dropped == nil {
						f.dropped = map[jsonrpc.ID]struct{}{}
					}
					f.dropped[id] = struct{}{}
				}
			}
		}
	case *jsonrpc.Response:
		delete(f.ours, m.ID)
	}
	f.kickLocked()
}

// sent notes a request of ours to the client, or our cancellation of
// one, after which the client answers it no more.
func (f *inFlight) sent(req *jsonrpc.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case req.IsCall():
		if f.ours == nil {
			f.ours = map[jsonrpc.ID]struct{}{}
		}
		f.ours[req.ID] = struct{}{}
		f.writing++
	case req.Method == "notifications/cancelled":
		if id, ok := cancelledID(req); ok {
			delete(f.ours, id)
		}
	}
	f.kickLocked()
}

// written notes that a request sent noted has been written (or failed).
func (f *inFlight) written() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writing--
	f.kickLocked()
}

// cancelledID is the request a notifications/cancelled names.
func cancelledID(req *jsonrpc.Request) (jsonrpc.ID, bool) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	return id, err == nil
}

// answered notes the answer to the client's request id, written or not.
func (f *inFlight) answered(id jsonrpc.ID, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.asked, id)
	delete(f.dropped, id)
	f.broken = f.broken || (err != nil && !errors.Is(err, errEncoding))
	f.kickLocked()
}

// cancelled reports whether the client cancelled its request id, which
// is then not to be answered.
func (f *inFlight) cancelled(id jsonrpc.ID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.dropped[id]
	return ok
}

func (f *inFlight) kickLocked() {
	select {
	case f.kick <- struct{}{}:
	default: // nil (no drain yet), or a wake-up is pending
	}
}

// drain waits, once the client's input has ended, until every request it
// sent has been answered, and reports whether that happened. It gives up
// when the client is gone (gone, checked every gonePoll: it closed its
// output too, as a client that quits does, rather than only its input),
// when it is being asked something (it can no longer answer, and the
// call that asks would wait for nothing), when a write failed, when
// closed is closed or ctx ends, and after drainMax.
func (f *inFlight) drain(ctx context.Context, closed <-chan struct{}, gone func() bool) bool {
	f.mu.Lock()
	kick := make(chan struct{}, 1)
	f.kick = kick
	f.mu.Unlock()
	limit := time.NewTimer(drainMax)
	defer limit.Stop()
	poll := time.NewTicker(gonePoll)
	defer poll.Stop()
	for {
		f.mu.Lock()
		done, stuck := len(f.asked) == 0, (len(f.ours) > 0 && f.writing == 0) || f.broken
		f.mu.Unlock()
		switch {
		case done:
			return true
		case stuck || gone():
			return false
		}
		select {
		case <-poll.C:
		case <-kick:
		case <-closed:
			return false
		case <-ctx.Done():
			return false
		case <-limit.C:
			return false
		}
	}
}

type closeBoth struct {
	r io.Closer
	w io.Closer
}

func (c closeBoth) Close() error {
	c.r.Close()
	return c.w.Close()
}

// swapMin is the smallest result worth a placeholder.
const swapMin = 4 << 10

// swapTable holds raw results between the SDK's marshalling (which gets a
// placeholder) and the transport's write (which swaps it back).
// A server could answer with a result that looks like a placeholder; the
// key holds a random nonce of the session, so it cannot name another's.
type swapTable struct {
	mu   sync.Mutex
	key  string // {"mcpbox-raw-result-NONCE":
	next int64
	m    map[int64]json.RawMessage
}

func newSwapTable() *swapTable {
	return &swapTable{key: `{"mcpbox-raw-result-` + rand.Text() + `":`, m: map[int64]json.RawMessage{}}
}

func (s *swapTable) put(raw json.RawMessage) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	s.m[s.next] = raw
	return []byte(s.key + strconv.FormatInt(s.next, 10) + "}")
}

// take returns the raw result a placeholder stands for.
func (s *swapTable) take(placeholder json.RawMessage) (json.RawMessage, bool) {
	if s == nil {
		return nil, false
	}
	rest, ok := bytes.CutPrefix(placeholder, []byte(s.key))
	if !ok {
		return nil, false
	}
	n, err := strconv.ParseInt(string(bytes.TrimSuffix(rest, []byte("}"))), 10, 64)
	if err != nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, ok := s.m[n]
	delete(s.m, n)
	return raw, ok
}

// StdioFile is f as ServeStdio's r or w: the gateway never closes it
// (its owner does) and, when f is non-blocking, reads and writes it with
// raw system calls, which keep the runtime's monitor asleep between
// calls (rawfile_unsafe.go). A blocking f is read and written as it is.
func StdioFile(f *os.File) io.ReadWriteCloser {
	if rf := newRawFile(f); rf != nil {
		return stdioFile{rf}
	}
	return stdioFile{f}
}

type stdioFile struct{ io.ReadWriter }

func (stdioFile) Close() error { return nil }
