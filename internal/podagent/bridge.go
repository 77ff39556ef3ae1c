package podagent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"mcpbox/internal/gateway"
)

// DefaultMaxMessage bounds one JSON-RPC message either way when
// Config.MaxMessage is zero: the gateway's limit for a stdio server.
const DefaultMaxMessage = 16 << 20

const (
	// writeTimeout bounds one write to the server's stdin: a server that
	// stops reading fails the request instead of holding it forever.
	writeTimeout = 30 * time.Second
	// maxBacklog bounds the messages kept for the event stream while the
	// gateway has none open (and their bytes to twice the message limit);
	// older ones are dropped first.
	maxBacklog = 1024
	// streamBuffer is how many messages may wait for one HTTP stream
	// before the server's output waits for it (back-pressure, as a pipe).
	// Small: each may be a whole message limit.
	streamBuffer = 4
)

// bridge carries JSON-RPC messages between the gateway's HTTP requests
// and the server's stdio. A call (a request with an id) is answered on its
// own POST as server-sent events: its response, and its progress
// notifications (matched by progressToken) before it. Everything else the
// server sends (notifications, its own requests) goes to the event stream
// the gateway holds open with GET. Messages pass through as the server
// wrote them; the bridge reads only what it routes by.
type bridge struct {
	stdin *os.File
	max   int
	logf  func(format string, args ...any)

	wmu sync.Mutex // serializes writes to stdin

	mu         sync.Mutex
	calls      map[jsonrpc.ID]*stream // guarded by mu; calls awaiting their response
	tokens     map[string]*stream     // guarded by mu; progress token (JSON text) → its call
	events     *stream                // guarded by mu; the open GET, if any
	backlog    [][]byte               // guarded by mu; for the next GET
	backBytes  int                    // guarded by mu; the backlog's size
	done       chan struct{}          // closed when the server's output ended
	doneClosed bool                   // guarded by mu
}

// stream is one HTTP response the bridge writes events to.
type stream struct {
	ch    chan event
	gone  chan struct{} // closed when its handler returned
	stop  chan struct{} // closed when another GET replaces this event stream
	token string        // the call's progress token, if any
}

type event struct {
	data  []byte
	final bool // the call's response: the stream ends after it
}

func newBridge(stdin *os.File, max int, logf func(string, ...any)) *bridge {
	return &bridge{stdin: stdin, max: max, logf: logf, calls: map[jsonrpc.ID]*stream{},
		tokens: map[string]*stream{}, done: make(chan struct{})}
}

func newStream() *stream {
	return &stream{ch: make(chan event, streamBuffer), gone: make(chan struct{}), stop: make(chan struct{})}
}

// pump reads the server's stdout until it ends and routes each message;
// then every stream ends (a call without its response ends without one,
// which the gateway's transport reports as a failed request).
func (b *bridge) pump(stdout io.Reader) error {
	defer b.finish()
	r := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, head, tooLong, err := readLine(r, b.max)
		if tooLong {
			b.oversized(head)
		} else if line = bytes.TrimSpace(line); len(line) > 0 {
			b.route(line)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading the server's output: %w", err)
		}
	}
}

func (b *bridge) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.doneClosed {
		b.doneClosed = true
		close(b.done)
	}
}

// readLine reads up to the next newline. A line longer than max is read
// to its end without being kept; head holds its first bytes.
func readLine(r *bufio.Reader, max int) (line, head []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		switch {
		case tooLong:
		case len(line)+len(chunk) > max:
			tooLong = true
			head = append(line, chunk...)[:min(len(line)+len(chunk), 256)]
			head = bytes.Clone(head)
			line = nil
		default:
			line = append(line, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return line, head, tooLong, err
	}
}

// reqIDRE finds the id of a request that begins with it.
var reqIDRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*,`)
})

// requestID reads the id at the head of an oversized message.
func requestID(head []byte) (jsonrpc.ID, bool) {
	m := reqIDRE().FindSubmatch(head)
	if m == nil {
		return jsonrpc.ID{}, false
	}
	var v any
	if json.Unmarshal(m[1], &v) != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(v)
	return id, err == nil
}

// oversized drops a message larger than the limit; if it is a response
// whose id comes first, its call gets an error instead of waiting.
func (b *bridge) oversized(head []byte) {
	b.logf("dropped a message from the server larger than %d bytes", b.max)
	id, ok := gateway.ResponseID(head, nil) // only the head is kept
	if !ok {
		return
	}
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{
		Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the server's response is larger than the %d-byte message limit", b.max)}})
	if err == nil {
		b.respond(id, data)
	}
}

// route sends one line of the server's output where it belongs.
func (b *bridge) route(line []byte) {
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		b.logf("dropped a line from the server that is not a JSON-RPC message")
		return
	}
	line = oneLine(line)
	switch m := msg.(type) {
	case *jsonrpc.Response:
		b.respond(m.ID, line)
	case *jsonrpc.Request:
		if m.Method == "notifications/progress" {
			var p struct {
				Token json.RawMessage `json:"progressToken"`
			}
			if json.Unmarshal(m.Params, &p) == nil && len(p.Token) > 0 {
				b.mu.Lock()
				s := b.tokens[string(p.Token)]
				b.mu.Unlock()
				if s != nil {
					s.send(event{data: line})
					return
				}
			}
		}
		b.emit(line)
	}
}

// oneLine returns data with no CR or LF outside strings (JSON allows them
// as whitespace; a server-sent event's data must not hold them).
func oneLine(data []byte) []byte {
	if !bytes.ContainsAny(data, "\r\n") {
		return data
	}
	var buf bytes.Buffer
	if json.Compact(&buf, data) != nil {
		return data
	}
	return buf.Bytes()
}

// respond ends the call id with data.
func (b *bridge) respond(id jsonrpc.ID, data []byte) {
	b.mu.Lock()
	s := b.calls[id]
	delete(b.calls, id)
	if s != nil && s.token != "" {
		delete(b.tokens, s.token)
	}
	b.mu.Unlock()
	if s == nil {
		b.logf("dropped a response from the server to no call in flight")
		return
	}
	s.send(event{data: data, final: true})
}

// emit sends data to the event stream, or keeps it for the next one.
func (b *bridge) emit(data []byte) {
	b.mu.Lock()
	s := b.events
	if s == nil {
		b.keepLocked(data)
	}
	b.mu.Unlock()
	if s != nil {
		s.send(event{data: data})
	}
}

// keepLocked adds data to the backlog, dropping the oldest beyond its
// bounds. Preconditions: b.mu held.
func (b *bridge) keepLocked(data []byte) {
	b.backlog = append(b.backlog, data)
	b.backBytes += len(data)
	for len(b.backlog) > maxBacklog || b.backBytes > 2*b.max {
		b.backBytes -= len(b.backlog[0])
		b.backlog = b.backlog[1:]
		b.logf("dropped a message from the server: no event stream open and too many waiting")
	}
}

// send queues e on s, waiting while s is full; it gives up when s's
// handler is gone (the gateway left, or the call was cancelled).
func (s *stream) send(e event) {
	select {
	case s.ch <- e:
	case <-s.gone:
	}
}

// write sends one message to the server's stdin, bounded by writeTimeout.
func (b *bridge) write(data []byte) error {
	data = append(oneLine(data), '\n')
	b.wmu.Lock()
	defer b.wmu.Unlock()
	if err := b.stdin.SetWriteDeadline(time.Now().Add(writeTimeout)); err == nil {
		defer b.stdin.SetWriteDeadline(time.Time{})
	}
	if _, err := b.stdin.Write(data); err != nil {
		return fmt.Errorf("writing to the server: %w", err)
	}
	return nil
}

// serveMCP is /mcp: POST carries one message to the server, GET opens the
// event stream.
func (b *bridge) serveMCP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		b.post(w, r)
	case http.MethodGet:
		b.get(w, r)
	case http.MethodDelete:
		// No sessions to end: the server lives as long as the pod.
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (b *bridge) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(b.max)+1))
	if err != nil {
		http.Error(w, "reading the request", http.StatusBadRequest)
		return
	}
	if len(body) > b.max {
		// A JSON-RPC error, with the call's id if it comes first: the
		// go-sdk client then fails the call, not the connection.
		id, _ := requestID(body[:min(len(body), 256)])
		writeRPCError(w, http.StatusRequestEntityTooLarge, id, jsonrpc.CodeInvalidRequest, fmt.Sprintf("message larger than %d bytes", b.max))
		return
	}
	msg, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		writeRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeParseError, "not one JSON-RPC message")
		return
	}
	req, isReq := msg.(*jsonrpc.Request)
	if !isReq || !req.IsCall() {
		if err := b.write(body); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	s := newStream()
	defer close(s.gone)
	if err := b.register(req, s); err != nil {
		writeRPCError(w, http.StatusBadRequest, req.ID, jsonrpc.CodeInvalidRequest, err.Error())
		return
	}
	defer b.unregister(req.ID, s)
	if err := b.write(body); err != nil {
		writeRPCError(w, http.StatusServiceUnavailable, req.ID, jsonrpc.CodeInternalError, err.Error())
		return
	}
	startEvents(w)
	b.serveStream(w, r, s, nil)
}

// register makes s the stream of call req, unless its id is in flight or
// the server's output has ended.
func (b *bridge) register(req *jsonrpc.Request, s *stream) error {
	var p struct {
		Meta struct {
			Token json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if json.Unmarshal(req.Params, &p) == nil && len(p.Meta.Token) > 0 {
		var buf bytes.Buffer
		if json.Compact(&buf, p.Meta.Token) == nil {
			s.token = buf.String()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.doneClosed {
		return errors.New("the server's output has ended")
	}
	if _, dup := b.calls[req.ID]; dup {
		return errors.New("a request with this id is in flight")
	}
	if _, dup := b.tokens[s.token]; dup && s.token != "" {
		s.token = "" // its progress goes to the event stream instead
	}
	b.calls[req.ID] = s
	if s.token != "" {
		b.tokens[s.token] = s
	}
	return nil
}

func (b *bridge) unregister(id jsonrpc.ID, s *stream) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls[id] == s {
		delete(b.calls, id)
	}
	if s.token != "" && b.tokens[s.token] == s {
		delete(b.tokens, s.token)
	}
}

// get opens the event stream, in place of any open one.
func (b *bridge) get(w http.ResponseWriter, r *http.Request) {
	s := newStream()
	defer close(s.gone)
	b.mu.Lock()
	old := b.events
	b.events = s
	backlog := b.backlog
	b.backlog, b.backBytes = nil, 0
	if old != nil {
		close(old.stop)
	}
	b.mu.Unlock()
	if old != nil {
		b.logf("a new event stream replaces the open one")
	}
	defer func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.events != s {
			return
		}
		b.events = nil
		// What it could not deliver waits for the next one.
		for {
			select {
			case e := <-s.ch:
				b.keepLocked(e.data)
			default:
				return
			}
		}
	}()
	startEvents(w)
	b.serveStream(w, r, s, backlog)
}

// serveStream writes first and then s's events to w until the call's
// response, the request's end, the server's end, or (for the event
// stream) another GET replacing it.
func (b *bridge) serveStream(w http.ResponseWriter, r *http.Request, s *stream, first [][]byte) {
	for _, data := range first {
		if writeEvent(w, data) != nil {
			return
		}
	}
	// drain writes what was routed to s before it ended.
	drain := func() {
		for {
			select {
			case e := <-s.ch:
				if writeEvent(w, e.data) != nil || e.final {
					return
				}
			default:
				return
			}
		}
	}
	for {
		select {
		case e := <-s.ch:
			if writeEvent(w, e.data) != nil || e.final {
				return
			}
		case <-r.Context().Done():
			return
		case <-b.done:
			drain()
			return
		case <-s.stop:
			drain()
			return
		}
	}
}

func startEvents(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).Flush()
}

func writeEvent(w http.ResponseWriter, data []byte) error {
	buf := make([]byte, 0, len(data)+24)
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := w.Write(buf); err != nil {
		return err
	}
	return http.NewResponseController(w).Flush()
}

func writeRPCError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, msg string) {
	data, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(data)
}
