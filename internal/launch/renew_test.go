package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/gateway"
)

// restartingRemote is a remote MCP server (the go-sdk's) whose restart
// forgets every session, as a redeployed server does: requests with an
// old session id get 404. It counts the initializes it saw.
type restartingRemote struct {
	hs      *httptest.Server
	mu      sync.Mutex
	h       http.Handler
	inits   atomic.Int32
	pings   atomic.Int32
	started chan struct{} // a slow call began
	release chan struct{} // ends slow calls
}

func newRestartingRemote(t *testing.T) *restartingRemote {
	r := &restartingRemote{started: make(chan struct{}, 8), release: make(chan struct{})}
	r.restart(false)
	r.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		h := r.h
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(func() {
		close(r.release)
		r.hs.CloseClientConnections()
		r.hs.Close()
	})
	return r
}

// restart replaces the server and its sessions; cut also cuts every
// connection to the old one (a stream in flight).
func (r *restartingRemote) restart(cut bool) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "remote", Version: "1"}, &mcp.ServerOptions{
		InitializedHandler: func(context.Context, *mcp.InitializedRequest) { r.inits.Add(1) },
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "ping"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		r.pings.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		r.started <- struct{}{}
		select {
		case <-r.release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slow done"}}}, nil, nil
	})
	r.mu.Lock()
	// An event store: a stream cut in flight is resumed by the client
	// (GET with Last-Event-ID), which then meets the 404.
	r.h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	r.mu.Unlock()
	if cut {
		r.hs.CloseClientConnections()
	}
}

// connectClient connects a go-sdk client with opts to the gateway at url
// (Streamable HTTP), closed when the test ends.
func connectClient(t *testing.T, ctx context.Context, url string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, opts).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestRemoteSessionRenewed: a remote server that restarted (its sessions
// gone: 404) is given a new session by the gateway's connection, and the
// call that met the 404 is answered, not failed; so is a list. A call in
// flight when the session went is answered with an error saying so. A
// server that keeps losing sessions (more than renewMax within a minute)
// ends the connection as before, and the gateway's restart policy takes
// over.
func TestRemoteSessionRenewed(t *testing.T) {
	rem := newRestartingRemote(t)
	url := serveGateway(t, "remote", NewRemote(RemoteOptions{URL: rem.hs.URL, Logger: slog.New(slog.DiscardHandler)}), gateway.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	changed := make(chan struct{}, 16)
	cs := connectClient(t, ctx, url, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	ping := func() (string, error) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping"})
		if err != nil {
			return "", err
		}
		return res.Content[0].(*mcp.TextContent).Text, nil
	}
	if got, err := ping(); err != nil || got != "pong" {
		t.Fatalf("first call: %q %v", got, err)
	}
	for i := range renewMax - 1 {
		rem.restart(false)
		if got, err := ping(); err != nil || got != "pong" {
			t.Fatalf("call after restart %d: %q, %v; want the answer of a new session", i+1, got, err)
		}
		if n := rem.inits.Load(); n != int32(i+2) {
			t.Fatalf("after restart %d the remote saw %d sessions initialized, want %d", i+1, n, i+2)
		}
		// A redeployed server's tools may differ: the client is told.
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatalf("after restart %d the client was not told the tools may have changed", i+1)
		}
	}
	// A call in flight when the session goes (its stream cut, the
	// resumption met with 404).
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow"})
		done <- err
	}()
	select {
	case <-rem.started:
	case <-ctx.Done():
		t.Fatal("the slow call did not start")
	}
	rem.restart(true)
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		t.Fatal("the call in flight when the session went got no answer")
	}
	if !strings.Contains(fmt.Sprint(err), "lost its session before it answered") {
		t.Errorf("the call in flight: %v; want an error saying the session was lost", err)
	}
	if got, err := ping(); err != nil || got != "pong" {
		t.Fatalf("call after the session lost in flight: %q, %v", got, err)
	}
	// One loss more within the minute: the connection ends, and the
	// gateway's restart policy says so.
	rem.restart(false)
	if _, err := ping(); err == nil || !strings.Contains(err.Error(), "session not found") {
		t.Errorf("a loss past %d within %s: %v; want the connection's end reported", renewMax, renewWindow, err)
	}
}

// TestRemoteGone: a remote server that stopped listening is named with
// the cause (the dial's refusal), not the go-sdk's bare "rejected by
// transport", and its connection ends: the instance does not stay
// "running" while every request fails.
func TestRemoteGone(t *testing.T) {
	rem := newRestartingRemote(t)
	gw, url := serveGatewayOf(t, "remote", NewRemote(RemoteOptions{URL: rem.hs.URL}), gateway.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := connectClient(t, ctx, url, nil)
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping"}); err != nil {
		t.Fatal(err)
	}
	rem.hs.CloseClientConnections()
	rem.hs.Listener.Close()
	// The first call may meet the closed keep-alive connection (EOF);
	// one then meets the closed port.
	for i := 0; ; i++ {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping"})
		if err == nil || !strings.Contains(err.Error(), "server remote ") || strings.Contains(err.Error(), "rejected by transport;") {
			t.Fatalf("call %d to a remote that is gone: %v; want the server named", i+1, err)
		}
		if strings.Contains(err.Error(), "connection refused") {
			break
		}
		if i == 2 {
			t.Fatalf("call %d to a remote that is gone: %v; want the refusal named", i+1, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ins := gw.Instances()
		if len(ins) == 1 && ins[0].State != gateway.StateRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("instances %+v: still running 10 s after every request failed", ins)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRemoteConcurrentAfterRestart: calls sent at once to a remote that
// restarted each meet the 404, and each is answered by the server once,
// on the new session: none is answered "lost" and run as well.
func TestRemoteConcurrentAfterRestart(t *testing.T) {
	rem := newRestartingRemote(t)
	url := serveGateway(t, "remote", NewRemote(RemoteOptions{URL: rem.hs.URL}), gateway.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := connectClient(t, ctx, url, nil)
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping"}); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		rem.restart(false)
		before := rem.pings.Load()
		const n = 4
		errs := make(chan error, n)
		for range n {
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping"})
				errs <- err
			}()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Errorf("round %d: a call after the restart: %v", round, err)
			}
		}
		if ran := rem.pings.Load() - before; ran != n {
			t.Errorf("round %d: the server ran %d calls of %d", round, ran, n)
		}
	}
}

// TestRenewalEndsAtClose: a renewal that waits on a server that does
// not answer its initialize ends when the connection closes, and the
// write that needed it fails; it does not hold the connection for the
// renewal's 30 s.
func TestRenewalEndsAtClose(t *testing.T) {
	rem := newRestartingRemote(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := &mcp.StreamableClientTransport{Endpoint: rem.hs.URL, MaxRetries: 1}
	first, err := tr.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc := newRenewingConn(first, tr.Connect, nil)
	defer rc.Close()
	go func() {
		for {
			if _, err := rc.Read(ctx); err != nil {
				return
			}
		}
	}()
	init, _ := jsonrpc.MakeID(float64(1))
	params := []byte(`{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	if err := rc.Write(ctx, &jsonrpc.Request{ID: init, Method: "initialize", Params: params}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for rc.SessionID() == "" || func() bool { rc.mu.Lock(); defer rc.mu.Unlock(); return rc.version == "" }() {
		if time.Now().After(deadline) {
			t.Fatal("no answer to initialize")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The restarted server takes requests and never answers.
	rem.mu.Lock()
	rem.h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") != "" {
			http.NotFound(w, r)
			return
		}
		select {
		case <-r.Context().Done():
		case <-rem.release:
		}
	})
	rem.mu.Unlock()
	id, _ := jsonrpc.MakeID(float64(2))
	done := make(chan error, 1)
	go func() { done <- rc.Write(ctx, &jsonrpc.Request{ID: id, Method: "tools/list"}) }()
	time.Sleep(300 * time.Millisecond) // the renewal waits on the initialize
	closed := time.Now()
	rc.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("the write whose renewal was cut by Close succeeded")
		}
		if d := time.Since(closed); d > 5*time.Second {
			t.Errorf("the write ended %v after Close", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write still waits 10 s after Close")
	}
}

// scriptConn is a connection whose session is lost (every write and
// read fails with mcp.ErrSessionMissing) once lose is closed, and whose
// writes of requests named in hold wait for their channel first: the
// order of a race, set by the test. Answered requests are echoed back.
type scriptConn struct {
	lose    chan struct{}
	hold    map[string]chan struct{}
	answers chan jsonrpc.Message
	closed  chan struct{}
	once    sync.Once
}

func newScriptConn() *scriptConn {
	return &scriptConn{lose: make(chan struct{}), hold: map[string]chan struct{}{}, answers: make(chan jsonrpc.Message, 16), closed: make(chan struct{})}
}

func (c *scriptConn) Write(ctx context.Context, m jsonrpc.Message) error {
	req, ok := m.(*jsonrpc.Request)
	if ok {
		if h := c.hold[req.Method]; h != nil {
			<-h
		}
	}
	select {
	case <-c.lose:
		return fmt.Errorf("sending: %w", mcp.ErrSessionMissing)
	default:
	}
	if ok && req.IsCall() {
		result := `{"protocolVersion":"2025-06-18"}`
		if req.Method != "initialize" {
			result = `{"ran":"` + req.Method + `"}`
		}
		c.answers <- &jsonrpc.Response{ID: req.ID, Result: json.RawMessage(result)}
	}
	return nil
}

func (c *scriptConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.answers:
		return m, nil
	case <-c.lose:
		return nil, fmt.Errorf("reading: %w", mcp.ErrSessionMissing)
	case <-c.closed:
		return nil, errors.New("closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *scriptConn) Close() error      { c.once.Do(func() { close(c.closed) }); return nil }
func (c *scriptConn) SessionID() string { return "s" }

// TestRenewedWhileWritten: a request whose write is under way on a
// session when the read side finds the session lost and renews it is
// not answered "lost": its write meets the 404 and sends it again, and
// its one answer is the new session's.
func TestRenewedWhileWritten(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	old, fresh := newScriptConn(), newScriptConn()
	gate := make(chan struct{})
	old.hold["tools/call"] = gate
	rc := newRenewingConn(old, func(context.Context) (mcp.Connection, error) { return fresh, nil }, nil)
	defer rc.Close()
	id0, _ := jsonrpc.MakeID(float64(1))
	if err := rc.Write(ctx, &jsonrpc.Request{ID: id0, Method: "initialize", Params: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if m, err := rc.Read(ctx); err != nil || m.(*jsonrpc.Response).ID != id0 {
		t.Fatalf("initialize's answer: %v %v", m, err)
	}
	id, _ := jsonrpc.MakeID(float64(7))
	written := make(chan error, 1)
	go func() {
		written <- rc.Write(ctx, &jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{}`)})
	}()
	// The session goes while the call is being written; the read side
	// renews first, then the write goes on and meets the 404.
	close(old.lose)
	got := make(chan jsonrpc.Message, 8)
	go func() {
		for {
			m, err := rc.Read(ctx)
			if err != nil {
				return
			}
			got <- m
		}
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		rc.mu.Lock()
		renewed := rc.cur == fresh
		rc.mu.Unlock()
		if renewed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not renewed")
		}
	}
	close(gate)
	if err := <-written; err != nil {
		t.Fatalf("the call's write: %v", err)
	}
	var answers []string
	timeout := time.After(2 * time.Second)
	for collecting := true; collecting; {
		select {
		case m := <-got:
			if resp, ok := m.(*jsonrpc.Response); ok && resp.ID == id {
				answers = append(answers, fmt.Sprint(resp.Result != nil, resp.Error))
			}
		case <-timeout:
			collecting = false
		}
	}
	if len(answers) != 1 || answers[0] != "true <nil>" {
		t.Fatalf("answers to the call written during the renewal: %v; want its one result", answers)
	}
}

// TestRemoteCallTimeoutNamed: a call to a remote server that answers in
// JSON, cut by the call timeout while the server works, is reported as
// the timeout: not as the server being unavailable, nor as the go-sdk's
// bare "rejected by transport".
func TestRemoteCallTimeoutNamed(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := mcp.NewServer(&mcp.Implementation{Name: "remote", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{}, nil, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true}))
	defer hs.Close()
	url := serveGateway(t, "remote", NewRemote(RemoteOptions{URL: hs.URL}), gateway.Options{CallTimeout: 500 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := connectClient(t, ctx, url, nil)
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow"})
	if err == nil || !strings.Contains(err.Error(), "call timed out") || strings.Contains(err.Error(), "unavailable") {
		t.Fatalf("a call cut by the call timeout: %v; want the timeout named", err)
	}
}
