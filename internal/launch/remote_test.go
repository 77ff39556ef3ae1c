package launch

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/gateway"
	"mcpbox/internal/redact"
)

// TestRemoteServer: a remote server is reached from the gateway with its
// header values resolved from secret references, and its tools come
// through the gateway like a sandboxed server's.
func TestRemoteServer(t *testing.T) {
	t.Setenv("MCPBOX_TEST_REMOTE_TOKEN", "Bearer remote-secret-value")
	// A hostile remote echoes the token it was sent.
	hs, _, refused := echoingRemote(t, "remote-secret-value", func(r *http.Request) bool {
		return r.Header.Get("Authorization") == "Bearer remote-secret-value"
	})

	book := &redact.Book{}
	l := NewRemote(RemoteOptions{URL: hs.URL, Headers: map[string]string{"Authorization": "env:MCPBOX_TEST_REMOTE_TOKEN"}, Book: book})
	// The gateway's filter redacts with the book, as the wiring sets it.
	url := serveGateway(t, "remote", l, gateway.Options{Hooks: gateway.Hooks{Filter: func(_ string, raw []byte) []byte { return book.JSON(raw) }}})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if got := callPing(t, ctx, &mcp.StreamableClientTransport{Endpoint: url}); got != "pong [REDACTED:Authorization]" {
		t.Fatalf("got %q", got)
	}
	if n := refused.Load(); n != 0 {
		t.Fatalf("%d requests reached the remote server without the header", n)
	}
}

// echoingRemote serves an MCP server whose tool ping answers "pong
// ECHO" (a hostile remote echoing what it was sent) to requests admit
// lets through, 401 to others; it counts both.
func echoingRemote(t *testing.T, echo string, admit func(*http.Request) bool) (hs *httptest.Server, seen, refused *atomic.Int32) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "remote", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ping"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong " + echo}}}, nil, nil
	})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	seen, refused = new(atomic.Int32), new(atomic.Int32)
	hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		if !admit(r) {
			refused.Add(1)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs, seen, refused
}

// callPing connects a client over tr, calls the tool ping and returns
// its text.
func callPing(t *testing.T, ctx context.Context, tr mcp.Transport) string {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping"})
	if err != nil {
		t.Fatal(err)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// serveGateway serves a gateway of one server, name over l, over HTTP
// for the test, with opts, and returns its endpoint's URL.
func serveGateway(t *testing.T, name string, l Backend, opts gateway.Options) string {
	t.Helper()
	_, url := serveGatewayOf(t, name, l, opts)
	return url
}

// serveGatewayOf is serveGateway that returns the gateway too.
func serveGatewayOf(t *testing.T, name string, l Backend, opts gateway.Options) (*gateway.Gateway, string) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	gw, err := gateway.New([]*gateway.Server{{Name: name, Launch: On(l), Allow: []string{"*"}}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(nil)
	h, err := gw.Handler(gateway.HTTPOptions{Addr: hs.Listener.Addr().String()})
	if err != nil {
		gw.Close()
		t.Fatal(err)
	}
	hs.Config.Handler = h
	hs.Start()
	t.Cleanup(func() {
		hs.Close()
		gw.Close()
	})
	return gw, hs.URL + gateway.EndpointPath
}

// TestHeaderTransportVersion: once the gateway's initialize has agreed on
// a version, requests that name none carry it; a request that names one
// keeps its own; before the initialize none is added.
func TestHeaderTransportVersion(t *testing.T) {
	got := make(chan string, 3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Mcp-Protocol-Version")
	}))
	defer srv.Close()
	version := new(atomic.Value)
	c := &http.Client{Transport: headerTransport{h: http.Header{"X-A": {"1"}}, version: version, next: http.DefaultTransport}}
	send := func(header string) string {
		req, _ := http.NewRequest("POST", srv.URL, nil)
		if header != "" {
			req.Header.Set("Mcp-Protocol-Version", header)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return <-got
	}
	if v := send(""); v != "" {
		t.Errorf("before the initialize: %q", v)
	}
	(&remoteInstance{version: version}).Process().Negotiated("2025-11-25")
	if v := send(""); v != "2025-11-25" {
		t.Errorf("after it: %q, want the negotiated version", v)
	}
	if v := send("2026-07-28"); v != "2026-07-28" {
		t.Errorf("a request's own version replaced: %q", v)
	}
}

// TestRemoteQuery: a remote server's query parameters (servers.*.query)
// are resolved from secret references and set on every request, beside
// the url's own parameters; a server echoing the value has it redacted,
// and a connection error does not quote the URL with it.
func TestRemoteQuery(t *testing.T) {
	const key = "sk-query-secret-0123456789"
	t.Setenv("MCPBOX_TEST_REMOTE_KEY", key)
	hs, seen, refused := echoingRemote(t, key, func(r *http.Request) bool {
		q := r.URL.Query()
		return q.Get("api_key") == key && q.Get("profile") == "p 1"
	})

	book := &redact.Book{}
	l := NewRemote(RemoteOptions{URL: hs.URL + "/mcp?profile=p+1", Query: map[string]string{"api_key": "env:MCPBOX_TEST_REMOTE_KEY"}, Book: book})
	opts := gateway.Options{Logger: slog.New(slog.DiscardHandler), Hooks: gateway.Hooks{Filter: func(_ string, raw []byte) []byte { return book.JSON(raw) }}}
	gw, err := gateway.New([]*gateway.Server{{Name: "remote", Launch: On(l), Allow: []string{"*"}}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- gw.ServeStdio(ctx, gateway.LocalAgent, inR, outW) }()
	defer func() { inW.Close(); cancel(); <-served }()
	if got := callPing(t, ctx, &mcp.IOTransport{Reader: outR, Writer: inW}); got != "pong [REDACTED:api_key]" {
		t.Errorf("the echoed key: got %q", got)
	}
	if seen.Load() == 0 || refused.Load() != 0 {
		t.Errorf("%d requests, %d without the query parameters", seen.Load(), refused.Load())
	}

	// A wrong key: the error names the reference to check, not a value.
	t.Setenv("MCPBOX_TEST_WRONG_KEY", "sk-wrong-key-0123456789")
	in, err := NewRemote(RemoteOptions{URL: hs.URL + "/mcp?profile=p+1", Query: map[string]string{"api_key": "env:MCPBOX_TEST_WRONG_KEY"}}).connect(ctx, gateway.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := jsonrpc.MakeID(float64(1))
	err = in.conn.Write(ctx, &jsonrpc.Request{ID: id, Method: "initialize", Params: []byte(`{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)})
	in.Stop()
	if err == nil || !strings.Contains(err.Error(), "check query parameter api_key from env:MCPBOX_TEST_WRONG_KEY") || strings.Contains(err.Error(), "sk-wrong") {
		t.Errorf("initialize with a wrong key: %v; want the reference to check", err)
	}

	// A server that is not there (the transport probe, auto, is the
	// first request): the error names the URL, not the key.
	hs.Close()
	_, err = NewRemote(RemoteOptions{URL: hs.URL + "/mcp", Detect: true, Query: map[string]string{"api_key": "env:MCPBOX_TEST_REMOTE_KEY"}}).connect(ctx, gateway.Scope{})
	if err == nil || strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), hs.URL+"/mcp") {
		t.Errorf("connecting to a closed server: %v; want an error that quotes the url without the key", err)
	}
}

// TestRemoteQueryEncodedKey: a query value that is base64 of JSON holding
// a key (Smithery's config=) teaches the book the key inside too, so a
// server that echoes its decoded config has the key redacted.
func TestRemoteQueryEncodedKey(t *testing.T) {
	const key = "sk-live-abcdef0123456789"
	t.Setenv("MCPBOX_TEST_CONFIG", base64.StdEncoding.EncodeToString([]byte(`{"apiKey":"`+key+`","profile":"work"}`)))
	book := &redact.Book{}
	l := NewRemote(RemoteOptions{URL: "https://h.example/mcp", Query: map[string]string{"config": "env:MCPBOX_TEST_CONFIG"}, Book: book})
	if _, _, err := l.credentials(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := book.String(`error: bad config {"apiKey":"` + key + `"} for profile work`)
	if strings.Contains(got, key) || !strings.Contains(got, "[REDACTED:config]") || !strings.Contains(got, "profile work") {
		t.Errorf("the echoed config: %q; want the key redacted, the rest kept", got)
	}
}

// TestRemoteParamHeaders: a tools/call to a remote server spoken to in
// the 2026 revision carries the Mcp-Param-* headers its tool definition
// asks for (x-mcp-header), encoded as SEP-2243 writes them; a server
// that checks them (the go-sdk's) ran no such call before.
func TestRemoteParamHeaders(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "remote", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "route", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer"}}}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "routed"}}}, nil
		})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	var seen atomic.Value
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/call" {
			seen.Store(r.Header.Get("Mcp-Param-Region") + "|" + r.Header.Get("Mcp-Protocol-Version"))
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)

	url := serveGateway(t, "remote", NewRemote(RemoteOptions{URL: hs.URL, Book: &redact.Book{}}), gateway.Options{})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// The client sends its own headers for the tools it listed.
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, region := range []string{"eu", " zürich"} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "route", Arguments: map[string]any{"region": region, "n": 1}})
		if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "routed" {
			t.Fatalf("region %q: %v %+v", region, err, res)
		}
		want := region
		if region != "eu" {
			want = "=?base64?" + base64.StdEncoding.EncodeToString([]byte(region)) + "?="
		}
		if got, _ := seen.Load().(string); got != want+"|"+gateway.ModernVersion {
			t.Errorf("region %q: the remote saw Mcp-Param-Region|version %q, want %q", region, got, want+"|"+gateway.ModernVersion)
		}
	}
}

// TestRemoteMcpboxInputRequired: a 2026 client of a gateway whose remote
// server is another mcpbox gets the remote's input_required rounds
// through, and the retry with the remote's requestState reaches it. The
// state bears mcpbox's prefix but the other gateway's signature: it was
// refused as "not issued by this gateway" before.
func TestRemoteMcpboxInputRequired(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		// Bounded: a question nobody answers (the test failing) must not
		// hold the server, and its test's cleanup, for ever.
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "color?", RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"color": {Type: "string"}}}})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint("answered ", res.Content["color"])}}}, nil, nil
	})
	asker := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(func() {
		asker.CloseClientConnections()
		asker.Close()
	})
	back := serveGateway(t, "asker", NewRemote(RemoteOptions{URL: asker.URL, Book: &redact.Book{}}), gateway.Options{})
	front := serveGateway(t, "back", NewRemote(RemoteOptions{URL: back, Book: &redact.Book{}}), gateway.Options{})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "red"}}, nil
		}})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: front}, &mcp.ClientSessionOptions{ProtocolVersion: gateway.ModernVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask"})
	if err != nil || res.IsError || len(res.Content) == 0 || res.Content[0].(*mcp.TextContent).Text != "answered red" {
		t.Fatalf("ask through two gateways: %v %+v", err, res)
	}
}

// failingConn is a connection whose every write fails.
type failingConn struct{ mcp.Connection }

func (failingConn) Write(context.Context, jsonrpc.Message) error {
	return errors.New("Bad Request: rejected by transport")
}

// TestHintNotForDiscover: a 400 to the 2026 probe (server/discover), as
// every 2025 Streamable HTTP server answers it, gets no hint that the
// server may speak the old HTTP+SSE transport; a 400 to initialize does.
func TestHintNotForDiscover(t *testing.T) {
	post := &firstStatus{}
	post.status.Store(http.StatusBadRequest)
	c := hintConn{failingConn{}, post, true, func(int32) string { return "" }}
	discover, _ := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0","id":1,"method":"server/discover"}`))
	initialize, _ := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0","id":2,"method":"initialize"}`))
	if err := c.Write(context.Background(), discover); strings.Contains(err.Error(), "transport: sse") {
		t.Errorf("the probe's 400: %v", err)
	}
	if err := c.Write(context.Background(), initialize); !strings.Contains(err.Error(), "transport: sse") {
		t.Errorf("initialize's 400: %v, want the hint", err)
	}
}
