package cli

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/gateway"
	"mcpbox/internal/redact"
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
	gw, err := gateway.New([]*gateway.Server{{Name: "remote", Launch: l.launch, Allow: []string{"*"}}}, gatewayOptions(log, book, nil))
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
