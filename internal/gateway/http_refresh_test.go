package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRefreshRotatesToken: once the token source changes, the old token
// is refused at its next request and the new one accepted; a failing
// refresh, or one with an unusable token, leaves the accepted token as
// it was.
func TestRefreshRotatesToken(t *testing.T) {
	gw := newGateway(t, &Server{Name: "s", Launch: sdkLauncher(func(Scope) *mcp.Server { return testServer("s") }, nil, nil), Allow: []string{"*"}})
	var mu sync.Mutex
	cur, version, fail := "old-token-0123456789", 0, error(nil)
	refreshes := 0
	url := serveHTTP(t, gw, HTTPOptions{
		Clients: []Client{{Name: LocalAgent, Token: []byte(cur)}},
		Refresh: func() ([]Client, bool, error) {
			mu.Lock()
			defer mu.Unlock()
			refreshes++
			if fail != nil {
				return nil, false, fail
			}
			changed := version > 0
			version = 0
			return []Client{{Name: LocalAgent, Token: []byte(cur)}}, changed, nil
		},
	})
	status := func(token string) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
		req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		return resp.StatusCode
	}
	set := func(tok string, err error) {
		mu.Lock()
		defer mu.Unlock()
		cur, fail = tok, err
		version++
	}

	if got := status("old-token-0123456789"); got != http.StatusOK {
		t.Fatalf("old token before rotation: %d", got)
	}
	if got := status("new-token-0123456789"); got != http.StatusUnauthorized {
		t.Fatalf("a token not yet issued: %d, want 401", got)
	}
	set("new-token-0123456789", nil)
	if got := status("old-token-0123456789"); got != http.StatusUnauthorized {
		t.Fatalf("old token after rotation: %d, want 401", got)
	}
	if got := status("new-token-0123456789"); got != http.StatusOK {
		t.Fatalf("new token after rotation: %d, want 200", got)
	}
	// A broken source keeps the current token and lets no other in.
	set("third-token-0123456789", errors.New("token file unsafe"))
	if got := status("third-token-0123456789"); got != http.StatusUnauthorized {
		t.Fatalf("token from a failing refresh: %d, want 401", got)
	}
	if got := status("new-token-0123456789"); got != http.StatusOK {
		t.Fatalf("current token after a failing refresh: %d, want 200", got)
	}
	// A refreshed token shorter than the gateway accepts is not taken.
	set("short", nil)
	if got := status("short"); got != http.StatusUnauthorized {
		t.Fatalf("short refreshed token: %d, want 401", got)
	}
	if got := status("new-token-0123456789"); got != http.StatusOK {
		t.Fatalf("current token after an unusable refresh: %d, want 200", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if refreshes == 0 {
		t.Fatal("Refresh was never called")
	}
}

func TestRefreshNeedsClients(t *testing.T) {
	gw := newGateway(t, &Server{Name: "s", Launch: sdkLauncher(func(Scope) *mcp.Server { return testServer("s") }, nil, nil), Allow: []string{"*"}})
	_, err := gw.Handler(HTTPOptions{Addr: "127.0.0.1:1", Refresh: func() ([]Client, bool, error) { return nil, false, nil }})
	if err == nil {
		t.Fatal("Handler with Refresh and no clients: no error")
	}
}
