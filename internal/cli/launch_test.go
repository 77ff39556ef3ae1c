package cli

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/config"
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

func TestCredentialCheck(t *testing.T) {
	key := "AKIA" + "IOSFODNN7EXAMPLE"
	result := json.RawMessage(`{"content":[{"type":"text","text":"found ` + key + ` in config"}]}`)
	next := func(context.Context) (json.RawMessage, error) { return result, nil }
	tests := []struct {
		policy, want, notWant string
	}{
		{"", key, ""}, // flag: passed on, logged
		{config.CredentialsFlag, key, ""},
		{config.CredentialsRedact, "[REDACTED:credential:aws-access-key-id]", key},
		{config.CredentialsBlock, "was blocked", key},
	}
	for _, tt := range tests {
		t.Run("policy "+tt.policy, func(t *testing.T) {
			var logs strings.Builder
			log := slog.New(slog.NewTextHandler(&logs, nil))
			check := credentialCheck(log, map[string]string{"s": tt.policy})
			out, err := check(context.Background(), &gateway.Call{Server: "s", Tool: "read"}, next)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), tt.want) || (tt.notWant != "" && strings.Contains(string(out), tt.notWant)) {
				t.Fatalf("result %s", out)
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON: %s", out)
			}
			if !strings.Contains(logs.String(), "aws-access-key-id") || strings.Contains(logs.String(), key) {
				t.Fatalf("log %q: want the rule, never the value", logs.String())
			}
		})
	}
}

// TestStateDirOwned: a state dir writable by others, or another user's,
// is refused (they could swap the audit, the pins, the admin socket).
func TestStateDirOwned(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := stateDirOwned(dir); err != nil {
		t.Fatalf("own dir: %v", err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := stateDirOwned(dir); err == nil {
		t.Fatal("a world-writable state dir was accepted")
	}
	os.Chmod(dir, 0o700)
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot give the dir to another user")
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := stateDirOwned(dir); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Fatalf("another user's state dir: %v", err)
	}
}
