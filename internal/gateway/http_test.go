package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type textArgs struct {
	Text string `json:"text"`
}

// testServer is a go-sdk server named name with tools that exercise
// every routed feature.
func testServer(name string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "whoami"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		return text(name), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
		return text(name + ":" + a.Text), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "progress"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		for i := range 3 {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i + 1), Total: 3})
		}
		return text("done"), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "sample"}, func(ctx context.Context, req *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: name + " asks " + a.Text}}},
			MaxTokens: 10,
		})
		if err != nil {
			return nil, nil, err
		}
		return text("model said " + res.Content.(*mcp.TextContent).Text), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "elicit"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: name + " wants a color", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"color": map[string]any{"type": "string"}}}})
		if err != nil {
			return nil, nil, err
		}
		return text(res.Action + ":" + fmt.Sprint(res.Content["color"])), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "grow"}, func(ctx context.Context, req *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
		mcp.AddTool(s, &mcp.Tool{Name: a.Text}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return text("new"), nil, nil
		})
		return text("grown"), nil, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello from " + name}}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "test://" + name + "/r", Name: "r"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "resource of " + name}}}, nil
	})
	return s
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func callText(t *testing.T, cs *mcp.ClientSession, params *mcp.CallToolParams) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "")
}

// serveHTTP serves gw on a loopback test server.
func serveHTTP(t *testing.T, gw *Gateway, o HTTPOptions) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	o.Addr = srv.Listener.Addr().String()
	h, err := gw.Handler(o)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(func() {
		gw.Close()
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL + EndpointPath
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// connect connects a legacy (2025-11-25) client, the era these tests are
// about; connectVersion picks the revision.
func connect(t *testing.T, url, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectVersion(t, url, token, "2025-11-25", opts)
}

func connectVersion(t *testing.T, url, token, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: http.DefaultTransport}
	if token != "" {
		hc.Transport = bearer{token, http.DefaultTransport}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestAggregationOverHTTP(t *testing.T) {
	a := &Server{Name: "a", Prefix: "a__", Launch: sdkLauncher(func(Scope) *mcp.Server { return testServer("a") }, nil, nil), Allow: []string{"*"}}
	b := &Server{Name: "b", Prefix: "b__", Launch: sdkLauncher(func(Scope) *mcp.Server { return testServer("b") }, nil, nil), Allow: []string{"*"}, Deny: []string{"grow"}}
	gw := newGateway(t, a, b)
	url := serveHTTP(t, gw, HTTPOptions{})

	listChanged := make(chan struct{}, 4)
	var progMu sync.Mutex
	var progress []float64
	cs := connect(t, url, "", &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "re: " + req.Params.Messages[0].Content.(*mcp.TextContent).Text}}, nil
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": strings.Fields(req.Params.Message)[0] + "-blue"}}, nil
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { listChanged <- struct{}{} },
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progMu.Lock()
			progress = append(progress, req.Params.Progress)
			progMu.Unlock()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	tools := toolNames(t, cs)
	for _, want := range []string{"a__whoami", "b__whoami", "a__grow"} {
		if !slices.Contains(tools, want) {
			t.Fatalf("tools %v lack %s", tools, want)
		}
	}
	if slices.Contains(tools, "b__grow") {
		t.Fatalf("denied tool b__grow listed: %v", tools)
	}
	for _, name := range []string{"a", "b"} {
		got := callText(t, cs, &mcp.CallToolParams{Name: name + "__whoami"})
		if got != name {
			t.Fatalf("%s__whoami = %q", name, got)
		}
		got = callText(t, cs, &mcp.CallToolParams{Name: name + "__sample", Arguments: map[string]any{"text": "why"}})
		if want := "model said re: " + name + " asks why"; got != want {
			t.Fatalf("sampling via %s: %q, want %q", name, got, want)
		}
		got = callText(t, cs, &mcp.CallToolParams{Name: name + "__elicit"})
		if want := "accept:" + name + "-blue"; got != want {
			t.Fatalf("elicitation via %s: %q, want %q", name, got, want)
		}
		pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name + "__greet"})
		if err != nil || pr.Messages[0].Content.(*mcp.TextContent).Text != "hello from "+name {
			t.Fatalf("prompt of %s: %v %v", name, pr, err)
		}
		rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://" + name + "/r"})
		if err != nil || rr.Contents[0].Text != "resource of "+name {
			t.Fatalf("resource of %s: %v %v", name, rr, err)
		}
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "b__grow", Arguments: map[string]any{"text": "x"}}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("denied tool call: %v", err)
	}

	progressToken := "tok-1"
	params := &mcp.CallToolParams{Name: "a__progress"}
	params.SetProgressToken(progressToken)
	if got := callText(t, cs, params); got != "done" {
		t.Fatalf("progress tool: %q", got)
	}
	// The client SDK hands notifications to the handler on its own
	// goroutine, so they may land just after the call returns.
	var gotProgress []float64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		progMu.Lock()
		gotProgress = slices.Clone(progress)
		progMu.Unlock()
		if len(gotProgress) >= 3 {
			break
		}
	}
	if !slices.Equal(gotProgress, []float64{1, 2, 3}) {
		t.Fatalf("progress notifications %v, want 1 2 3", gotProgress)
	}

	callText(t, cs, &mcp.CallToolParams{Name: "a__grow", Arguments: map[string]any{"text": "fresh"}})
	select {
	case <-listChanged:
	case <-ctx.Done():
		t.Fatal("no tools/list_changed")
	}
	if tools := toolNames(t, cs); !slices.Contains(tools, "a__fresh") {
		t.Fatalf("new tool missing after list_changed: %v", tools)
	}
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// TestClientsAreIsolated: each token is its own agent with its own
// server instance; no token, a wrong token, a bad Host or Origin, or
// another client's session id get nothing.
func TestClientsAreIsolated(t *testing.T) {
	var mu sync.Mutex
	var scopes []Scope
	srv := &Server{Name: "s", Launch: sdkLauncher(func(sc Scope) *mcp.Server { return testServer("for-" + sc.Agent) }, &scopes, &mu), Allow: []string{"*"}}
	gw := newGateway(t, srv)
	url := serveHTTP(t, gw, HTTPOptions{
		Clients:        []Client{{Name: "alice", Token: []byte("alice-token-0123456789")}, {Name: "bob", Token: []byte("bob-token-0123456789ab")}},
		AllowedOrigins: []string{"http://localhost:*"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice := connect(t, url, "alice-token-0123456789", nil)
	bob := connect(t, url, "bob-token-0123456789ab", nil)
	if got := callText(t, alice, &mcp.CallToolParams{Name: "whoami"}); got != "for-alice" {
		t.Fatalf("alice reached %q", got)
	}
	if got := callText(t, bob, &mcp.CallToolParams{Name: "whoami"}); got != "for-bob" {
		t.Fatalf("bob reached %q", got)
	}
	mu.Lock()
	if len(scopes) != 2 || scopes[0].Agent == scopes[1].Agent {
		t.Fatalf("scopes %v, want one per agent", scopes)
	}
	mu.Unlock()

	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	tests := []struct {
		name      string
		headers   map[string]string
		want      int
		challenge string // the 401's WWW-Authenticate (RFC 6750 §3)
	}{
		{"no token", nil, http.StatusUnauthorized, "Bearer"},
		{"wrong token", map[string]string{"Authorization": "Bearer alice-token-0123456780"}, http.StatusUnauthorized, `Bearer error="invalid_token"`},
		{"bad host", map[string]string{"Authorization": "Bearer alice-token-0123456789", "Host": "evil.example"}, http.StatusForbidden, ""},
		{"bad origin", map[string]string{"Authorization": "Bearer alice-token-0123456789", "Origin": "http://evil.example"}, http.StatusForbidden, ""},
		{"good origin", map[string]string{"Authorization": "Bearer alice-token-0123456789", "Origin": "http://localhost:3000"}, http.StatusOK, ""},
		{"same origin", map[string]string{"Authorization": "Bearer alice-token-0123456789", "Origin": strings.TrimSuffix(url, EndpointPath)}, http.StatusOK, ""},
		{"same host other port", map[string]string{"Authorization": "Bearer alice-token-0123456789", "Origin": "http://127.0.0.1:1"}, http.StatusForbidden, ""},
		{"bob with alice's session", map[string]string{"Authorization": "Bearer bob-token-0123456789ab", "Mcp-Session-Id": alice.ID()}, http.StatusForbidden, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := init
			if tt.headers["Mcp-Session-Id"] != "" {
				body = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
			}
			req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range tt.headers {
				if k == "Host" {
					req.Host = v
				} else {
					req.Header.Set(k, v)
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode != tt.want && !(tt.want == http.StatusForbidden && resp.StatusCode == http.StatusNotFound) {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.want, b)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != tt.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tt.challenge)
			}
		})
	}
}

func TestHostAndOriginRules(t *testing.T) {
	hosts := []struct {
		bind, host string
		ok         bool
	}{
		{"127.0.0.1", "127.0.0.1:8765", true},
		{"127.0.0.1", "localhost:8765", true},
		{"127.0.0.1", "[::1]:8765", true},
		{"127.0.0.1", "evil.example:8765", false},
		{"127.0.0.1", "127.0.0.1.nip.io", false},
		{"10.0.0.5", "10.0.0.5:443", true},
		{"10.0.0.5", "evil.example", false},
		{"0.0.0.0", "gateway.corp", true},
	}
	for _, h := range hosts {
		if got := hostAllowed(h.bind, h.host); got != h.ok {
			t.Errorf("hostAllowed(%q, %q) = %v", h.bind, h.host, got)
		}
	}
	var allowed []origin
	for _, p := range []string{"http://localhost:*", "https://app.example.com"} {
		o, err := parseOrigin(p)
		if err != nil {
			t.Fatal(err)
		}
		allowed = append(allowed, o)
	}
	origins := []struct {
		origin string
		ok     bool
	}{
		{"http://localhost:6274", true},
		{"http://LOCALHOST:1", true},
		{"https://app.example.com", true},
		{"https://app.example.com:8443", false},
		{"http://app.example.com", false},
		{"https://evil.example", false},
		{"null", false},
	}
	for _, o := range origins {
		if got := originAllowed(allowed, o.origin); got != o.ok {
			t.Errorf("originAllowed(%q) = %v", o.origin, got)
		}
	}
	if _, err := parseOrigin("localhost:3000"); err == nil {
		t.Error("origin without scheme accepted")
	}
}

// TestRefusalDoesNotWaitForBody: a request refused before it is let in
// (no token, a foreign Host, a path nothing serves) is answered at once
// and its connection closed, however slowly its body comes: net/http
// would otherwise read the rest of the body before it answered and again
// before it closed, and a client could hold a connection open without a
// token for as long as it liked. A request to a handler that needs no
// token (Extra: /healthz, the dashboard) that leaves its body unread is
// answered and closed once its body's time (bodyReadTimeout) is up.
// An accepted request, and one to an Extra handler without a body, keeps
// its connection alive.
func TestRefusalDoesNotWaitForBody(t *testing.T) {
	launch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {})
	extra := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	_, c := newHTTPGateway(t, &Server{Name: "s", Launch: launch, Allow: []string{"*"}}, Options{},
		HTTPOptions{Extra: map[string]http.Handler{"/healthz": extra}})
	u, err := url.Parse(c.url)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, host, auth string
		status                 int // 0: a refusal
	}{
		{"no token", EndpointPath, u.Host, "", 0},
		{"wrong token", EndpointPath, u.Host, "Authorization: Bearer not-the-token-0123456789\r\n", 0},
		{"foreign host", EndpointPath, "evil.example", "Authorization: Bearer " + testToken + "\r\n", 0},
		{"no such path", "/nothing", u.Host, "", 0},
		{"extra handler", "/healthz", u.Host, "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// 5 of the 1000 bytes announced, and no more.
			req := "POST " + tc.path + " HTTP/1.1\r\nHost: " + tc.host + "\r\n" + tc.auth +
				"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"jso"
			if _, err := conn.Write([]byte(req)); err != nil {
				t.Fatal(err)
			}
			wait := 5 * time.Second // a refusal closes at once
			if tc.status != 0 {
				wait += bodyReadTimeout
			}
			conn.SetReadDeadline(time.Now().Add(wait))
			got, err := io.ReadAll(conn) // to the close
			if err != nil {
				t.Fatalf("the connection is still open after %s: %v (read %q)", wait, err, got)
			}
			resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(got)), nil)
			if err != nil {
				t.Fatalf("no answer: %v (read %q)", err, got)
			}
			if tc.status == 0 && (resp.StatusCode < 400 || resp.StatusCode >= 500) || tc.status != 0 && resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d (0: a refusal)", resp.StatusCode, tc.status)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, _, err := c.do(ctx, http.MethodPost, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
		"params": map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Close || resp.Header.Get("Connection") == "close" {
		t.Errorf("an accepted request's answer closes the connection (status %d)", resp.StatusCode)
	}
	hresp, err := http.Get(strings.TrimSuffix(c.url, EndpointPath) + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	hresp.Body.Close()
	if hresp.Close {
		t.Error("an Extra handler's answer closes the connection")
	}
}
