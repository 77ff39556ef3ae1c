package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func newGateway(t *testing.T, servers ...*Server) *Gateway {
	t.Helper()
	gw, err := New(servers, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return gw
}

// TestUnknownFieldsPassThrough: what the server sends reaches the client
// byte for byte in meaning, including fields no SDK models yet.
func TestUnknownFieldsPassThrough(t *testing.T) {
	tool := `{"name":"t","inputSchema":{"type":"object"},"x-future":{"k":[1,2]},"_meta":{"m":2},"icons":[{"src":"data:x"}]}`
	result := `{"content":[{"type":"text","text":"hi","x-ann":1}],"structuredContent":{"a":1},"x-new":true,"_meta":{"z":"y"}}`
	launch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		switch msg["method"] {
		case "tools/list":
			s.reply(msg, `{"tools":[`+tool+`]}`)
		case "tools/call":
			s.reply(msg, result)
		}
	})
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}, Restart: RestartNo})
	c := newRawClient(t, gw)
	_, raw := c.call("tools/list", nil)
	wantJSON(t, raw, "result", `{"tools":[`+tool+`]}`)
	_, raw = c.call("tools/call", map[string]any{"name": "t", "arguments": map[string]any{}})
	wantJSON(t, raw, "result", result)
}

// wantJSON checks that field of the JSON object line equals want, as JSON.
func wantJSON(t *testing.T, line []byte, field, want string) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatal(err)
	}
	var got, exp any
	json.Unmarshal(m[field], &got)
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(got)
	e, _ := json.Marshal(exp)
	if !bytes.Equal(g, e) {
		t.Fatalf("%s:\n got %s\nwant %s", field, g, e)
	}
}

// TestBadUpstreamMessages: garbage, non-JSON-RPC and oversized lines from a
// server are dropped; the session goes on.
func TestBadUpstreamMessages(t *testing.T) {
	launch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/call" {
			s.send("this is not json")
			s.send(`{"hello":"world"}`)
			s.send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + strings.Repeat("x", 2<<20) + `"}}`)
			s.reply(msg, `{"content":[{"type":"text","text":"still here"}]}`)
		}
	})
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}, MaxMessage: 1 << 20})
	c := newRawClient(t, gw)
	for i := range 3 {
		resp, _ := c.call("tools/call", map[string]any{"name": "t"})
		if !strings.Contains(fmt.Sprint(resp["result"]), "still here") {
			t.Fatalf("call %d: %v", i, resp)
		}
	}
}

// TestToolFilter: a denied or not-allowed tool is absent from the list
// and "unknown" to calls, which never reach the server.
func TestToolFilter(t *testing.T) {
	launch, started := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		switch msg["method"] {
		case "tools/list":
			s.reply(msg, `{"tools":[{"name":"read_file","inputSchema":{"type":"object"}},{"name":"delete_repo","inputSchema":{"type":"object"}},{"name":"admin_x","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			s.reply(msg, `{"content":[]}`)
		}
	})
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"read_*", "delete_*"}, Deny: []string{"delete_*"}})
	c := newRawClient(t, gw)
	resp, _ := c.call("tools/list", nil)
	tools := resp["result"].(map[string]any)["tools"].([]any)
	if len(tools) != 1 || tools[0].(map[string]any)["name"] != "read_file" {
		t.Fatalf("tools = %v, want only read_file", tools)
	}
	for _, name := range []string{"delete_repo", "admin_x"} {
		resp, _ := c.call("tools/call", map[string]any{"name": name})
		if e, _ := resp["error"].(map[string]any); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "unknown tool") {
			t.Fatalf("%s: %v, want unknown tool", name, resp)
		}
	}
	if n := len(started()[0].received("tools/call")); n != 0 {
		t.Fatalf("server saw %d calls of hidden tools", n)
	}
}

// TestCrashRestart: a server that dies mid-call fails that call with a
// clear error and is restarted for the next one.
func TestCrashRestart(t *testing.T) {
	var calls atomic.Int32
	launch, started := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/call" {
			if calls.Add(1) == 1 {
				s.out.Close() // dies without answering
				return
			}
			s.reply(msg, `{"content":[{"type":"text","text":"back"}]}`)
		}
	})
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}, Restart: RestartOnFailure})
	c := newRawClient(t, gw)
	resp, _ := c.call("tools/call", map[string]any{"name": "t"})
	e, _ := resp["error"].(map[string]any)
	if e == nil || e["code"].(float64) != codeUnavailable {
		t.Fatalf("first call: %v, want an unavailable error", resp)
	}
	resp, _ = c.call("tools/call", map[string]any{"name": "t"})
	if !strings.Contains(fmt.Sprint(resp["result"]), "back") {
		t.Fatalf("after restart: %v", resp)
	}
	if n := len(started()); n != 2 {
		t.Fatalf("started %d servers, want 2", n)
	}
}

// TestNoRestart: with restart off, a dead server stays dead.
func TestNoRestart(t *testing.T) {
	launch, started := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/call" {
			s.out.Close()
		}
	})
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}, Restart: RestartNo})
	c := newRawClient(t, gw)
	for range 2 {
		resp, _ := c.call("tools/call", map[string]any{"name": "t"})
		if resp["error"] == nil {
			t.Fatalf("call succeeded on a dead server: %v", resp)
		}
	}
	if n := len(started()); n != 1 {
		t.Fatalf("started %d servers, want 1", n)
	}
}

// TestCallTimeout: call_timeout fails the call and cancels it upstream.
func TestCallTimeout(t *testing.T) {
	launch, started := rawLauncher(t, func(s *rawServer, msg map[string]any) {}) // never answers calls
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}, CallTimeout: 200 * time.Millisecond})
	c := newRawClient(t, gw)
	resp, _ := c.call("tools/call", map[string]any{"name": "t"})
	e, _ := resp["error"].(map[string]any)
	if e == nil || e["code"].(float64) != codeTimeout {
		t.Fatalf("%v, want a timeout error", resp)
	}
	s := started()[0]
	deadline := time.Now().Add(5 * time.Second)
	for len(s.received("notifications/cancelled")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the server was not told that the call was cancelled")
		}
		time.Sleep(10 * time.Millisecond)
	}
	call := s.received("tools/call")[0]
	cancel := s.received("notifications/cancelled")[0]
	if got, want := cancel["params"].(map[string]any)["requestId"], call["id"]; got != want {
		t.Fatalf("cancelled request %v, want %v", got, want)
	}
}

// TestOutputLimit: a result over limits.output is replaced by an error result.
func TestOutputLimit(t *testing.T) {
	launch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/call" {
			s.reply(msg, `{"content":[{"type":"text","text":"`+strings.Repeat("a", 5000)+`"}]}`)
		}
	})
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}, MaxOutput: 4096})
	c := newRawClient(t, gw)
	resp, _ := c.call("tools/call", map[string]any{"name": "t"})
	res, _ := resp["result"].(map[string]any)
	if res == nil || res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), "exceeds the output limit") {
		t.Fatalf("%v, want an output-limit error result", resp)
	}
}

// TestRootsAreTheSandboxes: roots/list from a server is answered with the
// sandbox's mounts, not the client's roots.
func TestRootsAreTheSandboxes(t *testing.T) {
	got := make(chan string, 1)
	launch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		switch {
		case msg["method"] == "tools/call":
			s.send(`{"jsonrpc":"2.0","id":"r1","method":"roots/list"}`)
			s.reply(msg, `{"content":[]}`)
		case msg["id"] == "r1":
			b, _ := json.Marshal(msg["result"])
			got <- string(b)
		}
	})
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}})
	c := newRawClient(t, gw)
	c.call("tools/call", map[string]any{"name": "t"})
	select {
	case r := <-got:
		if r != `{"roots":[{"name":"input","uri":"file:///workspace/input"}]}` {
			t.Fatalf("roots = %s", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no roots answer")
	}
}

func TestNewRefusesBadServers(t *testing.T) {
	launch, _ := rawLauncher(t, nil)
	tests := []struct {
		name    string
		servers []*Server
		want    string
	}{
		{"overlapping prefixes", []*Server{{Name: "a", Prefix: "gh", Launch: launch}, {Name: "b", Prefix: "gh_x", Launch: launch}}, "overlap"},
		{"two without prefix", []*Server{{Name: "a", Launch: launch}, {Name: "b", Launch: launch}}, "overlap"},
		{"duplicate", []*Server{{Name: "a", Prefix: "a_", Launch: launch}, {Name: "a", Prefix: "b_", Launch: launch}}, "duplicate"},
		{"bad prefix", []*Server{{Name: "a", Prefix: "a b", Launch: launch}}, "prefix"},
		{"bad glob", []*Server{{Name: "a", Allow: []string{"["}, Launch: launch}}, "glob"},
		{"no launcher", []*Server{{Name: "a"}}, "launcher"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.servers, Options{}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want an error about %q", err, tt.want)
			}
		})
	}
}

func TestCursor(t *testing.T) {
	for _, n := range []int{0, 1, 999, 123456} {
		got, err := decodeCursor(encodeCursor(n))
		if err != nil || got != n {
			t.Fatalf("cursor %d: %d, %v", n, got, err)
		}
	}
	for _, bad := range []string{"", "x", "bWNwYm94Oi0x", "Zm9v"} {
		if _, err := decodeCursor(bad); err == nil {
			t.Fatalf("cursor %q accepted", bad)
		}
	}
}

// TestOversizedResult: a result over the message limit fails its call
// (it is not read into memory) and the session goes on.
func TestOversizedResult(t *testing.T) {
	launch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] != "tools/call" {
			return
		}
		if msg["params"].(map[string]any)["name"] == "big" {
			s.reply(msg, `{"content":[{"type":"text","text":"`+strings.Repeat("b", 3<<20)+`"}]}`)
			return
		}
		s.reply(msg, `{"content":[{"type":"text","text":"small"}]}`)
	})
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}, MaxMessage: 1 << 20})
	c := newRawClient(t, gw)
	resp, _ := c.call("tools/call", map[string]any{"name": "big"})
	if e, _ := resp["error"].(map[string]any); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "message limit") {
		t.Fatalf("%.300v, want a message-limit error", resp)
	}
	resp, _ = c.call("tools/call", map[string]any{"name": "small"})
	if !strings.Contains(fmt.Sprint(resp["result"]), "small") {
		t.Fatalf("after the big one: %v", resp)
	}
}

func TestResponseID(t *testing.T) {
	tests := []struct {
		head, tail string
		want       any
	}{
		{`{"jsonrpc":"2.0","id":12,"result":{"content":[`, `]}}`, int64(12)},
		{`{"id":"a\"b","result":`, `}`, `a"b`},
		{` { "jsonrpc" : "2.0" , "id" : -3 , "error" : {`, `}}`, int64(-3)},
		{`{"jsonrpc":"2.0","method":"notifications/message","params":`, `"id":5}`, nil},
		{`{"result":{"content":[`, `]},"id":4}`, int64(4)},
		{`{"result":{"x":1`, `},"id":4,"jsonrpc":"2.0"}` + "\n", int64(4)},
		{`{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":`, `}}`, nil},
	}
	for _, tt := range tests {
		id, ok := ResponseID([]byte(tt.head), []byte(tt.tail))
		if tt.want == nil {
			if ok {
				t.Errorf("%s: found id %v", tt.head, id.Raw())
			}
			continue
		}
		if !ok || id.Raw() != tt.want {
			t.Errorf("%s: id %v %v, want %v", tt.head, id.Raw(), ok, tt.want)
		}
	}
}

// TestUpstreamCaps: the server is told what the client can do, and
// roots whatever the client declared (the gateway answers them), and
// nothing more.
func TestUpstreamCaps(t *testing.T) {
	tests := []struct {
		name   string
		client *mcp.ClientCapabilities
		want   string
	}{
		{"nothing", &mcp.ClientCapabilities{}, `{"roots":{"listChanged":false}}`},
		{"roots and sampling", &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true}, Sampling: &mcp.SamplingCapabilities{}}, `{"roots":{"listChanged":false},"sampling":{}}`},
		{"elicitation", &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}, `{"elicitation":{"form":{}},"roots":{"listChanged":false}}`},
	}
	for _, tt := range tests {
		got := upstreamCaps(tt.client)
		var g, w any
		json.Unmarshal(got, &g)
		json.Unmarshal([]byte(tt.want), &w)
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		if !bytes.Equal(gb, wb) {
			t.Errorf("%s: upstream told %s, want %s", tt.name, gb, wb)
		}
	}
}

// TestRefresh: after Server.Refresh a new process takes over (new
// secrets), a call in flight finishes on the old one, which then stops.
func TestRefresh(t *testing.T) {
	release := make(chan struct{})
	var n atomic.Int32
	launch, started := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] != "tools/call" {
			return
		}
		if msg["params"].(map[string]any)["name"] == "slow" {
			go func() {
				<-release
				s.reply(msg, `{"content":[{"type":"text","text":"slow done"}]}`)
			}()
			return
		}
		s.reply(msg, fmt.Sprintf(`{"content":[{"type":"text","text":"call %d"}]}`, n.Add(1)))
	})
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}, Refresh: 300 * time.Millisecond})
	c := newRawClient(t, gw)
	slow := make(chan map[string]any, 1)
	go func() {
		resp, _ := c.call("tools/call", map[string]any{"name": "slow"})
		slow <- resp
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(started()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no refresh")
		}
		time.Sleep(20 * time.Millisecond)
	}
	first := started()[0]
	select {
	case <-first.done:
		t.Fatal("the old process stopped with a call in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case resp := <-slow:
		if !strings.Contains(fmt.Sprint(resp["result"]), "slow done") {
			t.Fatalf("in-flight call: %v", resp)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the in-flight call never finished")
	}
	select {
	case <-first.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the old process was not retired")
	}
	c.call("tools/call", map[string]any{"name": "fast"})
	if got := len(started()[len(started())-1].received("tools/call")); got != 1 {
		t.Fatalf("the newest process saw %d calls, want the fast one", got)
	}
}

// TestRestartPolicy: on-failure leaves a server that exited with status
// 0 stopped; always restarts it.
func TestRestartPolicy(t *testing.T) {
	for _, tt := range []struct {
		policy string
		want   int
	}{{RestartOnFailure, 1}, {RestartAlways, 2}} {
		t.Run(tt.policy, func(t *testing.T) {
			raw, started := rawLauncher(t, func(s *rawServer, msg map[string]any) {
				if msg["method"] == "tools/call" {
					s.out.Close()
				}
			})
			launch := func(ctx context.Context, sc Scope) (*Process, error) {
				p, err := raw(ctx, sc)
				if p != nil {
					p.Clean = func() bool { return true }
				}
				return p, err
			}
			gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}, Restart: tt.policy})
			c := newRawClient(t, gw)
			c.call("tools/call", map[string]any{"name": "t"})
			c.call("tools/call", map[string]any{"name": "t"})
			// always may already be starting a third after the second end.
			if n := len(started()); n < tt.want || (tt.want == 1 && n != 1) {
				t.Fatalf("started %d servers, want %d", n, tt.want)
			}
		})
	}
}

// TestRefreshNow: Gateway.Refresh renews a running server at once.
func TestRefreshNow(t *testing.T) {
	launch, started := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/call" {
			s.reply(msg, `{"content":[]}`)
		}
	})
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}})
	c := newRawClient(t, gw)
	if n := gw.Refresh("other"); n != 0 {
		t.Fatalf("Refresh of an unknown server renewed %d", n)
	}
	if n := gw.Refresh("raw"); n != 1 {
		t.Fatalf("Refresh renewed %d instances, want 1", n)
	}
	c.call("tools/call", map[string]any{"name": "t"})
	servers := started()
	if len(servers) != 2 || len(servers[1].received("tools/call")) != 1 {
		t.Fatalf("started %d servers; the call did not reach the new one", len(servers))
	}
	select {
	case <-servers[0].done:
	case <-time.After(10 * time.Second):
		t.Fatal("the old server was not retired")
	}
}

// TestMaxSessions: an agent cannot open sessions (and sandboxes) without
// bound.
func TestMaxSessions(t *testing.T) {
	launch, started := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/list" {
			s.reply(msg, `{"tools":[]}`)
		}
	})
	gw, err := New([]*Server{{Name: "raw", Scope: ScopeSession, Launch: launch, Allow: []string{"*"}}}, Options{MaxSessions: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	first := newRawClient(t, gw)
	if resp, _ := first.call("tools/list", nil); resp["error"] != nil {
		t.Fatalf("first session: %v", resp)
	}
	second := newRawClient(t, gw) // its initialize is refused
	if resp, _ := second.call("tools/list", nil); resp["error"] == nil {
		t.Fatalf("second session of the agent works: %v", resp)
	}
	if n := len(started()); n != 1 {
		t.Fatalf("started %d sandboxes, want 1", n)
	}
}

// TestCallToServerThatDidNotStart: a call to a tool of a server that
// could not start for the session names that server and why, instead of
// calling the tool unknown, and the other server keeps answering.
func TestCallToServerThatDidNotStart(t *testing.T) {
	good, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		switch msg["method"] {
		case "tools/list":
			s.reply(msg, `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			s.reply(msg, `{"content":[{"type":"text","text":"good"}]}`)
		}
	})
	bad := func(context.Context, Scope) (*Process, error) { return nil, errors.New("exec: no such file") }
	gw := newGateway(t,
		&Server{Name: "good", Prefix: "good__", Launch: good, Allow: []string{"*"}},
		&Server{Name: "bad", Prefix: "bad__", Launch: bad, Allow: []string{"*"}, Restart: RestartNo})
	c := newRawClient(t, gw)
	resp, raw := c.call("tools/call", map[string]any{"name": "bad__t"})
	e, _ := resp["error"].(map[string]any)
	msg, _ := e["message"].(string)
	if !strings.Contains(msg, "server bad did not start") || !strings.Contains(msg, "no such file") {
		t.Errorf("call to the server that did not start: %s; want an error naming it and why", raw)
	}
	if resp, raw := c.call("tools/call", map[string]any{"name": "nosuch__t"}); !strings.Contains(fmt.Sprint(resp["error"]), "unknown tool") {
		t.Errorf("call to a tool of no server: %s; want unknown tool", raw)
	}
	if _, raw := c.call("tools/call", map[string]any{"name": "good__t"}); !strings.Contains(string(raw), `"good"`) {
		t.Errorf("call to the good server: %s", raw)
	}
}
