package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// metaServer is a server whose tool "meta" reports the _meta it was
// called with, and whose tool "route" marks its "region" argument for an
// Mcp-Param-Region header (SEP-2243).
func metaServer(name string) *mcp.Server {
	s := testServer(name)
	s.AddTool(&mcp.Tool{Name: "meta", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b, _ := json.Marshal(req.Params.Meta)
		return text(string(b)), nil
	})
	s.AddTool(&mcp.Tool{Name: "block", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		blocked.Add(1)
		defer blocked.Add(-1)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Second):
			return text("not cancelled"), nil
		}
	})
	s.AddTool(&mcp.Tool{Name: "route", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("routed"), nil })
	return s
}

// blocked counts metaServer's "block" calls running.
var blocked atomic.Int64

// modernGateway serves servers a and b over HTTP.
func modernGateway(t *testing.T, o HTTPOptions) (*Gateway, string) {
	t.Helper()
	a := &Server{Name: "a", Prefix: "a__", Launch: sdkLauncher(func(Scope) *mcp.Server { return metaServer("a") }, nil, nil), Allow: []string{"*"}}
	b := &Server{Name: "b", Prefix: "b__", Launch: sdkLauncher(func(Scope) *mcp.Server { return testServer("b") }, nil, nil), Allow: []string{"*"}, Deny: []string{"grow"}}
	gw := newGateway(t, a, b)
	return gw, serveHTTP(t, gw, o)
}

// TestModernClientOverHTTP: a 2026-07-28 client (no initialize, no
// session) lists and calls across the servers; a legacy client is served
// by the same gateway at the same time.
func TestModernClientOverHTTP(t *testing.T) {
	_, url := modernGateway(t, HTTPOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	modern := connectVersion(t, url, "", ModernVersion, nil)
	if got := modern.InitializeResult().ProtocolVersion; got != ModernVersion {
		t.Fatalf("negotiated %q, want %s", got, ModernVersion)
	}
	if id := modern.ID(); id != "" {
		t.Fatalf("2026 client got a protocol session %q", id)
	}
	legacy := connect(t, url, "", nil)
	if legacy.ID() == "" {
		t.Fatal("legacy client got no Mcp-Session-Id")
	}

	lt, err := modern.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"a__meta", "a__whoami", "b__whoami"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools %v lack %s", names, want)
		}
	}
	if slices.Contains(names, "b__grow") {
		t.Fatalf("tools %v include the denied b__grow", names)
	}
	if lt.CacheScope != "private" || lt.TTLMs != 0 {
		t.Fatalf("tools/list ttlMs=%d cacheScope=%q, want 0 and private (the list is filtered per client)", lt.TTLMs, lt.CacheScope)
	}
	// Deterministic: the same list, in the same order, every time.
	lt2, err := modern.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names2 []string
	for _, tool := range lt2.Tools {
		names2 = append(names2, tool.Name)
	}
	if !slices.Equal(names, names2) {
		t.Fatalf("tools/list order changed: %v then %v", names, names2)
	}

	for _, cs := range []*mcp.ClientSession{modern, legacy} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "b__whoami"})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; got != "b" {
			t.Fatalf("b__whoami = %q, want b", got)
		}
	}
	if _, err := modern.CallTool(ctx, &mcp.CallToolParams{Name: "b__grow", Arguments: map[string]any{"text": "x"}}); err == nil {
		t.Fatal("the denied b__grow ran for a 2026 client")
	}
	rr, err := modern.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://a/r"})
	if err != nil {
		t.Fatal(err)
	}
	if rr.CacheScope != "private" {
		t.Fatalf("resources/read cacheScope %q, want private", rr.CacheScope)
	}
}

// TestModernTraceAndMetaUpstream: a 2026 request's trace context reaches
// the server; its client capabilities do so with roots as the gateway
// declares them (it answers them itself), not as the client did.
func TestModernTraceAndMetaUpstream(t *testing.T) {
	_, url := modernGateway(t, HTTPOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := connectVersion(t, url, "", ModernVersion, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true}}})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__meta", Meta: mcp.Meta{"traceparent": tp}})
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &meta); err != nil {
		t.Fatal(err)
	}
	if meta["traceparent"] != tp {
		t.Fatalf("server saw traceparent %v, want %s (meta %v)", meta["traceparent"], tp, meta)
	}
	if meta[mcp.MetaKeyProtocolVersion] != ModernVersion {
		t.Fatalf("server saw protocol version %v, want %s", meta[mcp.MetaKeyProtocolVersion], ModernVersion)
	}
	caps, _ := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	if caps == nil {
		t.Fatalf("server saw no client capabilities: %v", meta)
	}
	if roots, ok := caps["roots"].(map[string]any); !ok || len(roots) != 1 || roots["listChanged"] != false {
		t.Fatalf("server saw roots %v, want the gateway's {listChanged: false} (caps %v)", caps["roots"], caps)
	}
}

// post sends one JSON-RPC message to url with headers and returns the
// status and body.
func post(t *testing.T, url, body string, headers map[string]string) (int, string) {
	t.Helper()
	status, _, b := postFull(t, url, body, headers)
	return status, b
}

// postFull is post, with the response's headers.
func postFull(t *testing.T, url, body string, headers map[string]string) (int, http.Header, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, string(b)
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// TestModernDiscover: server/discover answers with what the servers offer
// (tools, prompts, resources from the upstreams), the new revision among
// the versions, and private caching.
func TestModernDiscover(t *testing.T) {
	_, url := modernGateway(t, HTTPOptions{})
	status, body := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+modernMeta+`}}`,
		map[string]string{"MCP-Protocol-Version": ModernVersion, "Mcp-Method": "server/discover"})
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	res := sseResult(t, body)
	var dr struct {
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      map[string]json.RawMessage `json:"capabilities"`
		CacheScope        string                     `json:"cacheScope"`
	}
	if err := json.Unmarshal(res, &dr); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(dr.SupportedVersions, ModernVersion) {
		t.Fatalf("supportedVersions %v lack %s", dr.SupportedVersions, ModernVersion)
	}
	for _, c := range []string{"tools", "prompts", "resources"} {
		if _, ok := dr.Capabilities[c]; !ok {
			t.Fatalf("capabilities %s lack %s", res, c)
		}
	}
	if dr.CacheScope != "private" {
		t.Fatalf("cacheScope %q, want private", dr.CacheScope)
	}
}

// sseResult returns the result of the one JSON-RPC response in an SSE or
// JSON body, failing on an error response.
func sseResult(t *testing.T, body string) json.RawMessage {
	t.Helper()
	data := body
	for line := range strings.Lines(body) {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			data = d
		}
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal([]byte(data), &msg); err != nil || msg.Result == nil {
		t.Fatalf("no result in %q (error %s)", body, msg.Error)
	}
	return msg.Result
}

// TestModernHeaderValidation: Mcp-Method, Mcp-Name and Mcp-Param-*
// headers that do not match the body are refused with 400 and the
// header-mismatch error; matching ones pass.
func TestModernHeaderValidation(t *testing.T) {
	_, url := modernGateway(t, HTTPOptions{})
	// Bind first (the tools are known from then on).
	if status, body := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+modernMeta+`}}`,
		map[string]string{"MCP-Protocol-Version": ModernVersion, "Mcp-Method": "tools/list"}); status != http.StatusOK {
		t.Fatalf("tools/list: %d %s", status, body)
	}
	call := func(name, args string) string {
		return `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `,` + modernMeta + `}}`
	}
	hdr := func(kv ...string) map[string]string {
		m := map[string]string{"MCP-Protocol-Version": ModernVersion}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name    string
		body    string
		headers map[string]string
		ok      bool
	}{
		{"matching", call("a__route", `{"region":"eu"}`), hdr("Mcp-Method", "tools/call", "Mcp-Name", "a__route", "Mcp-Param-Region", "eu"), true},
		{"matching base64", call("a__route", `{"region":"eu"}`), hdr("Mcp-Method", "tools/call", "Mcp-Name", "a__route", "Mcp-Param-Region", "=?base64?ZXU=?="), true},
		{"method mismatch", call("a__whoami", `{}`), hdr("Mcp-Method", "tools/list", "Mcp-Name", "a__whoami"), false},
		{"name mismatch", call("a__whoami", `{}`), hdr("Mcp-Method", "tools/call", "Mcp-Name", "b__whoami"), false},
		{"name missing", call("a__whoami", `{}`), hdr("Mcp-Method", "tools/call"), false},
		{"param mismatch", call("a__route", `{"region":"eu"}`), hdr("Mcp-Method", "tools/call", "Mcp-Name", "a__route", "Mcp-Param-Region", "us"), false},
		{"param missing", call("a__route", `{"region":"eu"}`), hdr("Mcp-Method", "tools/call", "Mcp-Name", "a__route"), false},
		{"param for an absent argument", call("a__route", `{}`), hdr("Mcp-Method", "tools/call", "Mcp-Name", "a__route", "Mcp-Param-Region", "eu"), false},
		{"param bad base64", call("a__route", `{"region":"eu"}`), hdr("Mcp-Method", "tools/call", "Mcp-Name", "a__route", "Mcp-Param-Region", "=?base64?!!!?="), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(t, url, tt.body, tt.headers)
			if tt.ok {
				if status != http.StatusOK {
					t.Fatalf("status %d, want 200: %s", status, body)
				}
				sseResult(t, body)
				return
			}
			if status != http.StatusBadRequest || !strings.Contains(body, "-32020") {
				t.Fatalf("status %d, want 400 with -32020: %s", status, body)
			}
		})
	}
}

// TestModernSessionIsTheCredential: a 2026 client's gateway session is its
// credential's: the same identity across requests shares one binding (one
// session-scoped server instance), another identity gets its own, and
// neither holds a legacy session slot open.
func TestModernSessionIsTheCredential(t *testing.T) {
	var mu sync.Mutex
	var scopes []Scope
	srv := &Server{Name: "s", Prefix: "s__", Launch: sdkLauncher(func(Scope) *mcp.Server { return testServer("s") }, &scopes, &mu), Allow: []string{"*"}, Scope: ScopeSession}
	gw := newGateway(t, srv)
	url := serveHTTP(t, gw, HTTPOptions{Clients: []Client{
		{Name: "alice", Token: []byte("alice-token-0123456789")},
		{Name: "bob", Token: []byte("bob-token-0123456789ab")},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tok := range []string{"alice-token-0123456789", "alice-token-0123456789", "bob-token-0123456789ab"} {
		cs := connectVersion(t, url, tok, ModernVersion, nil)
		for range 2 {
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "s__whoami"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	mu.Lock()
	got := slices.Clone(scopes)
	mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("session-scoped instances started for %v, want one per identity (2)", got)
	}
	agents := map[string]bool{}
	for _, s := range got {
		agents[s.Agent] = true
	}
	if !agents["alice"] || !agents["bob"] {
		t.Fatalf("instances for %v, want alice and bob", got)
	}
	gw.mu.Lock()
	n := len(gw.modern)
	gw.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d gateway sessions for 2026 clients, want 2", n)
	}
}

// TestModernStdio: a 2026 client over stdio: no initialize; the first
// request binds the connection to its servers.
func TestModernStdio(t *testing.T) {
	a := &Server{Name: "a", Prefix: "a__", Launch: sdkLauncher(func(Scope) *mcp.Server { return metaServer("a") }, nil, nil), Allow: []string{"*"}}
	gw := newGateway(t, a)
	cInR, cInW := io.Pipe()
	cOutR, cOutW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- gw.ServeStdio(context.Background(), LocalAgent, cInR, cOutW) }()
	t.Cleanup(func() {
		cInW.Close()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Error("ServeStdio did not return")
		}
		cOutR.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	changed := make(chan struct{}, 4)
	opts := &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, opts).Connect(ctx,
		&mcp.IOTransport{Reader: cOutR, Writer: cInW}, &mcp.ClientSessionOptions{ProtocolVersion: ModernVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ProtocolVersion; got != ModernVersion {
		t.Fatalf("negotiated %q over stdio, want %s", got, ModernVersion)
	}
	if cs.InitializeResult().Capabilities.Tools == nil {
		t.Fatal("server/discover over stdio did not report the servers' tools")
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lt.CacheScope != "private" {
		t.Fatalf("cacheScope %q, want private", lt.CacheScope)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__whoami"})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "a" {
		t.Fatalf("a__whoami = %q", got)
	}
	// List changes arrive on the subscriptions/listen stream.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__grow", Arguments: map[string]any{"text": "fresh"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed over stdio")
	}
}

// legacyOnly is testServer restricted to the session-based revision: it
// answers no server/discover, so the gateway initializes it and
// translates its requests to the client (mrtr.go).
func legacyOnly(name string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}})
	mcp.AddTool(s, &mcp.Tool{Name: "elicit"}, func(ctx context.Context, req *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: name + " wants a color", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"color": map[string]any{"type": "string"}}}})
		if err != nil {
			return nil, nil, err
		}
		return text(res.Action + ":" + fmt.Sprint(res.Content["color"]) + ":" + a.Text), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "whoami"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return text(name), nil, nil
	})
	return s
}

// TestModernUpstreamEras: a server of the new revision is spoken to in it
// for 2026 clients (server/discover, no initialize), a server without it
// is initialized; legacy clients get their own, initialized, instances.
func TestModernUpstreamEras(t *testing.T) {
	n := &Server{Name: "n", Prefix: "n__", Launch: sdkLauncher(func(Scope) *mcp.Server { return testServer("n") }, nil, nil), Allow: []string{"*"}}
	o := &Server{Name: "o", Prefix: "o__", Launch: sdkLauncher(func(Scope) *mcp.Server { return legacyOnly("o") }, nil, nil), Allow: []string{"*"}}
	gw := newGateway(t, n, o)
	url := serveHTTP(t, gw, HTTPOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, cs := range []*mcp.ClientSession{connectVersion(t, url, "", ModernVersion, nil), connect(t, url, "", nil)} {
		for _, tool := range []string{"n__whoami", "o__whoami"} {
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool}); err != nil {
				t.Fatalf("%s: %v", tool, err)
			}
		}
	}
	want := map[poolKey]string{
		{"n", Scope{Agent: LocalAgent, Modern: true}}: ModernVersion,
		{"o", Scope{Agent: LocalAgent, Modern: true}}: "2025-11-25",
		{"n", Scope{Agent: LocalAgent}}:               "2025-11-25",
		{"o", Scope{Agent: LocalAgent}}:               "2025-11-25",
	}
	gw.mu.Lock()
	defer gw.mu.Unlock()
	for k, v := range want {
		u := gw.pool[k]
		if u == nil {
			t.Fatalf("no instance %+v", k)
		}
		if got := u.info().Protocol; got != v {
			t.Errorf("instance %+v speaks %q, want %q", k, got, v)
		}
	}
}

// TestModernTranslatedElicitation: a 2026 client calls a tool of a
// session-based server that elicits; the question reaches the client as
// an input request, and its answer reaches the server. The go-sdk client
// does the round trip itself.
func TestModernTranslatedElicitation(t *testing.T) {
	o := &Server{Name: "o", Prefix: "o__", Launch: sdkLauncher(func(Scope) *mcp.Server { return legacyOnly("o") }, nil, nil), Allow: []string{"*"}}
	gw := newGateway(t, o)
	url := serveHTTP(t, gw, HTTPOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var asked []string
	cs := connectVersion(t, url, "", ModernVersion, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked = append(asked, req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "teal"}}, nil
		},
	})
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "o__elicit", Arguments: map[string]any{"text": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "accept:teal:x" {
		t.Fatalf("o__elicit = %q, want accept:teal:x", got)
	}
	if len(asked) != 1 || asked[0] != "o wants a color" {
		t.Fatalf("client was asked %q", asked)
	}
}

// modernCall posts a 2026 tools/call and returns the result or error
// object of the response.
func modernCall(t *testing.T, url, token, tool, args, extra string) (result, rpcErr map[string]any) {
	t.Helper()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}`
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + extra + `,` + meta + `}}`
	h := map[string]string{"MCP-Protocol-Version": ModernVersion, "Mcp-Method": "tools/call", "Mcp-Name": tool}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	_, out := post(t, url, body, h)
	data := out
	for line := range strings.Lines(out) {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			data = d
		}
	}
	var msg struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(data), &msg); err != nil {
		t.Fatalf("bad response %q: %v", out, err)
	}
	return msg.Result, msg.Error
}

// TestModernRequestState: the requestState of a translated round trip is
// the gateway's, and a tampered, replayed, expired, or rebound one (other
// arguments, other client) is refused without touching the waiting call,
// which the right state then completes. Each refused retry is told to
// Hooks.Unknown, so that the audit has its record.
func TestModernRequestState(t *testing.T) {
	o := &Server{Name: "o", Prefix: "o__", Launch: sdkLauncher(func(Scope) *mcp.Server { return legacyOnly("o") }, nil, nil), Allow: []string{"*"}}
	whys := make(chan string, 32)
	gw, err := New([]*Server{o}, Options{Version: "test", Hooks: Hooks{Unknown: func(c *Call, why string) { whys <- c.Tool + ": " + why }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	const alice, bob = "alice-token-0123456789", "bob-token-0123456789ab"
	url := serveHTTP(t, gw, HTTPOptions{Clients: []Client{{Name: "alice", Token: []byte(alice)}, {Name: "bob", Token: []byte(bob)}}})

	res, rerr := modernCall(t, url, alice, "o__elicit", `{"text":"x"}`, "")
	if rerr != nil || res["resultType"] != "input_required" {
		t.Fatalf("first round: result %v error %v, want input_required", res, rerr)
	}
	state, _ := res["requestState"].(string)
	reqs, _ := res["inputRequests"].(map[string]any)
	if !strings.HasPrefix(state, mrtrPrefix) || len(reqs) != 1 {
		t.Fatalf("state %q, inputRequests %v", state, reqs)
	}
	var key string
	for k, v := range reqs {
		key = k
		if m, _ := v.(map[string]any)["method"].(string); m != "elicitation/create" {
			t.Fatalf("input request %v, want elicitation/create", v)
		}
	}
	answer := func(st string) string {
		b, _ := json.Marshal(st)
		return `,"inputResponses":{"` + key + `":{"action":"accept","content":{"color":"red"}}},"requestState":` + string(b)
	}
	refused := func(name, token, args, st string) {
		t.Helper()
		res, rerr := modernCall(t, url, token, "o__elicit", args, answer(st))
		if rerr == nil || !strings.Contains(fmt.Sprint(rerr["message"]), "requestState refused") {
			t.Fatalf("%s: result %v error %v, want the state refused", name, res, rerr)
		}
		select {
		case got := <-whys:
			if want := "elicit: " + UnknownStateRefused; got != want {
				t.Errorf("%s: Unknown hook told %q, want %q", name, got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the refused retry reached no hook", name)
		}
	}

	// Tampered: each part of the token.
	payload, sig, _ := strings.Cut(strings.TrimPrefix(state, mrtrPrefix), ".")
	flip := func(s string) string {
		b := []byte(s)
		if b[len(b)/2] == 'A' {
			b[len(b)/2] = 'B'
		} else {
			b[len(b)/2] = 'A'
		}
		return string(b)
	}
	refused("tampered signature", alice, `{"text":"x"}`, mrtrPrefix+payload+"."+flip(sig))
	refused("tampered payload", alice, `{"text":"x"}`, mrtrPrefix+flip(payload)+"."+sig)
	// A payload the gateway did not sign, however plausible.
	var c stateClaims
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	json.Unmarshal(raw, &c)
	c.Expires += 3600
	forged, _ := json.Marshal(c)
	refused("re-signed with another key", alice, `{"text":"x"}`, newMRTRKeys().sign(c))
	refused("forged payload", alice, `{"text":"x"}`, mrtrPrefix+base64.RawURLEncoding.EncodeToString(forged)+"."+sig)
	// Bound to the arguments and the client.
	refused("other arguments", alice, `{"text":"y"}`, state)
	refused("other client", bob, `{"text":"x"}`, state)
	// Expired, though otherwise right.
	c.Expires = time.Now().Add(-time.Second).Unix()
	refused("expired", alice, `{"text":"x"}`, gw.mrtr.sign(c))

	// The waiting call is untouched: the right state completes it.
	res, rerr = modernCall(t, url, alice, "o__elicit", `{"text":"x"}`, answer(state))
	if rerr != nil || res["resultType"] != "complete" {
		t.Fatalf("answered round: result %v error %v", res, rerr)
	}
	content, _ := res["content"].([]any)
	if len(content) != 1 || content[0].(map[string]any)["text"] != "accept:red:x" {
		t.Fatalf("answered round: content %v, want accept:red:x", content)
	}
	// Single use.
	refused("replayed", alice, `{"text":"x"}`, state)
	select {
	case got := <-whys:
		t.Errorf("Unknown hook told of a call that was not refused: %q", got)
	default:
	}
}

// TestModernParkedExpiry: a call whose client never comes back is
// cancelled when its state expires, and its state is refused.
func TestModernParkedExpiry(t *testing.T) {
	old := mrtrTTL
	mrtrTTL = 300 * time.Millisecond
	t.Cleanup(func() { mrtrTTL = old })
	o := &Server{Name: "o", Prefix: "o__", Launch: sdkLauncher(func(Scope) *mcp.Server { return legacyOnly("o") }, nil, nil), Allow: []string{"*"}}
	gw := newGateway(t, o)
	url := serveHTTP(t, gw, HTTPOptions{})
	res, rerr := modernCall(t, url, "", "o__elicit", `{"text":"x"}`, "")
	if rerr != nil || res["resultType"] != "input_required" {
		t.Fatalf("result %v error %v", res, rerr)
	}
	gw.mu.Lock()
	d := gw.modern[LocalAgent]
	gw.mu.Unlock()
	if len(d.parkedIDs()) != 1 {
		t.Fatalf("parked %v, want one call", d.parkedIDs())
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(d.parkedIDs()) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the parked call outlived its expiry")
		}
		time.Sleep(20 * time.Millisecond)
	}
	state, _ := res["requestState"].(string)
	b, _ := json.Marshal(state)
	_, rerr = modernCall(t, url, "", "o__elicit", `{"text":"x"}`, `,"inputResponses":{},"requestState":`+string(b))
	if rerr == nil {
		t.Fatal("an expired call's state was accepted")
	}
}

// TestModernListen: a 2026 client hears list_changed on its
// subscriptions/listen stream, and a logging/setLevel without _meta (the
// go-sdk client sends one) is accepted as the session's default level.
func TestModernListen(t *testing.T) {
	_, url := modernGateway(t, HTTPOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	changed := make(chan struct{}, 4)
	cs := connectVersion(t, url, "", ModernVersion, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
		t.Fatalf("logging/setLevel: %v", err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__grow", Arguments: map[string]any{"text": "fresh"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed on the listen stream")
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(lt.Tools, func(tool *mcp.Tool) bool { return tool.Name == "a__fresh" }) {
		t.Fatal("tools/list lacks the new a__fresh")
	}
}

// TestModernCancel: a 2026 client that gives up on a call (drops its
// POST) cancels it at the server.
func TestModernCancel(t *testing.T) {
	_, url := modernGateway(t, HTTPOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := connectVersion(t, url, "", ModernVersion, nil)
	cctx, ccancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer ccancel()
	if _, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "a__block"}); err == nil {
		t.Fatal("the cancelled call succeeded")
	}
	deadline := time.Now().Add(5 * time.Second)
	for blocked.Load() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls still run at the server 5 s after their client gave up", blocked.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// approvalGateway serves metaServer "a" behind a Call hook that asks the
// client to approve every call and records what it saw.
func approvalGateway(t *testing.T) (url string, seen *[]string, ran *atomic.Int64) {
	t.Helper()
	var mu sync.Mutex
	seen = &[]string{}
	ran = &atomic.Int64{}
	hook := func(ctx context.Context, c *Call, next func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
		mu.Lock()
		*seen = append(*seen, c.Trace)
		mu.Unlock()
		if c.Elicit == nil {
			return Refusal("no way to ask", nil), nil
		}
		choice, err := c.Elicit(ctx, "run "+c.Name+" "+string(c.Arguments)+"?", []string{"allow", "deny"})
		if err != nil {
			return nil, err
		}
		if choice != "allow" {
			return Refusal("denied: "+choice, nil), nil
		}
		ran.Add(1)
		return next(ctx)
	}
	a := &Server{Name: "a", Prefix: "a__", Launch: sdkLauncher(func(Scope) *mcp.Server { return metaServer("a") }, nil, nil), Allow: []string{"*"}}
	gw, err := New([]*Server{a}, Options{Version: "test", Hooks: Hooks{Call: hook}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return serveHTTP(t, gw, HTTPOptions{}), seen, ran
}

// TestModernApproval: a call that needs review asks a 2026 client through
// an input_required result carrying the approval form; the answer in the
// retry runs or denies the call, and the trace context reaches the hook.
func TestModernApproval(t *testing.T) {
	url, seen, ran := approvalGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, answer := range []string{"allow", "deny"} {
		var forms []string
		cs := connectVersion(t, url, "", ModernVersion, &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				forms = append(forms, req.Params.Message)
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": answer}}, nil
			},
		})
		before := ran.Load()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__echo", Arguments: map[string]any{"text": answer},
			Meta: mcp.Meta{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})
		if err != nil {
			t.Fatal(err)
		}
		got := res.Content[0].(*mcp.TextContent).Text
		if len(forms) != 1 || !strings.Contains(forms[0], `run a__echo {"text":"`+answer+`"}?`) {
			t.Fatalf("approval forms %q", forms)
		}
		switch answer {
		case "allow":
			if got != "a:allow" || ran.Load() != before+1 {
				t.Fatalf("approved call: %q (ran %d)", got, ran.Load()-before)
			}
		case "deny":
			if !res.IsError || !strings.Contains(got, "denied: deny") || ran.Load() != before {
				t.Fatalf("denied call: %q isError=%v (ran %d)", got, res.IsError, ran.Load()-before)
			}
		}
	}
	if len(*seen) != 2 || (*seen)[0] != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" {
		t.Fatalf("hook saw traces %q", *seen)
	}
}

// TestModernApprovalStateRefused: the approval's requestState cannot be
// moved to other arguments, tampered with or replayed: the call runs only
// for the exact request that was approved, once.
func TestModernApprovalStateRefused(t *testing.T) {
	url, _, ran := approvalGateway(t)
	res, rerr := modernCall(t, url, "", "a__echo", `{"text":"safe"}`, "")
	if rerr != nil || res["resultType"] != "input_required" {
		t.Fatalf("first round: %v %v", res, rerr)
	}
	state, _ := res["requestState"].(string)
	var key string
	for k := range res["inputRequests"].(map[string]any) {
		key = k
	}
	allow := func(st string) string {
		b, _ := json.Marshal(st)
		return `,"inputResponses":{"` + key + `":{"action":"accept","content":{"decision":"allow"}}},"requestState":` + string(b)
	}
	if _, rerr := modernCall(t, url, "", "a__echo", `{"text":"rm -rf /"}`, allow(state)); rerr == nil {
		t.Fatal("the approval of other arguments was accepted")
	}
	if _, rerr := modernCall(t, url, "", "a__echo", `{"text":"safe"}`, allow(state[:len(state)-2]+"xx")); rerr == nil {
		t.Fatal("a tampered approval state was accepted")
	}
	if ran.Load() != 0 {
		t.Fatal("a refused state ran the call")
	}
	res, rerr = modernCall(t, url, "", "a__echo", `{"text":"safe"}`, allow(state))
	if rerr != nil || ran.Load() != 1 {
		t.Fatalf("approved round: %v %v (ran %d)", res, rerr, ran.Load())
	}
	if _, rerr := modernCall(t, url, "", "a__echo", `{"text":"safe"}`, allow(state)); rerr == nil || ran.Load() != 1 {
		t.Fatalf("a replayed approval was accepted (ran %d)", ran.Load())
	}
}

// TestModernForeignStateAskedAgain: a requestState naming another
// gateway's keys is a 2026 server's own and goes to it (an mcpbox
// upstream's); forged so to dodge this gateway's check, it only starts
// the call anew: the approval is asked again and nothing runs.
func TestModernForeignStateAskedAgain(t *testing.T) {
	url, _, ran := approvalGateway(t)
	res, rerr := modernCall(t, url, "", "a__echo", `{"text":"safe"}`, "")
	if rerr != nil || res["resultType"] != "input_required" {
		t.Fatalf("first round: %v %v", res, rerr)
	}
	var key string
	for k := range res["inputRequests"].(map[string]any) {
		key = k
	}
	forged, _ := json.Marshal(newMRTRKeys().sign(stateClaims{Call: "c1", Round: 1, Bind: bindHash("tools/call", "a__echo", json.RawMessage(`{"text":"safe"}`)), Expires: time.Now().Add(time.Hour).Unix()}))
	allow := `,"inputResponses":{"` + key + `":{"action":"accept","content":{"decision":"allow"}}},"requestState":` + string(forged)
	res, rerr = modernCall(t, url, "", "a__echo", `{"text":"safe"}`, allow)
	if rerr != nil || res["resultType"] != "input_required" || ran.Load() != 0 {
		t.Fatalf("a forged foreign state: result %v error %v, ran %d; want the approval asked again and nothing run", res, rerr, ran.Load())
	}
}

// TestModernOrdering: a 2026 client gets each server's list in name
// order whatever order the server lists in; a legacy client gets the
// server's order, as before. The server here answers no server/discover,
// so the 2026 client is served by an initialized instance.
func TestModernOrdering(t *testing.T) {
	launch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		switch msg["method"] {
		case "server/discover":
			s.send(map[string]any{"jsonrpc": "2.0", "id": msg["id"], "error": map[string]any{"code": -32601, "message": "method not found"}})
		case "tools/list":
			s.reply(msg, `{"tools":[{"name":"zeta","inputSchema":{"type":"object"}},{"name":"alpha","inputSchema":{"type":"object"}},{"name":"mid","inputSchema":{"type":"object"}}]}`)
		}
	})
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}, Restart: RestartNo})
	url := serveHTTP(t, gw, HTTPOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := func(cs *mcp.ClientSession) []string {
		lt, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tool := range lt.Tools {
			out = append(out, tool.Name)
		}
		return out
	}
	start := time.Now()
	if got := names(connectVersion(t, url, "", ModernVersion, nil)); !slices.Equal(got, []string{"alpha", "mid", "zeta"}) {
		t.Fatalf("2026 client: %v, want name order", got)
	}
	if d := time.Since(start); d > discoverTimeout {
		t.Fatalf("a server refusing server/discover took %v to serve", d)
	}
	if got := names(connect(t, url, "", nil)); !slices.Equal(got, []string{"zeta", "alpha", "mid"}) {
		t.Fatalf("legacy client: %v, want the server's order", got)
	}
}

// legacyResources is resourceServer restricted to the session-based
// revision.
func legacyResources(name string, uris ...string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ServerOptions{
		SupportedProtocolVersions: []string{"2025-11-25"},
		SubscribeHandler:          func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler:        func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	for _, uri := range uris {
		s.AddResource(&mcp.Resource{URI: uri, Name: "r"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: name}}}, nil
		})
	}
	return s
}

// TestModernResourceUpdates: a 2026 client subscribes to resources through
// subscriptions/listen; updates reach it from a server of the new revision
// (subscribed through the gateway's own listen stream) and from a
// session-based one (resources/subscribe), and only for what it asked.
func TestModernResourceUpdates(t *testing.T) {
	const newURI, oldURI, other = "test://new/r", "test://old/r", "test://new/other"
	newSrv := resourceServer("new", newURI, other)
	oldSrv := legacyResources("old", oldURI)
	gw := newGateway(t,
		&Server{Name: "new", Prefix: "n_", Scope: ScopeShared, Launch: sdkLauncher(func(Scope) *mcp.Server { return newSrv }, nil, nil), Allow: []string{"*"}},
		&Server{Name: "old", Prefix: "o_", Scope: ScopeShared, Launch: sdkLauncher(func(Scope) *mcp.Server { return oldSrv }, nil, nil), Allow: []string{"*"}},
	)
	url := serveHTTP(t, gw, HTTPOptions{})
	var got updates
	cs := connectVersion(t, url, "", ModernVersion, got.options())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, uri := range []string{newURI, oldURI} {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribing to %s: %v", uri, err)
		}
	}
	// The subscriptions reach the servers asynchronously; keep updating
	// until the update arrives.
	deliver := func(srv *mcp.Server, uri string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
			select {
			case u := <-got.got:
				if u == uri {
					return
				}
				t.Fatalf("got an update of %s, want %s", u, uri)
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("no update of %s (seen %v)", uri, got.seen())
			}
		}
	}
	deliver(newSrv, newURI)
	deliver(oldSrv, oldURI)
	// Not subscribed: never delivered. The marker after it shares the
	// queue, so once it is there, the other would be too.
	newSrv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: other})
	deliver(newSrv, newURI)
	time.Sleep(100 * time.Millisecond)
	if slices.Contains(got.seen(), other) {
		t.Fatalf("an update of %s, never subscribed, reached the client", other)
	}
}

// TestModernDiscoverUnanswered: a server that ignores server/discover (it
// answers nothing before initialize) is initialized once the discover
// times out, and serves the 2026 client.
func TestModernDiscoverUnanswered(t *testing.T) {
	old := discoverTimeout
	discoverTimeout = 200 * time.Millisecond
	t.Cleanup(func() { discoverTimeout = old })
	launch, started := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/list" {
			s.reply(msg, `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
		}
	})
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}, Restart: RestartNo})
	url := serveHTTP(t, gw, HTTPOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := connectVersion(t, url, "", ModernVersion, nil)
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lt.Tools) != 1 || lt.Tools[0].Name != "t" {
		t.Fatalf("tools %v", lt.Tools)
	}
	srvs := started()
	if len(srvs) != 1 || len(srvs[0].received("server/discover")) != 1 || len(srvs[0].received("initialize")) != 1 {
		t.Fatalf("want one server, asked server/discover once, then initialized")
	}
}

// TestValidID: only strings and numbers are echoed as request ids.
func TestValidID(t *testing.T) {
	for raw, want := range map[string]bool{`1`: true, `"a"`: true, `-2.5`: true, ``: false, `null`: false, `{}`: false, `[1]`: false, `"a" 1`: false, `true`: false} {
		if got := validID(json.RawMessage(raw)); got != want {
			t.Errorf("validID(%q) = %v, want %v", raw, got, want)
		}
	}
}

// TestModernTooManyWaitingAudited: a new call while maxParked of the
// client's calls wait for input (here an approval) is refused, runs
// nothing, and is told to Hooks.Unknown, so that the audit has its record.
func TestModernTooManyWaitingAudited(t *testing.T) {
	a := &Server{Name: "a", Prefix: "a__", Launch: sdkLauncher(func(Scope) *mcp.Server { return metaServer("a") }, nil, nil), Allow: []string{"*"}}
	whys := make(chan string, 8)
	approve := func(ctx context.Context, c *Call, next func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
		if _, err := c.Elicit(ctx, "run "+c.Name+"?", []string{"allow", "deny"}); err != nil {
			return nil, err
		}
		return next(ctx)
	}
	gw, err := New([]*Server{a}, Options{Version: "test", Hooks: Hooks{Call: approve, Unknown: func(c *Call, why string) { whys <- c.Tool + ": " + why }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	const alice = "alice-token-0123456789"
	url := serveHTTP(t, gw, HTTPOptions{Clients: []Client{{Name: "alice", Token: []byte(alice)}}})
	for i := range maxParked {
		if res, rerr := modernCall(t, url, alice, "a__echo", fmt.Sprintf(`{"text":"%d"}`, i), ""); rerr != nil || res["resultType"] != "input_required" {
			t.Fatalf("call %d: result %v error %v, want it waiting for input", i, res, rerr)
		}
	}
	res, rerr := modernCall(t, url, alice, "a__echo", `{"text":"one more"}`, "")
	if rerr == nil || !strings.Contains(fmt.Sprint(rerr["message"]), "too many calls waiting") {
		t.Fatalf("call %d: result %v error %v, want it refused", maxParked, res, rerr)
	}
	select {
	case got := <-whys:
		if want := "echo: " + UnknownTooManyWaiting; got != want {
			t.Errorf("Unknown hook told %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the refused call reached no hook")
	}
}

// TestTraceOf: only a W3C traceparent is taken from a request's _meta
// (for the audit and the call's span); junk is not.
func TestTraceOf(t *testing.T) {
	const good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for tp, want := range map[string]bool{
		good: true,
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future": true,
		"": false,
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01": false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01": false,
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": false,
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01": false,
		good + "-extra": false, // version 00 has four fields
		good[:54]:       false,
		good + "\n":     false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\x1b[2J": false,
		strings.Repeat("a", 200): false,
	} {
		if got := traceOf(mcp.Meta{"traceparent": tp}) == tp && tp != ""; got != want {
			t.Errorf("traceOf(%q) taken = %v, want %v", tp, got, want)
		}
	}
	if got := traceOf(mcp.Meta{"traceparent": map[string]any{"x": 1}}); got != "" {
		t.Errorf("an object: %q", got)
	}
}
