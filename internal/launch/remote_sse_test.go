package launch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/gateway"
	"mcpbox/internal/oauth"
	"mcpbox/internal/redact"
)

// sseServer is a legacy HTTP+SSE server (the go-sdk's SSE handler) on
// loopback that refuses every request, the event stream's GET and the
// message POSTs alike, without Authorization: want. As the TypeScript
// SDK's servers do, it streams at /sse and takes messages at /messages,
// beside it rather than under it.
func sseServer(t *testing.T, want string) (*httptest.Server, *atomic.Int32) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "legacy", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ping"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong over sse"}}}, nil, nil
	})
	h := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var refused atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != want {
			refused.Add(1)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodGet {
			// The handler names the endpoint relative to the stream's URL.
			r = r.Clone(r.Context())
			r.URL.Path = "/messages"
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs, &refused
}

// sseCall calls ping through a gateway over the remote backend l.
func sseCall(t *testing.T, l *Remote) (string, error) {
	t.Helper()
	url := serveGateway(t, "legacy", l, gateway.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		return "", err
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping"})
	if err != nil {
		return "", err
	}
	if res.IsError {
		return "", fmt.Errorf("tool error: %v", res.Content[0].(*mcp.TextContent).Text)
	}
	return res.Content[0].(*mcp.TextContent).Text, nil
}

// TestRemoteSSE: a server of the 2024-11-05 HTTP+SSE transport is
// reached with its headers on the stream and on every message.
func TestRemoteSSE(t *testing.T) {
	t.Setenv("MCPBOX_TEST_SSE_TOKEN", "Bearer sse-secret-value")
	hs, refused := sseServer(t, "Bearer sse-secret-value")
	l := NewRemote(RemoteOptions{URL: hs.URL + "/sse", SSE: true, Headers: map[string]string{"Authorization": "env:MCPBOX_TEST_SSE_TOKEN"}, Book: &redact.Book{}})
	got, err := sseCall(t, l)
	if err != nil || got != "pong over sse" {
		t.Fatalf("call over sse: %q, %v", got, err)
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("%d requests reached the server without the header", n)
	}
	// Streamable HTTP to the same server fails: the transport matters,
	// and the error names the one to configure.
	if _, err := sseCall(t, NewRemote(RemoteOptions{URL: hs.URL + "/sse", Headers: map[string]string{"Authorization": "env:MCPBOX_TEST_SSE_TOKEN"}})); err == nil {
		t.Error("streamable HTTP to an SSE server worked; the test server is not SSE-only")
	} else if !strings.Contains(err.Error(), "it takes transport: sse") {
		t.Errorf("streamable HTTP to an SSE server: %v, want the transport named", err)
	}
}

// TestRemoteSSEOAuth: the OAuth token goes on the stream and on the
// message endpoint the server names beside it (not under the SSE URL's
// path).
func TestRemoteSSEOAuth(t *testing.T) {
	hs, refused := sseServer(t, "Bearer oauth-access-token-1234")
	url := hs.URL + "/sse"
	dir := t.TempDir()
	store := &oauth.FileStore{Dir: filepath.Join(dir, "oauth"), Keys: oauth.KeyFile(filepath.Join(dir, "oauth.key"))}
	g := &oauth.Grant{Server: url, Issuer: hs.URL, Resource: url, ClientID: "c", TokenEndpoint: hs.URL + "/token", AccessToken: "oauth-access-token-1234"}
	if err := store.Save(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	book := &redact.Book{}
	l := NewRemote(RemoteOptions{URL: url, SSE: true, Book: book,
		OAuth: &RemoteOAuth{Name: "legacy", Store: func(string) (oauth.Store, error) { return store, nil }}})
	got, err := sseCall(t, l)
	if err != nil || got != "pong over sse" {
		t.Fatalf("call over sse with oauth: %q, %v", got, err)
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("%d requests reached the server without the token", n)
	}
}

// TestRemoteSSEForeignEndpoint: a server whose endpoint event names
// another origin gets no message sent there, and so no header or token.
func TestRemoteSSEForeignEndpoint(t *testing.T) {
	var stolen atomic.Int32
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { stolen.Add(1) }))
	defer thief.Close()
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: endpoint\ndata: %s/steal\n\n", thief.URL)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer hostile.Close()
	t.Setenv("MCPBOX_TEST_SSE_TOKEN", "Bearer sse-secret-value")
	l := NewRemote(RemoteOptions{URL: hostile.URL + "/sse", SSE: true, Headers: map[string]string{"Authorization": "env:MCPBOX_TEST_SSE_TOKEN"}})
	_, err := sseCall(t, l)
	if err == nil {
		t.Fatal("a server naming a foreign endpoint was used")
	}
	if n := stolen.Load(); n != 0 {
		t.Errorf("%d requests went to the foreign endpoint", n)
	}
	if !strings.Contains(err.Error(), "did not start") && !strings.Contains(err.Error(), "refusing") {
		t.Logf("error: %v", err)
	}
}

// TestReauthorizer: serve's silent re-authorization runs only for an
// identity that has logged in, and not again within the backoff after a
// failure (each try may register a client at the authorization server).
func TestReauthorizer(t *testing.T) {
	dir := t.TempDir()
	store := &oauth.FileStore{Dir: filepath.Join(dir, "oauth"), Keys: oauth.KeyFile(filepath.Join(dir, "oauth.key"))}
	const server = "https://mcp.example.com/mcp"
	var calls atomic.Int32
	fail := fmt.Errorf("login_required: %w", oauth.ErrInteractionRequired)
	r := &reauthorizer{server: server, store: store, do: func(context.Context, oauth.Store, oauth.Challenge, bool) error {
		calls.Add(1)
		return fail
	}}
	ctx := context.Background()
	if err := r.authorize(ctx, oauth.Challenge{}, false); !errors.Is(err, oauth.ErrNoToken) || calls.Load() != 0 {
		t.Fatalf("never logged in: %v after %d tries, want ErrNoToken and no try", err, calls.Load())
	}
	g := &oauth.Grant{Server: server, Issuer: "https://as.example.com", Resource: server, ClientID: "c", TokenEndpoint: "https://as.example.com/token", AccessToken: "tok-0123456789"}
	if err := store.Save(ctx, g); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := r.authorize(ctx, oauth.Challenge{Scope: "a b"}, true); !errors.Is(err, oauth.ErrInteractionRequired) {
			t.Fatalf("failing re-authorization: %v", err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("re-authorized %d times within the backoff, want 1", n)
	}
	r.failed = time.Now().Add(-ReauthorizeBackoff - time.Second)
	r.authorize(ctx, oauth.Challenge{}, false)
	if n := calls.Load(); n != 2 {
		t.Errorf("after the backoff: %d tries, want 2", n)
	}
	// A login since the failure (a new grant) is tried at once: the
	// backoff held it back for a minute before.
	g.AccessToken = "tok-after-a-new-login"
	if err := store.Save(ctx, g); err != nil {
		t.Fatal(err)
	}
	r.authorize(ctx, oauth.Challenge{}, false)
	if n := calls.Load(); n != 3 {
		t.Errorf("after a new login within the backoff: %d tries, want 3", n)
	}
}

// The store a remote connection's transport gets (bookStore around the
// identity's FileStore) passes on the grant's lock: two connections'
// stores exclude each other, so that only one spends a rotating refresh
// token.
func TestBookStoreLocksGrant(t *testing.T) {
	dir := t.TempDir()
	files := func() *oauth.FileStore {
		return &oauth.FileStore{Dir: filepath.Join(dir, "oauth"), Keys: oauth.KeyFile(filepath.Join(dir, "oauth.key"))}
	}
	var a, b oauth.Store = bookStore{files(), &redact.Book{}}, bookStore{files(), &redact.Book{}}
	la, ok := a.(oauth.Locker)
	if !ok {
		t.Fatal("bookStore is no oauth.Locker")
	}
	const server = "https://mcp.example.com/mcp"
	unlock, err := la.LockGrant(context.Background(), server)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := b.(oauth.Locker).LockGrant(ctx, server); err == nil {
		t.Fatal("a second connection took the grant's lock while the first held it")
	}
	unlock()
	unlock2, err := b.(oauth.Locker).LockGrant(context.Background(), server)
	if err != nil {
		t.Fatalf("after the first let go: %v", err)
	}
	unlock2()
}

// TestRemoteTransportAuto: with Detect, an SSE-only server is spoken to
// over SSE and a Streamable HTTP server over Streamable HTTP, whose probe
// session is deleted.
func TestRemoteTransportAuto(t *testing.T) {
	t.Setenv("MCPBOX_TEST_SSE_TOKEN", "Bearer sse-secret-value")
	hs, refused := sseServer(t, "Bearer sse-secret-value")
	l := NewRemote(RemoteOptions{URL: hs.URL + "/sse", Detect: true, Headers: map[string]string{"Authorization": "env:MCPBOX_TEST_SSE_TOKEN"}})
	if got, err := sseCall(t, l); err != nil || got != "pong over sse" {
		t.Fatalf("auto to an SSE server: %q, %v", got, err)
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("%d requests without the header", n)
	}

	srv := mcp.NewServer(&mcp.Implementation{Name: "modern", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ping"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong over streamable"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var deletes atomic.Int32
	modern := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			deletes.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	defer modern.Close()
	l = NewRemote(RemoteOptions{URL: modern.URL + "/mcp", Detect: true})
	if got, err := sseCall(t, l); err != nil || got != "pong over streamable" {
		t.Fatalf("auto to a Streamable HTTP server: %q, %v", got, err)
	}
	if deletes.Load() == 0 {
		t.Error("the probe's session was not deleted")
	}

	// transport: sse to that Streamable HTTP server fails with the
	// transport to use instead.
	if _, err := sseCall(t, NewRemote(RemoteOptions{URL: modern.URL + "/mcp", SSE: true})); err == nil || !strings.Contains(err.Error(), "takes transport: streamable") {
		t.Errorf("sse to a Streamable HTTP server: %v, want the transport named", err)
	}
	// An unreachable SSE server gets no such hint.
	missing := httptest.NewServer(http.NotFoundHandler())
	defer missing.Close()
	if _, err := sseCall(t, NewRemote(RemoteOptions{URL: missing.URL + "/sse", SSE: true})); err == nil || strings.Contains(err.Error(), "takes transport") {
		t.Errorf("sse to a 404: %v, want an error without the transport hint", err)
	}
}
