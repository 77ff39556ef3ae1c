package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/gateway"
	"mcpbox/internal/redact"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/track"
)

// TestRemoteServer: a remote server is reached from the gateway with its
// header values resolved from secret references, and its tools come
// through the gateway like a sandboxed server's.
func TestRemoteServer(t *testing.T) {
	t.Setenv("MCPBOX_TEST_REMOTE_TOKEN", "Bearer remote-secret-value")
	srv := mcp.NewServer(&mcp.Implementation{Name: "remote", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ping"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		// A hostile remote echoes the token it was sent.
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong remote-secret-value"}}}, nil, nil
	})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var refused atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer remote-secret-value" {
			refused.Add(1)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	defer hs.Close()

	book := &redact.Book{}
	l := &remoteLauncher{url: hs.URL, headers: map[string]string{"Authorization": "env:MCPBOX_TEST_REMOTE_TOKEN"}, book: book}
	log := slog.New(slog.DiscardHandler)
	gw, err := gateway.New([]*gateway.Server{{Name: "remote", Launch: launchOn(l), Allow: []string{"*"}}}, gatewayOptions(log, book, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	gwHTTP := httptest.NewUnstartedServer(nil)
	h, err := gw.Handler(gateway.HTTPOptions{Addr: gwHTTP.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	gwHTTP.Config.Handler = h
	gwHTTP.Start()
	defer gwHTTP.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gwHTTP.URL + gateway.EndpointPath}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping"})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "pong [REDACTED:Authorization]" {
		t.Fatalf("got %q", got)
	}
	if n := refused.Load(); n != 0 {
		t.Fatalf("%d requests reached the remote server without the header", n)
	}
}

func TestLineWriter(t *testing.T) {
	var b strings.Builder
	lw := &lineWriter{w: &b, prefix: "p: "}
	lw.Write([]byte("one\ntw"))
	lw.Write([]byte("o\x1b[31m\u009b\x7f\n" + strings.Repeat("x", maxLogLine+10) + "\nlast"))
	lw.Close()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 4 || lines[0] != "p: one" || lines[1] != "p: two?[31m??" || len(lines[2]) != len("p: ")+maxLogLine || lines[3] != "p: last" {
		t.Fatalf("lines = %q", lines)
	}
}

// recordingObserver counts what a launcher reports.
type recordingObserver struct{ started, ended, events, egress atomic.Int32 }

func (o *recordingObserver) SandboxStarted(string, gateway.Scope, *track.Sandbox) func() {
	o.started.Add(1)
	return func() {}
}
func (o *recordingObserver) SandboxEnded(string, gateway.Scope, *track.Sandbox, string, bool) {
	o.ended.Add(1)
}
func (o *recordingObserver) SandboxEvent(string, string, gateway.Scope, *track.Sandbox, string) {
	o.events.Add(1)
}
func (o *recordingObserver) EgressEvent(string, gateway.Scope, *track.Sandbox, egress.Event) {
	o.egress.Add(1)
}

// TestLaunchCancelStopsSecret: a start resolves its secrets with the
// caller's context, so a cancelled start does not wait for a slow cmd:
// secret; nothing was started, so the observer hears of nothing and the
// backend lists nothing.
func TestLaunchCancelStopsSecret(t *testing.T) {
	obs := &recordingObserver{}
	l := &sandboxLauncher{
		name: "slow", secrets: []config.Secret{{Name: "TOKEN", From: "cmd:sleep 30"}},
		book: &redact.Book{}, log: slog.New(slog.DiscardHandler), stderr: io.Discard, observer: obs,
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := l.Start(ctx, gateway.Scope{Agent: "a"})
	if err == nil || !strings.Contains(err.Error(), "secret TOKEN") || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("Start = %v, want the secret's cancellation", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("a cancelled start took %s", d)
	}
	if n := obs.started.Load() + obs.ended.Load(); n != 0 {
		t.Fatalf("the observer heard of %d starts or ends of a sandbox that never started", n)
	}
	if got := l.List(); len(got) != 0 {
		t.Fatalf("List = %v after a failed start", got)
	}
}

func TestExitStatus(t *testing.T) {
	size := &sandbox.SizeError{Dir: "/workspace/output", Limit: 1024, Stopped: true}
	tests := []struct {
		res       *sandbox.Result
		err       error
		want      string
		wantClean bool
	}{
		{res: &sandbox.Result{ExitCode: 0}, want: "exited with status 0", wantClean: true},
		{res: &sandbox.Result{ExitCode: 2}, want: "exited with status 2"},
		{err: errors.New("waiting: broken"), want: "waiting: broken"},
		{res: &sandbox.Result{ExitCode: 137, OOMKilled: true}, want: "killed: out of memory"},
		{res: &sandbox.Result{ExitCode: 0, PidsExhausted: true}, want: "exited with status 0 after hitting its process limit"},
		{res: &sandbox.Result{ExitCode: 137, SizeExceeded: size}, want: "killed: " + sizeReport(size)},
	}
	for _, tt := range tests {
		got, clean := exitStatus(tt.res, tt.err)
		if got != tt.want || clean != tt.wantClean {
			t.Errorf("exitStatus(%+v, %v) = %q, %v; want %q, %v", tt.res, tt.err, got, clean, tt.want, tt.wantClean)
		}
	}
}
