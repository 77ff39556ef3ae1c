package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lateWait sets sessionStartWait (and startTimeout) for one test.
func lateWait(t *testing.T, wait, start time.Duration) {
	t.Helper()
	oldWait, oldStart := sessionStartWait, startTimeout
	sessionStartWait, startTimeout = wait, start
	t.Cleanup(func() { sessionStartWait, startTimeout = oldWait, oldStart })
}

// gated returns a Launch that starts a server with tool "y" (its call
// answers "late ran") only once gate is closed.
func gated(t *testing.T, gate <-chan struct{}) func(context.Context, Scope) (*Process, error) {
	inner, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		switch msg["method"] {
		case "tools/list":
			s.reply(msg, `{"tools":[{"name":"y","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			s.reply(msg, `{"content":[{"type":"text","text":"late ran"}]}`)
		}
	})
	return func(ctx context.Context, scope Scope) (*Process, error) {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return inner(ctx, scope)
	}
}

// withLate serves late beside a server "ok" (tool ok_t) that starts at
// once; unknown records what Hooks.Unknown is told.
func withLate(t *testing.T, late func(context.Context, Scope) (*Process, error)) (*Gateway, func() []string) {
	t.Helper()
	ok, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/list" {
			s.reply(msg, `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
		}
	})
	var mu sync.Mutex
	var told []string
	gw, err := New([]*Server{
		{Name: "ok", Prefix: "ok_", Launch: ok, Allow: []string{"*"}},
		{Name: "late", Prefix: "late_", Launch: late, Allow: []string{"*"}},
	}, Options{Version: "test", Hooks: Hooks{Unknown: func(c *Call, why string) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, c.Name+": "+why)
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return gw, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), told...)
	}
}

// listedTools is the names in a raw tools/list response.
func listedTools(resp map[string]any) []string {
	res, _ := resp["result"].(map[string]any)
	tools, _ := res["tools"].([]any)
	var names []string
	for _, tl := range tools {
		m, _ := tl.(map[string]any)
		names = append(names, fmt.Sprint(m["name"]))
	}
	return names
}

// awaitNote pings the client's session until it has had a notification
// method, at most within.
func awaitNote(t *testing.T, c *rawClient, method string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !hasNote(c.notes, method) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v; notes %v", method, within, c.notes)
		}
		time.Sleep(20 * time.Millisecond)
		c.call("ping", nil)
	}
}

// TestLateServerJoins: a server still starting after sessionStartWait
// does not hold the session's initialize once another server runs. The
// client is told it may offer tools, a call to it is refused as still
// starting (and audited), and once it runs the client gets
// tools/list_changed, its tools, and its calls.
func TestLateServerJoins(t *testing.T) {
	lateWait(t, 300*time.Millisecond, 30*time.Second)
	gate := make(chan struct{})
	gw, told := withLate(t, gated(t, gate))
	begin := time.Now()
	c := newRawClient(t, gw)
	if took := time.Since(begin); took < sessionStartWait || took > 10*time.Second {
		t.Fatalf("initialize took %v, want the wait of %v", took, sessionStartWait)
	}
	res, _ := c.init["result"].(map[string]any)
	caps, _ := res["capabilities"].(map[string]any)
	if tools, _ := caps["tools"].(map[string]any); tools["listChanged"] != true {
		t.Fatalf("initialize: %v, want tools with listChanged", c.init)
	}
	if resp, _ := c.call("tools/list", nil); fmt.Sprint(listedTools(resp)) != "[ok_t]" {
		t.Fatalf("tools/list before the late server runs: %v", resp)
	}
	resp, _ := c.call("tools/call", map[string]any{"name": "late_y"})
	e, _ := resp["error"].(map[string]any)
	if msg := fmt.Sprint(e["message"]); !strings.Contains(msg, "server late is still starting") {
		t.Fatalf("a call to the server still starting: %v", resp)
	}
	if got := told(); fmt.Sprint(got) != "[late_y: "+UnknownNotStarted+"]" {
		t.Fatalf("told Hooks.Unknown %q, want the refused call once", got)
	}

	close(gate)
	awaitNote(t, c, "notifications/tools/list_changed", 10*time.Second)
	if resp, _ := c.call("tools/list", nil); fmt.Sprint(listedTools(resp)) != "[ok_t late_y]" {
		t.Fatalf("tools/list once the late server runs: %v", resp)
	}
	if resp, raw := c.call("tools/call", map[string]any{"name": "late_y"}); !strings.Contains(string(raw), "late ran") {
		t.Fatalf("a call to the late server once it runs: %v", resp)
	}
}

// TestCallWaitsForLateServer: a call to a server that is still starting
// waits for it (at most sessionStartWait) and runs once it does.
func TestCallWaitsForLateServer(t *testing.T) {
	lateWait(t, 2*time.Second, 30*time.Second)
	gate := make(chan struct{})
	var launched atomic.Bool
	late := gated(t, gate)
	gw, _ := withLate(t, func(ctx context.Context, scope Scope) (*Process, error) {
		launched.Store(true)
		return late(ctx, scope)
	})
	c := newRawClient(t, gw)
	if !launched.Load() {
		t.Fatal("the late server was not launched")
	}
	time.AfterFunc(100*time.Millisecond, func() { close(gate) })
	if resp, raw := c.call("tools/call", map[string]any{"name": "late_y"}); !strings.Contains(string(raw), "late ran") {
		t.Fatalf("a call made while its server starts: %v", resp)
	}
}

// TestOnlyServerWaitedFor: a session whose one server is slower than
// sessionStartWait waits for it (up to startTimeout), rather than going on
// with no server.
func TestOnlyServerWaitedFor(t *testing.T) {
	lateWait(t, 200*time.Millisecond, 30*time.Second)
	gate := make(chan struct{})
	gw, err := New([]*Server{{Name: "slow", Launch: gated(t, gate), Allow: []string{"*"}}}, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	time.AfterFunc(3*sessionStartWait, func() { close(gate) })
	c := newRawClient(t, gw)
	if resp, _ := c.call("tools/list", nil); fmt.Sprint(listedTools(resp)) != "[y]" {
		t.Fatalf("initialize %v; tools/list %v: want the slow server's tool", c.init, resp)
	}
}

// TestLateHangGivesUp: a start that outlasts the session's wait goes on
// without the request that made it, and without the session, so that its
// failure still counts toward the give-up: after hangMax unanswered
// starts, each for a session that ended before it failed, the next
// session is told at once.
func TestLateHangGivesUp(t *testing.T) {
	lateWait(t, 200*time.Millisecond, time.Second)
	var hung atomic.Int32
	gw, _ := withLate(t, muteLauncher(&hung))
	for i := 1; i <= hangMax; i++ {
		begin := time.Now()
		c := newRawClient(t, gw)
		if took := time.Since(begin); took >= startTimeout {
			t.Fatalf("session %d: initialize took %v, want only the wait of %v", i, took, sessionStartWait)
		}
		c.w.Close() // the session ends; the start goes on
		time.Sleep(time.Until(begin.Add(startTimeout + 300*time.Millisecond)))
	}
	begin := time.Now()
	c := newRawClient(t, gw)
	took := time.Since(begin)
	resp, _ := c.call("tools/call", map[string]any{"name": "late_y"})
	e, _ := resp["error"].(map[string]any)
	msg := fmt.Sprint(e["message"])
	want := fmt.Sprintf("did not answer initialize within 1s, %d times in a row; giving up on it", hangMax)
	if took >= sessionStartWait || !strings.Contains(msg, want) || hung.Load() != hangMax {
		t.Fatalf("after %d late hangs: initialize took %v, the call said %q, %d starts; want it at once, %q", hangMax, took, msg, hung.Load(), want)
	}
}

// TestModernLateServerChecked: a 2026 call over HTTP to a server still
// starting, or still being set up (Server.Ready: its package installing),
// is refused, saying which, not run unchecked: its tools' Mcp-Param
// headers cannot be checked before it runs. Once it has joined, its
// calls are checked like any other.
func TestModernLateServerChecked(t *testing.T) {
	for _, setup := range []bool{false, true} {
		t.Run(fmt.Sprintf("setup=%v", setup), func(t *testing.T) {
			lateWait(t, 300*time.Millisecond, 30*time.Second)
			gate := make(chan struct{})
			late := &Server{Name: "late", Prefix: "late__", Allow: []string{"*"}}
			want := "server late is still starting"
			if setup {
				late.Ready = func() <-chan struct{} { return gate }
				want = "server late is still being set up (its package installing, a retry of its setup): the call cannot be checked"
			}
			launch := sdkLauncher(func(Scope) *mcp.Server { return hiddenServer("late") }, nil, nil)
			late.Launch = func(ctx context.Context, scope Scope) (*Process, error) {
				select {
				case <-gate:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return launch(ctx, scope)
			}
			gw := newGateway(t,
				&Server{Name: "a", Prefix: "a__", Launch: sdkLauncher(func(Scope) *mcp.Server { return metaServer("a") }, nil, nil), Allow: []string{"*"}},
				late)
			url := serveHTTP(t, gw, HTTPOptions{})
			call := func(region string) (int, string) {
				body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"late__route","arguments":{"region":"eu"},` + modernMeta + `}}`
				return post(t, url, body, map[string]string{"MCP-Protocol-Version": ModernVersion, "Mcp-Method": "tools/call", "Mcp-Name": "late__route", "Mcp-Param-Region": region})
			}
			if status, body := call("us"); strings.Contains(body, "routed") || !strings.Contains(body, "-32000") || !strings.Contains(body, want) {
				t.Fatalf("a call while its server starts: %d %s; want it refused as not checkable yet: %q", status, body, want)
			}
			close(gate)
			deadline := time.Now().Add(10 * time.Second)
			for {
				status, body := call("us")
				if strings.Contains(body, "routed") {
					t.Fatalf("a call whose header does not match, once its server runs: %d %s; want it refused", status, body)
				}
				if strings.Contains(body, "-32020") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the late server did not join: %d %s", status, body)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if status, body := call("eu"); status != http.StatusOK || !strings.Contains(string(sseResult(t, body)), "routed") {
				t.Fatalf("a matching call once the server runs: %d %s", status, body)
			}
		})
	}
}

// TestCloseWaitsForLateStart: Close returns only once a start still under
// way (a server that joins late) has stopped what it launched, so that no
// sandbox outlives the gateway; also the start of a session-scope server
// whose session ended first, which the session's end does not wait for.
func TestCloseWaitsForLateStart(t *testing.T) {
	for _, scope := range []string{ScopeShared, ScopeSession} {
		t.Run(scope, func(t *testing.T) {
			lateWait(t, 200*time.Millisecond, 30*time.Second)
			var hung atomic.Int32
			var stopped atomic.Bool
			mute := muteLauncher(&hung)
			ok, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
				if msg["method"] == "tools/list" {
					s.reply(msg, `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
				}
			})
			gw, err := New([]*Server{
				{Name: "ok", Prefix: "ok_", Launch: ok, Allow: []string{"*"}},
				{Name: "late", Prefix: "late_", Scope: scope, Allow: []string{"*"}, Launch: func(ctx context.Context, sc Scope) (*Process, error) {
					p, err := mute(ctx, sc)
					if err == nil {
						stop := p.Stop
						p.Stop = func() {
							time.Sleep(200 * time.Millisecond) // a sandbox takes a while to stop
							stop()
							stopped.Store(true)
						}
					}
					return p, err
				}},
			}, Options{Version: "test"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { gw.Close() })
			c := newRawClient(t, gw)
			if hung.Load() != 1 {
				t.Fatalf("%d starts of the late server, want 1", hung.Load())
			}
			if scope == ScopeSession {
				c.w.Close()
				waitFor(t, 5*time.Second, "the session's end", func() bool {
					gw.mu.Lock()
					defer gw.mu.Unlock()
					return len(gw.sessions) == 0
				})
				if stopped.Load() {
					t.Fatal("the session's end waited for the late server's stop")
				}
			}
			gw.Close()
			if !stopped.Load() {
				t.Fatal("Close returned while the late server's process ran")
			}
		})
	}
}

// TestSettingUpServerJoins: a server still being set up (Server.Ready
// open: its package installing) does not hold the session's initialize
// once another server runs, and its wait for the setup is not bounded by
// the start timeout: set up well after that, it starts, and joins the
// session with tools/list_changed.
func TestSettingUpServerJoins(t *testing.T) {
	lateWait(t, 20*time.Second, 500*time.Millisecond)
	ok, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/list" {
			s.reply(msg, `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
		}
	})
	ready := make(chan struct{})
	var launched atomic.Bool
	late := gated(t, ready)
	gw, err := New([]*Server{
		{Name: "ok", Prefix: "ok_", Launch: ok, Allow: []string{"*"}},
		{Name: "late", Prefix: "late_", Ready: func() <-chan struct{} { return ready }, Allow: []string{"*"}, Launch: func(ctx context.Context, scope Scope) (*Process, error) {
			launched.Store(true)
			return late(ctx, scope)
		}},
	}, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	begin := time.Now()
	c := newRawClient(t, gw)
	if took := time.Since(begin); took >= sessionStartWait/2 {
		t.Fatalf("initialize took %v: it waited for the server being set up", took)
	}
	if resp, _ := c.call("tools/list", nil); fmt.Sprint(listedTools(resp)) != "[ok_t]" {
		t.Fatalf("tools/list while the late server is set up: %v", resp)
	}
	// A call to it is refused at once, saying why: a setup takes minutes.
	begin = time.Now()
	resp, _ := c.call("tools/call", map[string]any{"name": "late_y"})
	e, _ := resp["error"].(map[string]any)
	if msg := fmt.Sprint(e["message"]); !strings.Contains(msg, "server late is still being set up") || time.Since(begin) >= sessionStartWait/2 {
		t.Fatalf("a call to the server being set up, after %v: %v", time.Since(begin), resp)
	}
	time.Sleep(3 * startTimeout)
	if launched.Load() {
		t.Fatal("launched before its setup ended")
	}
	close(ready)
	awaitNote(t, c, "notifications/tools/list_changed", 10*time.Second)
	if resp, _ := c.call("tools/list", nil); fmt.Sprint(listedTools(resp)) != "[ok_t late_y]" {
		t.Fatalf("tools/list once the set-up server runs: %v", resp)
	}
}

// TestOnlySettingUpServerJoins: when every server is being set up (a
// first start whose packages all install for minutes), the session
// opens with none after sessionStartWait, offering list_changed, rather
// than hold initialize until the client gives up (which ends a stdio
// client's serve and the install with it); the server joins once set
// up.
func TestOnlySettingUpServerJoins(t *testing.T) {
	lateWait(t, 300*time.Millisecond, 500*time.Millisecond)
	ready := make(chan struct{})
	gw := newGateway(t, &Server{Name: "late", Prefix: "late_", Ready: func() <-chan struct{} { return ready }, Allow: []string{"*"}, Launch: gated(t, ready)})
	begin := time.Now()
	c := newRawClient(t, gw)
	if took := time.Since(begin); took < sessionStartWait || took > 10*time.Second {
		t.Fatalf("initialize took %v, want the wait of %v", took, sessionStartWait)
	}
	if caps := fmt.Sprint(c.init["result"]); !strings.Contains(caps, "tools:map[listChanged:true]") {
		t.Fatalf("initialize with the server being set up: %v, want tools with listChanged", c.init)
	}
	if resp, _ := c.call("tools/list", nil); len(listedTools(resp)) != 0 || resp["error"] != nil {
		t.Fatalf("tools/list while the only server is set up: %v", resp)
	}
	close(ready)
	awaitNote(t, c, "notifications/tools/list_changed", 10*time.Second)
	if resp, _ := c.call("tools/list", nil); fmt.Sprint(listedTools(resp)) != "[late_y]" {
		t.Fatalf("tools/list once the set-up server runs: %v", resp)
	}
	if resp, _ := c.call("tools/call", map[string]any{"name": "late_y"}); !strings.Contains(fmt.Sprint(resp["result"]), "late ran") {
		t.Fatalf("a call to the joined server: %v", resp)
	}
}

// TestNoListChangedBeforeInitializeAnswer: a list_changed that comes up
// while the session opens (a server's own at its start, a server joining
// just then) reaches the client after the initialize answer, never
// before it: the answer goes out only once the gateway's handler has
// returned, and the session's sender may already run.
func TestNoListChangedBeforeInitializeAnswer(t *testing.T) {
	launch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		switch msg["method"] {
		case "notifications/initialized":
			s.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
		case "tools/list":
			s.reply(msg, `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
		}
	})
	gw := newGateway(t, &Server{Name: "raw", Scope: ScopeSession, Launch: launch, Allow: []string{"*"}})
	for i := range 3 {
		c := newRawClient(t, gw)
		if len(c.notes) > 0 {
			t.Fatalf("session %d: %v came before the initialize answer", i, c.notes)
		}
		awaitNote(t, c, "notifications/tools/list_changed", 10*time.Second)
	}
}

// TestLateFailureTold: a server that fails after the session opened
// without it (its package's install failed once serve went on) is not
// only in serve's log: the client is sent a log message saying why.
func TestLateFailureTold(t *testing.T) {
	lateWait(t, 300*time.Millisecond, 500*time.Millisecond)
	ok, _ := rawLauncher(t, nil)
	ready := make(chan struct{})
	gw := newGateway(t,
		&Server{Name: "ok", Prefix: "ok_", Launch: ok, Allow: []string{"*"}},
		&Server{Name: "late", Prefix: "late_", Ready: func() <-chan struct{} { return ready }, Allow: []string{"*"},
			Launch: func(context.Context, Scope) (*Process, error) {
				return nil, errors.New("npm package @x/late: registry unreachable")
			}})
	c := newRawClient(t, gw)
	close(ready)
	awaitNote(t, c, "notifications/message", 10*time.Second)
	var got string
	for _, n := range c.notes {
		if n["method"] == "notifications/message" {
			got = fmt.Sprint(n["params"])
		}
	}
	if !strings.Contains(got, "level:error") || !strings.Contains(got, "server late did not start for this session") || !strings.Contains(got, "registry unreachable") {
		t.Fatalf("the client's log message: %s", got)
	}
}
