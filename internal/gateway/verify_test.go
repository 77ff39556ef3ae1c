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

// TestVerifyAdmitsIdentities: tokens a Verify function accepts become
// identities of their own next to the static clients; everything else
// is a 401 naming the resource metadata; the extra handlers are served.
func TestVerifyAdmitsIdentities(t *testing.T) {
	var mu sync.Mutex
	var scopes []Scope
	srv := &Server{Name: "s", Launch: sdkLauncher(func(sc Scope) *mcp.Server { return testServer("for-" + sc.Agent) }, &scopes, &mu), Allow: []string{"*"}}
	gw := newGateway(t, srv)
	verified := map[string]string{
		"jwt-alice-0123456789": "oidc.alice",
		"jwt-bob-0123456789ab": "oidc.bob",
		"jwt-evil-0123456789a": "alice",        // no '.': would be a client's name
		"jwt-dots-0123456789a": "oidc./../etc", // not a dir name
		"jwt-locl-0123456789a": "_local.x",     // internal
	}
	url := serveHTTP(t, gw, HTTPOptions{
		Clients: []Client{{Name: "alice", Token: []byte("alice-token-0123456789")}},
		Verify: func(_ context.Context, tok string) (string, error) {
			if n, ok := verified[tok]; ok {
				return n, nil
			}
			return "", errors.New("invalid access token: signature")
		},
		ResourceMetadataURL: "http://127.0.0.1/.well-known/oauth-protected-resource/mcp",
		Extra: map[string]http.Handler{"/.well-known/oauth-protected-resource": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"resource":"x"}`)
		})},
	})
	for tok, want := range map[string]string{"alice-token-0123456789": "for-alice", "jwt-alice-0123456789": "for-oidc.alice", "jwt-bob-0123456789ab": "for-oidc.bob"} {
		cs := connect(t, url, tok, nil)
		if got := callText(t, cs, &mcp.CallToolParams{Name: "whoami"}); got != want {
			t.Errorf("token %s reached %q, want %q", tok, got, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for _, tok := range []string{"", "jwt-nope-0123456789a", "jwt-evil-0123456789a", "jwt-dots-0123456789a", "jwt-locl-0123456789a"} {
		req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("token %q: status %d, want 401", tok, resp.StatusCode)
		}
		want := `Bearer error="invalid_token", resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/mcp"`
		if tok == "" {
			want = `Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/mcp"`
		}
		if h := resp.Header.Values("WWW-Authenticate"); len(h) != 1 || h[0] != want {
			t.Errorf("token %q: WWW-Authenticate %q, want %q", tok, h, want)
		}
		if strings.Contains(string(b), "signature") {
			t.Errorf("token %q: the refusal's reason reached the client: %s", tok, b)
		}
	}
	resp, err := http.Get(strings.TrimSuffix(url, EndpointPath) + "/.well-known/oauth-protected-resource")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != `{"resource":"x"}` {
		t.Errorf("metadata: %d %s", resp.StatusCode, b)
	}
	mu.Lock()
	defer mu.Unlock()
	agents := map[string]bool{}
	for _, sc := range scopes {
		agents[sc.Agent] = true
	}
	if len(agents) != 3 {
		t.Errorf("agents %v, want alice, oidc.alice, oidc.bob", agents)
	}
}
