package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

// TestListHook: what Hooks.List hides is neither listed nor callable (the
// call never reaches the server); the Call hook sees the tool's current
// definition; ListChanged tells the client once the hook lets it through.
func TestListHook(t *testing.T) {
	launch, started := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		switch msg["method"] {
		case "tools/list":
			s.reply(msg, `{"tools":[{"name":"ok","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}},{"name":"held","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			s.reply(msg, `{"content":[]}`)
		}
	})
	var hidden atomic.Bool
	hidden.Store(true)
	var mu sync.Mutex
	var seenDefs []string
	var kinds []string
	gw, err := New([]*Server{{Name: "raw", Launch: launch, Allow: []string{"*"}}}, Options{Hooks: Hooks{
		List: func(agent, server, kind string, _ uint64, items []Item) []Item {
			mu.Lock()
			kinds = append(kinds, agent+"/"+server+"/"+kind)
			mu.Unlock()
			return slices.DeleteFunc(slices.Clone(items), func(it Item) bool { return hidden.Load() && it.Key == "held" })
		},
		Call: func(ctx context.Context, c *Call, next func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
			mu.Lock()
			seenDefs = append(seenDefs, string(c.Definition))
			mu.Unlock()
			return next(ctx)
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	c := newRawClient(t, gw)
	resp, _ := c.call("tools/list", nil)
	if got := fmt.Sprint(resp["result"]); strings.Contains(got, "held") || !strings.Contains(got, "ok") {
		t.Fatalf("tools/list = %s, want ok without held", got)
	}
	resp, _ = c.call("tools/call", map[string]any{"name": "held"})
	if e, _ := resp["error"].(map[string]any); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "unknown tool") {
		t.Fatalf("calling a hidden tool: %v", resp)
	}
	if n := len(started()[0].received("tools/call")); n != 0 {
		t.Fatalf("the server saw %d calls of a hidden tool", n)
	}
	c.call("tools/call", map[string]any{"name": "ok"})
	mu.Lock()
	if len(seenDefs) != 1 || !strings.Contains(seenDefs[0], `"destructiveHint":true`) {
		t.Fatalf("Call hook saw definitions %q", seenDefs)
	}
	if !slices.Contains(kinds, LocalAgent+"/raw/tools") {
		t.Fatalf("List hook saw %q", kinds)
	}
	mu.Unlock()

	hidden.Store(false)
	c.notes = nil
	gw.ListChanged("raw")
	c.call("ping", nil) // the notification is queued before this answer
	deadline := time.Now().Add(5 * time.Second)
	for !hasNote(c.notes, "notifications/tools/list_changed") {
		if time.Now().After(deadline) {
			t.Fatalf("no tools/list_changed after ListChanged; notes %v", c.notes)
		}
		c.call("ping", nil)
	}
	resp, _ = c.call("tools/call", map[string]any{"name": "held"})
	if resp["error"] != nil {
		t.Fatalf("calling a tool the hook lets through: %v", resp)
	}
}

func hasNote(notes []map[string]any, method string) bool {
	for _, n := range notes {
		if n["method"] == method {
			return true
		}
	}
	return false
}

// TestSessionHook: a session's start (with the client's name) and end.
func TestSessionHook(t *testing.T) {
	launch, _ := rawLauncher(t, nil)
	events := make(chan SessionEvent, 4)
	gw, err := New([]*Server{{Name: "raw", Launch: launch, Allow: []string{"*"}}}, Options{Hooks: Hooks{
		Session: func(ev SessionEvent) { events <- ev },
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	t.Run("session", func(t *testing.T) { newRawClient(t, gw) }) // its cleanup ends the session
	var got []SessionEvent
	for len(got) < 2 {
		select {
		case ev := <-events:
			got = append(got, ev)
		case <-time.After(10 * time.Second):
			t.Fatalf("session events: %+v", got)
		}
	}
	if got[0].End || got[0].Client != "t 1" || got[0].Agent != LocalAgent || !got[1].End || got[1].Session != got[0].Session {
		t.Fatalf("session events: %+v", got)
	}
}

// TestDefinitions: a server's raw lists outside any session, with the
// gateway's tool filter applied, and the server stopped afterwards.
func TestDefinitions(t *testing.T) {
	launch, started := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/list" {
			s.reply(msg, `{"tools":[{"name":"a","description":"x","inputSchema":{"type":"object"}},{"name":"secret_b","inputSchema":{"type":"object"}}]}`)
		}
	})
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}, Deny: []string{"secret_*"}})
	d, err := gw.Definitions(context.Background(), "raw", Scope{Agent: LocalAgent})
	if err != nil {
		t.Fatal(err)
	}
	tools := d.Lists[KindTools]
	if len(tools) != 1 || tools[0].Key != "a" || !strings.Contains(string(tools[0].Raw), `"description":"x"`) {
		t.Fatalf("tools = %+v", tools)
	}
	if _, ok := d.Lists[KindPrompts]; ok {
		t.Fatal("prompts listed for a server without the capability")
	}
	if !strings.Contains(string(d.ServerInfo), `"raw"`) {
		t.Fatalf("serverInfo = %s", d.ServerInfo)
	}
	select {
	case <-started()[0].done:
	case <-time.After(5 * time.Second):
		t.Fatal("the server still runs after Definitions")
	}
	// It declares every client capability: a server that offers some
	// tools only to clients that sample, elicit or give roots lists them.
	srv := started()[0]
	srv.mu.Lock()
	init, _ := json.Marshal(srv.seen[0]["params"])
	srv.mu.Unlock()
	var p struct{ Capabilities map[string]any }
	json.Unmarshal(init, &p)
	for _, c := range []string{"roots", "sampling", "elicitation"} {
		if p.Capabilities[c] == nil {
			t.Errorf("initialize declared no %s: %s", c, init)
		}
	}
	if _, err := gw.Definitions(context.Background(), "nope", Scope{}); err == nil {
		t.Fatal("Definitions of an unknown server succeeded")
	}
}

// TestListHookGen: the List hook sees one gen for one list of a server
// (a cached list answered again, also when the call looks a tool up),
// a new gen once the server announced a change; a call carries the scope
// of the instance that runs it.
func TestListHookGen(t *testing.T) {
	launch, started := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		switch msg["method"] {
		case "tools/list":
			s.reply(msg, `{"tools":[{"name":"a","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			s.reply(msg, `{"content":[]}`)
		}
	})
	var mu sync.Mutex
	var gens []uint64
	var scopes []Scope
	gw, err := New([]*Server{{Name: "raw", Scope: ScopeSession, Launch: launch, Allow: []string{"*"}}}, Options{Hooks: Hooks{
		List: func(_, _, kind string, gen uint64, items []Item) []Item {
			if kind == KindTools {
				mu.Lock()
				gens = append(gens, gen)
				mu.Unlock()
			}
			return items
		},
		Call: func(ctx context.Context, c *Call, next func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
			mu.Lock()
			scopes = append(scopes, c.Scope, Scope{Agent: c.Agent, Session: c.Session})
			mu.Unlock()
			return next(ctx)
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	c := newRawClient(t, gw)
	c.call("tools/list", nil)
	c.call("tools/call", map[string]any{"name": "a"})
	c.call("tools/list", nil)
	started()[0].send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
	deadline := time.Now().Add(5 * time.Second)
	for !hasNote(c.notes, "notifications/tools/list_changed") {
		if time.Now().After(deadline) {
			t.Fatalf("no tools/list_changed; notes %v", c.notes)
		}
		c.call("ping", nil)
	}
	c.call("tools/list", nil)
	mu.Lock()
	defer mu.Unlock()
	if len(gens) != 4 || gens[0] == 0 || gens[1] != gens[0] || gens[2] != gens[0] || gens[3] == gens[0] {
		t.Errorf("gens %v: want one gen for the cached list (list, call, list), another after list_changed", gens)
	}
	if len(scopes) != 2 || scopes[0] != scopes[1] || scopes[0].Session == "" {
		t.Errorf("call scope %+v, want the session's own (agent and gateway session id)", scopes)
	}
}

// TestUnknownHookCancelledBeforeLookup: a call cancelled while its
// server's tools are still being listed never reaches the server, and the
// Unknown hook is told (UnknownCancelled), so that the audit has its one
// record per call.
func TestUnknownHookCancelledBeforeLookup(t *testing.T) {
	launch, started := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/call" {
			s.reply(msg, `{"content":[]}`)
		} // tools/list is never answered
	})
	whys := make(chan string, 4)
	gw, err := New([]*Server{{Name: "raw", Launch: launch, Allow: []string{"*"}}}, Options{Hooks: Hooks{
		List: func(_, _, _ string, _ uint64, items []Item) []Item { return items },
		Unknown: func(c *Call, why string) {
			whys <- c.Server + "/" + c.Tool + ": " + why
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	c := newRawClient(t, gw)
	c.w.Write([]byte(`{"jsonrpc":"2.0","id":100,"method":"tools/call","params":{"name":"probe","arguments":{}}}` + "\n"))
	time.Sleep(50 * time.Millisecond) // the call waits for tools/list
	c.notify("notifications/cancelled", map[string]any{"requestId": 100})
	select {
	case got := <-whys:
		if want := "raw/probe: " + UnknownCancelled; got != want {
			t.Errorf("Unknown hook: %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call reached no hook")
	}
	if n := len(started()[0].received("tools/call")); n != 0 {
		t.Errorf("the server saw %d calls", n)
	}
	if resp, _ := c.call("ping", nil); resp["result"] == nil {
		t.Errorf("ping after the cancelled call: %v", resp)
	}
}

// TestOversizedRequestAnswered: a request over the message limit is not
// passed on, and its sender gets an error under its id (read from the
// line's start or end) instead of waiting for ever; the session goes on.
func TestOversizedRequestAnswered(t *testing.T) {
	launch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {})
	gw, err := New([]*Server{{Name: "raw", Launch: launch, Allow: []string{"*"}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	c := newRawClient(t, gw)
	big := strings.Repeat("A", DefaultMaxMessage)
	for id, line := range map[int]string{
		50: `{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{"name":"t","arguments":{"x":"` + big + `"}}}`,
		51: `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t","arguments":{"x":"` + big + `"}},"id":51}`,
	} {
		go c.w.Write([]byte(line + "\n"))
		deadline := time.After(20 * time.Second)
	wait:
		for {
			select {
			case msg, ok := <-c.lines:
				<-c.rawLn
				if !ok {
					t.Fatal("the connection closed")
				}
				if v, _ := msg["id"].(float64); int(v) == id {
					e, _ := msg["error"].(map[string]any)
					if e == nil || !strings.Contains(fmt.Sprint(e["message"]), "larger than") {
						t.Errorf("id %d: %v, want an error about the size", id, msg)
					}
					break wait
				}
			case <-deadline:
				t.Fatalf("no answer to the oversized request %d", id)
			}
		}
	}
	if resp, _ := c.call("ping", nil); resp["result"] == nil {
		t.Errorf("ping after the oversized requests: %v", resp)
	}
}

// TestInvalidLinesAnswered: a line from a stdio client that is not a
// JSON-RPC message is answered as JSON-RPC 2.0 asks (-32700 for what is
// not JSON, -32600 for a batch or an object that is not a request, under
// its id when it has one, else null) instead of leaving the client
// waiting, or answering under another id; the session goes on.
func TestInvalidLinesAnswered(t *testing.T) {
	launch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {})
	gw, err := New([]*Server{{Name: "raw", Launch: launch, Allow: []string{"*"}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	c := newRawClient(t, gw)
	for _, tc := range []struct {
		line, id string
		code     float64
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/list"`, "null", -32700}, // truncated
		{`not json`, "null", -32700},
		{`[{"jsonrpc":"2.0","id":8,"method":"ping"}]`, "null", -32600},
		{`{"jsonrpc":"1.0","id":"v1","method":"ping"}`, `"v1"`, -32600},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`, "null", -32600},
		// An id alone: no request, and no response either (over HTTP too).
		{`{"jsonrpc":"2.0","id":"only"}`, `"only"`, -32600},
		{`{"jsonrpc":"2.0","id":12}`, "12", -32600},
		// Ids the go-sdk would change: answered under their own.
		{`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, "1.5", -32600},
		{`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, "9007199254740993", -32600},
		{`{"jsonrpc":"2.0","id":"\ud800","method":"ping"}`, `"\ud800"`, -32600},
		{`{"jsonrpc":"2.0","id":"x\udc00","method":"ping"}`, `"x\udc00"`, -32600},
		{`{"jsonrpc":"2.0","id":7,"\u0069d":7.5,"method":"ping"}`, "7.5", -32600}, // the last id, its name escaped
		{"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}", "null", -32600},
		{`{"jsonrpc":"2.0","id":9,"method":"ping","params":` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}`, "9", -32600},
	} {
		c.w.Write([]byte(tc.line + "\n"))
		select {
		case msg, ok := <-c.lines:
			raw := <-c.rawLn
			if !ok {
				t.Fatal("the connection closed")
			}
			var got struct {
				ID    json.RawMessage        `json:"id"`
				Error struct{ Code float64 } `json:"error"`
			}
			json.Unmarshal(raw, &got)
			if string(got.ID) != tc.id || got.Error.Code != tc.code {
				t.Errorf("%.60s: answered %s (%v), want id %s, code %v", tc.line, raw, msg, tc.id, tc.code)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%.60s: no answer", tc.line)
		}
	}
	if resp, _ := c.call("ping", nil); resp["result"] == nil {
		t.Errorf("ping after the invalid lines: %v", resp)
	}
}

// TestUnknownHookServerNotStarted: a call to a server that did not start
// for the session runs nothing, and the Unknown hook is told
// (UnknownNotStarted), so that the audit has its record.
func TestUnknownHookServerNotStarted(t *testing.T) {
	okLaunch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/list" {
			s.reply(msg, `{"tools":[]}`)
		}
	})
	down := func(context.Context, Scope) (*Process, error) { return nil, fmt.Errorf("no such program") }
	whys := make(chan string, 4)
	gw, err := New([]*Server{
		{Name: "up", Prefix: "up__", Launch: okLaunch, Allow: []string{"*"}},
		{Name: "down", Prefix: "down__", Launch: down, Allow: []string{"*"}},
	}, Options{Hooks: Hooks{Unknown: func(c *Call, why string) { whys <- c.Server + "/" + c.Tool + ": " + why }}})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	c := newRawClient(t, gw)
	resp, _ := c.call("tools/call", map[string]any{"name": "down__probe"})
	if e, _ := resp["error"].(map[string]any); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "did not start") {
		t.Fatalf("calling a tool of a server that did not start: %v", resp)
	}
	select {
	case got := <-whys:
		if want := "down/probe: " + UnknownNotStarted; got != want {
			t.Errorf("Unknown hook: %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call reached no hook")
	}
}

// TestAllowedToolNamesWithSlash: the gateway's tool filter takes "/" in a
// tool's name as an ordinary character, as the policy does: "*" lets
// "files/read" through (serve's filter is "*"), and a deny glob covers it.
func TestAllowedToolNamesWithSlash(t *testing.T) {
	srv := &Server{Allow: []string{"*"}, Deny: []string{"write*"}}
	for tool, want := range map[string]bool{"files/read": true, "read": true, "write/file": false, "../a__echo": true} {
		if got := srv.allowed(tool); got != want {
			t.Errorf("allowed(%q) = %v, want %v", tool, got, want)
		}
	}
}

// TestUnknownNameEchoBounded: the "unknown tool" error (here: a name no
// server's prefix routes) and "unknown prompt" quote the name the client
// sent cut short (it may be megabytes), as valid UTF-8, and not through
// the servers' filters: it is the client's own text, and a redacted echo
// would confirm a guessed secret's value.
func TestUnknownNameEchoBounded(t *testing.T) {
	launch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/list" {
			s.reply(msg, `{"tools":[{"name":"ok","inputSchema":{"type":"object"}}]}`)
		}
	})
	var filtered atomic.Int32
	gw, err := New([]*Server{{Name: "raw", Prefix: "raw__", Launch: launch, Allow: []string{"*"}}}, Options{Hooks: Hooks{
		Filter: func(_ string, raw []byte) []byte {
			if bytes.Contains(raw, []byte("s3cret-value")) {
				filtered.Add(1)
			}
			return bytes.ReplaceAll(raw, []byte("s3cret-value"), []byte("[REDACTED]"))
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	c := newRawClient(t, gw)
	name := "nosuch__x-s3cret-value-" + strings.Repeat("é", 100_000)
	for _, req := range []struct{ method, what string }{{"tools/call", "tool"}, {"prompts/get", "prompt"}} {
		resp, raw := c.call(req.method, map[string]any{"name": name})
		e, _ := resp["error"].(map[string]any)
		msg := fmt.Sprint(e["message"])
		if !strings.HasPrefix(msg, `unknown `+req.what+` "nosuch__x-s3cret-value-é`) || len(msg) > 2*maxEchoName || !utf8.ValidString(msg) {
			t.Errorf("%s: error (%d bytes): %.300s", req.method, len(raw), msg)
		}
	}
	if n := filtered.Load(); n != 0 {
		t.Errorf("the client's name went through the servers' filters %d times", n)
	}
}
