package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// modernOnlyServer speaks only 2026-07-28: it refuses initialize (and
// counts the refusals in refused; with refused nil it accepts initialize,
// and the go-sdk answers one round itself for a session-based client,
// passing the next round's input_required result on). Its tool
// "ask" asks for an elicitation (round 1), then for roots (round 2), each
// with a requestState of its own, and answers with what it got; seen
// records every round's state and roots.
func modernOnlyServer(seen *[]string, refused *int, mu *sync.Mutex) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "m", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{ModernVersion}})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "initialize" && refused != nil {
				mu.Lock()
				*refused++
				mu.Unlock()
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "this server speaks only " + ModernVersion + ": use server/discover"}
			}
			return next(ctx, method, req)
		}
	})
	note := func(s string) {
		mu.Lock()
		*seen = append(*seen, s)
		mu.Unlock()
	}
	s.AddTool(&mcp.Tool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		switch req.Params.RequestState {
		case "":
			note("round 1")
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
				"e": &mcp.ElicitParams{Message: "m wants a color", RequestedSchema: json.RawMessage(`{"type":"object","properties":{"color":{"type":"string"}}}`)},
			}, RequestState: "s1"}, nil
		case "s1":
			er, _ := req.Params.InputResponses["e"].(*mcp.ElicitResult)
			if er == nil {
				return text("round 2 without the elicitation answer"), nil
			}
			note("round 2: " + er.Action)
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"r": &mcp.ListRootsParams{}}, RequestState: "s2:" + er.Action + ":" + er.Content["color"].(string)}, nil
		default:
			lr, _ := req.Params.InputResponses["r"].(*mcp.ListRootsResult)
			var uris []string
			if lr != nil {
				for _, r := range lr.Roots {
					uris = append(uris, r.URI)
				}
			}
			note("round 3: " + strings.Join(uris, ","))
			return text(req.Params.RequestState + " roots " + strings.Join(uris, ",")), nil
		}
	})
	s.AddTool(&mcp.Tool{Name: "loop", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		note("loop")
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"r": &mcp.ListRootsParams{}}, RequestState: "again"}, nil
	})
	s.AddTool(&mcp.Tool{Name: "level", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		level, _ := req.Params.Meta[mcp.MetaKeyLogLevel].(string)
		return text("level " + level), nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "whoami"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return text("m"), nil, nil
	})
	return s
}

// TestLegacyClientModernOnlyServer: a 2025 client uses a server that
// refuses initialize. The gateway opens its instance with server/discover
// and translates the server's input_required rounds: the elicitation
// reaches the client as a request and its answer reaches the server; the
// roots round is answered with the sandbox's mounts, never with the
// client's roots; the rounds are bounded. A 2026 client uses the same
// server at the same time.
func TestLegacyClientModernOnlyServer(t *testing.T) {
	var seen []string
	var refused int
	var mu sync.Mutex
	launch := sdkLauncher(func(Scope) *mcp.Server { return modernOnlyServer(&seen, &refused, &mu) }, nil, nil)
	var launches int
	m := &Server{Name: "m", Prefix: "m__", Allow: []string{"*"}, Launch: func(ctx context.Context, s Scope) (*Process, error) {
		mu.Lock()
		launches++
		mu.Unlock()
		p, err := launch(ctx, s)
		if p != nil {
			p.Roots = []Root{{URI: "file:///workspace/input", Name: "input"}}
		}
		return p, err
	}}
	gw := newGateway(t, m)
	url := serveHTTP(t, gw, HTTPOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var asked []string
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params.Message)
			mu.Unlock()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "teal"}}, nil
		},
	})
	client.AddRoots(&mcp.Root{URI: "file:///home/alice/secret-project", Name: "home"})
	// What the client is sent as requests, and how often it sends
	// tools/call: the go-sdk client would answer an input_required result
	// itself (retrying the call), which a 2025 client need not do; the
	// gateway must turn the round into a request to it.
	var received []string
	sentCalls := 0
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			mu.Lock()
			received = append(received, method)
			mu.Unlock()
			return next(ctx, method, req)
		}
	})
	client.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				mu.Lock()
				sentCalls++
				mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("client negotiated %q", v)
	}

	if got := callText(t, cs, &mcp.CallToolParams{Name: "m__whoami"}); got != "m" {
		t.Fatalf("m__whoami = %q", got)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "m__ask", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("m__ask: %+v", res)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "s2:accept:teal roots file:///workspace/input" {
		t.Fatalf("m__ask = %q, want the elicitation answer and the sandbox's roots", got)
	}
	mustBeGateway(t, "2025 m__ask", res.Meta)
	mu.Lock()
	if len(asked) != 1 || asked[0] != "m wants a color" {
		t.Fatalf("the client was asked %q, want the server's elicitation once", asked)
	}
	if strings.Join(received, ",") != "elicitation/create" || sentCalls != 2 {
		t.Fatalf("the client received %q and sent %d tools/call; want one elicitation/create request and two calls (whoami, ask)", received, sentCalls)
	}
	if want := []string{"round 1", "round 2: accept", "round 3: file:///workspace/input"}; strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Fatalf("the server saw %q, want %q", seen, want)
	}
	seen = nil
	mu.Unlock()

	// A server that never stops asking: bounded.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "m__loop", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "still asked for input after 8 rounds") {
		t.Fatalf("m__loop: error %v, want the round limit", err)
	}
	mu.Lock()
	if n := len(seen); n != inputRounds+1 {
		t.Fatalf("m__loop ran %d rounds, want %d", n, inputRounds+1)
	}
	mu.Unlock()

	// The level the client set goes with each request.
	if got := callText(t, cs, &mcp.CallToolParams{Name: "m__level", Arguments: map[string]any{}}); got != "level " {
		t.Fatalf("m__level before setLevel = %q", got)
	}
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
		t.Fatal(err)
	}
	if got := callText(t, cs, &mcp.CallToolParams{Name: "m__level", Arguments: map[string]any{}}); got != "level warning" {
		t.Fatalf("m__level = %q, want level warning", got)
	}

	// A 2026 client at the same time, on an instance of its own.
	cs2 := connectVersion(t, url, "", ModernVersion, nil)
	res2, err := cs2.CallTool(ctx, &mcp.CallToolParams{Name: "m__whoami"})
	if err != nil || res2.Content[0].(*mcp.TextContent).Text != "m" {
		t.Fatalf("2026 m__whoami = %+v, %v", res2, err)
	}
	mustBeGateway(t, "2026 m__whoami", res2.Meta)

	gw.mu.Lock()
	u := gw.pool[poolKey{"m", Scope{Agent: LocalAgent}}]
	gw.mu.Unlock()
	if u == nil {
		t.Fatal("no legacy instance")
	}
	if got := u.info().Protocol; got != ModernVersion || !u.modernOnly.Load() {
		t.Fatalf("legacy instance speaks %q (modernOnly %v), want %s", got, u.modernOnly.Load(), ModernVersion)
	}
	mu.Lock()
	defer mu.Unlock()
	if refused != 1 {
		t.Fatalf("initialize refused %d times, want 1 (the server is remembered as 2026-only)", refused)
	}
	if launches != 2 {
		t.Fatalf("%d launches, want 2 (one per era; the refused initialize reuses its process)", launches)
	}
}

// TestLegacyClientInputRequiredFromInitializedServer: a server initialized
// in the session-based revision that still returns an input_required
// result (the go-sdk fulfils only the first round for such a client, and
// passes the second on): the gateway answers the round for the 2025
// client as for a 2026-only server, so the client's roots never reach the
// server, even from a client that would answer roots itself.
func TestLegacyClientInputRequiredFromInitializedServer(t *testing.T) {
	var seen []string
	var mu sync.Mutex
	launch := sdkLauncher(func(Scope) *mcp.Server { return modernOnlyServer(&seen, nil, &mu) }, nil, nil)
	m := &Server{Name: "m", Prefix: "m__", Allow: []string{"*"}, Launch: func(ctx context.Context, s Scope) (*Process, error) {
		p, err := launch(ctx, s)
		if p != nil {
			p.Roots = []Root{{URI: "file:///workspace/input", Name: "input"}}
		}
		return p, err
	}}
	gw := newGateway(t, m)
	url := serveHTTP(t, gw, HTTPOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "red"}}, nil
		},
	})
	client.AddRoots(&mcp.Root{URI: "file:///home/alice/secret-project", Name: "home"})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "m__ask", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "s2:accept:red roots file:///workspace/input" {
		t.Fatalf("m__ask = %q, want the sandbox's roots", got)
	}
	gw.mu.Lock()
	u := gw.pool[poolKey{"m", Scope{Agent: LocalAgent}}]
	gw.mu.Unlock()
	if got := u.info().Protocol; got != "2025-11-25" {
		t.Fatalf("instance speaks %q, want the session-based revision", got)
	}
}

// TestLegacyClientOrdinaryServerNoDiscover: an ordinary session-based
// server costs a 2025 client no extra round trip: its instance is
// initialized and never asked server/discover.
func TestLegacyClientOrdinaryServerNoDiscover(t *testing.T) {
	launch, started := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/list" {
			s.reply(msg, `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
		}
	})
	gw := newGateway(t, &Server{Name: "o", Prefix: "o__", Allow: []string{"*"}, Launch: launch})
	url := serveHTTP(t, gw, HTTPOptions{})
	cs := connect(t, url, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	srvs := started()
	if len(srvs) != 1 {
		t.Fatalf("%d processes, want 1", len(srvs))
	}
	if n, d := len(srvs[0].received("initialize")), len(srvs[0].received("server/discover")); n != 1 || d != 0 {
		t.Fatalf("initialize %d, server/discover %d; want 1 and 0", n, d)
	}
}

// TestLegacyClientServerRefusesBoth: a server that refuses initialize and
// server/discover is asked each once, on one process, and fails to start.
func TestLegacyClientServerRefusesBoth(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]int{}
	launches := 0
	launch := sdkLauncher(func(Scope) *mcp.Server {
		mu.Lock()
		launches++
		mu.Unlock()
		s := mcp.NewServer(&mcp.Implementation{Name: "x", Version: "1"}, nil)
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				mu.Lock()
				asked[method]++
				mu.Unlock()
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "no"}
			}
		})
		return s
	}, nil, nil)
	gw := newGateway(t, &Server{Name: "x", Prefix: "x__", Allow: []string{"*"}, Launch: launch})
	url := serveHTTP(t, gw, HTTPOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err == nil || !strings.Contains(err.Error(), "no server could start") {
		t.Fatalf("connect: %v, want no server could start", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if launches != 1 || asked["initialize"] != 1 || asked["server/discover"] != 1 {
		t.Fatalf("launches %d, asked %v; want one launch, initialize and server/discover once each", launches, asked)
	}
}

// mustBeGateway fails unless a result's _meta names the gateway as the
// server that answered (never the upstream server, m).
func mustBeGateway(t *testing.T, what string, meta mcp.Meta) {
	t.Helper()
	b, _ := json.Marshal(meta[mcp.MetaKeyServerInfo])
	if string(b) != `{"name":"mcpbox","version":"test"}` {
		t.Fatalf("%s: serverInfo in _meta %s, want the gateway's", what, b)
	}
}

// TestMayRequireInput: whenever the parse would find an input_required
// result, the byte check lets it be parsed, escaped forms included.
func TestMayRequireInput(t *testing.T) {
	for _, raw := range []string{
		`{"resultType":"input_required","inputRequests":{}}`,
		`{"RESULTTYPE":"input_required"}`,
		`{"resultType":"input\u005frequired"}`,
		`{"resultType":"\u0069nput_required"}`,
		`{"result\u0054ype":"input_required"}`,
		`{"content":[],"resultType":"complete"}`,
		`{"content":[{"type":"text","text":"a\nb \"q\" \/ \\ \t"}]}`,
		`{"resultType":"input_requirEd"}`,
		`{"resultType":"input_require\u0064"}`,
		`{"resultType":"input_required\u0000"}`,
	} {
		var res inputRequiredResult
		parsed := json.Unmarshal([]byte(raw), &res) == nil && res.ResultType == "input_required"
		if parsed && !mayRequireInput([]byte(raw)) {
			t.Errorf("%s: input_required, but the byte check skips it", raw)
		}
	}
	if mayRequireInput([]byte(`{"content":[{"type":"text","text":"a\nb \"q\""}],"resultType":"complete"}`)) {
		t.Error("an ordinary result is parsed")
	}
}

// FuzzMayRequireInput: no result that parses as input_required is
// skipped by the byte check.
func FuzzMayRequireInput(f *testing.F) {
	f.Add([]byte(`{"resultType":"input\u005frequired"}`))
	f.Add([]byte(`{"resultType":"input_required"}`))
	f.Add([]byte(`{"x":"\ud800","resultType":"inpu\u0074_required"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var res inputRequiredResult
		if json.Unmarshal(raw, &res) == nil && res.ResultType == "input_required" && !mayRequireInput(raw) {
			t.Fatalf("%q: input_required, but the byte check skips it", raw)
		}
	})
}
