package gateway

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAuthedHandlers: an Authed handler needs a token the endpoint
// accepts (a rotated one as soon as the endpoint takes it), an Extra one
// none, and a path neither names is 404 without a token.
func TestAuthedHandlers(t *testing.T) {
	gw := newGateway(t, &Server{Name: "s", Launch: sdkLauncher(func(Scope) *mcp.Server { return testServer("s") }, nil, nil), Allow: []string{"*"}})
	var cur atomic.Value
	cur.Store("old-token-0123456789")
	var served atomic.Int32
	authed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1); io.WriteString(w, "secret") })
	url := serveHTTP(t, gw, HTTPOptions{
		Clients: []Client{{Name: LocalAgent, Token: []byte("old-token-0123456789")}},
		Refresh: func() ([]Client, bool, error) {
			tok := cur.Load().(string)
			return []Client{{Name: LocalAgent, Token: []byte(tok)}}, tok != "old-token-0123456789", nil
		},
		Authed: map[string]http.Handler{"/metrics": authed},
		Extra:  map[string]http.Handler{"/healthz": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })},
	})
	base := strings.TrimSuffix(url, EndpointPath)
	get := func(path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", "wrong-token-0123456789", http.StatusUnauthorized},
		{"/metrics", "old-token-0123456789", http.StatusOK},
		{"/healthz", "", http.StatusOK},
		{"/nothing", "", http.StatusNotFound},
	} {
		code, body := get(c.path, c.token)
		if code != c.want {
			t.Errorf("GET %s with %q: %d, want %d", c.path, c.token, code, c.want)
		}
		if c.path == "/metrics" && code != http.StatusOK && strings.Contains(body, "secret") {
			t.Errorf("GET %s with %q answered the handler's body", c.path, c.token)
		}
	}
	if n := served.Load(); n != 1 {
		t.Errorf("the authed handler ran %d times, want 1", n)
	}
	cur.Store("new-token-0123456789")
	if code, _ := get("/metrics", "old-token-0123456789"); code != http.StatusUnauthorized {
		t.Errorf("rotated-away token: %d, want 401", code)
	}
	if code, _ := get("/metrics", "new-token-0123456789"); code != http.StatusOK {
		t.Errorf("rotated token: %d, want 200", code)
	}
}
