package launch

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
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
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping"}); err != nil {
		t.Fatal(err)
	}
	rem.hs.CloseClientConnections()
	rem.hs.Listener.Close()
	// The first call may meet the closed keep-alive connection (EOF);
	// one then meets the closed port.
	for i := 0; ; i++ {
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping"})
		if err == nil || !strings.Contains(err.Error(), "server remote is unavailable") {
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
