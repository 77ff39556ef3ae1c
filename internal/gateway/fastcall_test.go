package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sjson "github.com/segmentio/encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fastServer answers by tool name, so that one script covers what a
// tools/call can come back with.
func fastServer(s *rawServer, msg map[string]any) {
	switch msg["method"] {
	case "tools/list":
		var tools []string
		for _, n := range []string{"t", "err", "rpcerr", "nf", "secret", "big", "spaced", "html", "slow", "progress", "denied", "hookerr", "hidden"} {
			tools = append(tools, `{"name":"`+n+`","inputSchema":{"type":"object"}}`)
		}
		s.reply(msg, `{"tools":[`+strings.Join(tools, ",")+`]}`)
		return
	case "tools/call":
	default:
		return
	}
	params, _ := msg["params"].(map[string]any)
	id, _ := json.Marshal(msg["id"])
	switch params["name"] {
	case "err":
		s.reply(msg, `{"content":[{"type":"text","text":"bad"}],"isError":true}`)
	case "rpcerr":
		s.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-32602,"message":"bad arg SECRET123","data":{"k":"SECRET123"}}}`)
	case "nf":
		s.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-32601,"message":"no such thing","data":1}}`)
	case "secret":
		s.reply(msg, `{"content":[{"type":"text","text":"key=SECRET123"}]}`)
	case "big":
		s.reply(msg, `{ "content" : [ {"type":"text", "text":"`+strings.Repeat("abc <&> ", 1024)+`"} ] }`)
	case "spaced":
		s.reply(msg, `{ "content" : [ {"type" : "text", "text" : "a b"} ] , "x":[1, 2] }`)
	case "html":
		s.reply(msg, `{"content":[{"type":"text","text":"<b>&amp;</b> \u003c"}]}`)
	case "slow":
		// No answer: the client cancels it.
	case "progress":
		meta, _ := params["_meta"].(map[string]any)
		tok, _ := json.Marshal(meta["progressToken"])
		s.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + string(tok) + `,"progress":1,"total":2,"message":"half"}}`)
		s.reply(msg, `{"content":[{"type":"text","text":"done"}]}`)
	default:
		s.reply(msg, `{"content":[{"type":"text","text":"pong"}]}`)
	}
}

// fastHooks are a policy (deny, error), a pin list (hidden) and a
// redaction, so that each of them is seen on both paths.
func fastHooks() Hooks {
	return Hooks{
		Filter: func(_ string, raw []byte) []byte {
			return bytes.ReplaceAll(raw, []byte("SECRET123"), []byte("[redacted]"))
		},
		Call: func(ctx context.Context, c *Call, next func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
			switch c.Tool {
			case "denied":
				return Refusal("mcpbox: denied by policy", map[string]any{"rule": "deny"}), nil
			case "hookerr":
				return nil, errors.New("hook failed")
			}
			return next(ctx)
		},
		List: func(_, _, _ string, _ uint64, items []Item) []Item {
			return slices.DeleteFunc(items, func(it Item) bool { return it.Key == "hidden" })
		},
	}
}

// fastClient is a stdio client of its own gateway that sends raw lines.
type fastClient struct {
	t     *testing.T
	gw    *Gateway
	w     io.WriteCloser
	lines chan string
	srvs  func() []*rawServer // the server, to wait for a call to reach it

	logMu sync.Mutex
	logs  bytes.Buffer // the gateway's log; guarded by logMu
}

// log is what the gateway has logged so far.
func (c *fastClient) log() string {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	return c.logs.String()
}

func newFastClient(t *testing.T, slowStdio bool) *fastClient {
	return newFastClientWith(t, slowStdio, fastServer, fastHooks())
}

// newFastClientWith is newFastClient with a server and hooks of the
// test's.
func newFastClientWith(t *testing.T, slowStdio bool, handle func(*rawServer, map[string]any), hooks Hooks) *fastClient {
	launch, started := rawLauncher(t, handle)
	c := &fastClient{t: t, lines: make(chan string, 1024), srvs: started}
	gw, err := New([]*Server{{Name: "raw", Prefix: "raw_", Launch: launch, Allow: []string{"*"}, Restart: RestartNo}},
		Options{Version: "test", Hooks: hooks, Logger: slog.New(slog.NewTextHandler(lockedWriter{&c.logMu, &c.logs}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	gw.slowStdio = slowStdio
	t.Cleanup(func() { gw.Close() })
	cInR, cInW := io.Pipe()
	cOutR, cOutW := io.Pipe()
	c.gw, c.w = gw, cInW
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- gw.ServeStdio(ctx, LocalAgent, cInR, cOutW) }()
	go func() {
		defer close(c.lines)
		r := bufio.NewReaderSize(cOutR, 1<<20)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			c.lines <- line
		}
	}()
	t.Cleanup(func() {
		cInW.Close()
		cancel()
		select {
		case <-errc:
		case <-time.After(10 * time.Second):
			t.Error("ServeStdio did not return")
		}
		cOutR.Close()
	})
	return c
}

// send writes line and returns every line the gateway writes until a
// response with each of ids has come, sorted (two answers may come in
// either order); ids of dropped requests are never awaited.
func (c *fastClient) send(line string, ids ...string) []string {
	c.t.Helper()
	if line != "" {
		if _, err := io.WriteString(c.w, line+"\n"); err != nil {
			c.t.Fatal(err)
		}
	}
	var got []string
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	timeout := time.After(20 * time.Second)
	for len(want) > 0 {
		select {
		case l, ok := <-c.lines:
			if !ok {
				c.t.Fatalf("connection closed waiting for %v after %s", ids, line)
			}
			got = append(got, l)
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal([]byte(l), &m) == nil && m.Method == "" {
				delete(want, string(m.ID))
			}
		case <-timeout:
			c.t.Fatalf("no response %v to %.200s (got %.200q)", ids, line, got)
		}
	}
	slices.Sort(got)
	return got
}

const fastInit = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func fastCall(id, params string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`
}

// fastStep is what a client sends, step by step: a line and the ids
// whose responses end the step (none: a ping after it shows that
// nothing came back); slow: wait until the server has the slow call.
type fastStep struct {
	line string
	ids  []string
	slow bool
}

func fastScript() []fastStep {
	big := `"` + strings.Repeat("x", DefaultMaxMessage) + `"`
	return []fastStep{
		// Before initialize: the SDK's refusal on both paths.
		{line: fastCall("1", `{"name":"raw_t","arguments":{}}`), ids: []string{"1"}},
		{line: fastInit, ids: []string{"0"}},
		{line: `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{line: fastCall("2", `{"name":"raw_t","arguments":{"x":1}}`), ids: []string{"2"}},
		{line: fastCall(`"s-1"`, `{"name":"raw_t","arguments":{"q":"<a & b>"}}`), ids: []string{`"s-1"`}},
		{line: fastCall(`"q\"\u00e9"`, `{"name":"raw_t"}`), ids: []string{`"q\"é"`}},
		{line: fastCall("3", `{"name":"raw_err","arguments":{}}`), ids: []string{"3"}},
		{line: fastCall("4", `{"name":"raw_rpcerr","arguments":{}}`), ids: []string{"4"}},
		{line: fastCall("5", `{"name":"raw_nf","arguments":{}}`), ids: []string{"5"}},
		{line: fastCall("6", `{"name":"raw_nope","arguments":{}}`), ids: []string{"6"}},
		{line: fastCall("7", `{"name":"nope","arguments":{}}`), ids: []string{"7"}},
		{line: fastCall("8", `{"name":"raw_hidden","arguments":{}}`), ids: []string{"8"}},
		{line: fastCall("9", `{"name":"raw_denied","arguments":{}}`), ids: []string{"9"}},
		{line: fastCall("10", `{"name":"raw_hookerr","arguments":{}}`), ids: []string{"10"}},
		{line: fastCall("11", `{"name":"raw_secret","arguments":{}}`), ids: []string{"11"}},
		{line: fastCall("12", `{"name":"raw_big","arguments":{}}`), ids: []string{"12"}},
		{line: fastCall("13", `{"name":"raw_spaced","arguments":{}}`), ids: []string{"13"}},
		{line: fastCall("14", `{"name":"raw_html","arguments":{}}`), ids: []string{"14"}},
		{line: fastCall("15", `{"name":"raw_progress","arguments":{},"_meta":{"progressToken":"p1"}}`), ids: []string{"15"}},
		// A token float64 cannot hold: no note names another (2^53).
		{line: fastCall("16", `{"name":"raw_progress","arguments":{},"_meta":{"progressToken":9007199254740993}}`), ids: []string{"16"}},
		// Malformed params: the SDK answers on both paths.
		{line: fastCall("20", `{"name":5}`), ids: []string{"20"}},
		{line: fastCall("21", `[1,2]`), ids: []string{"21"}},
		{line: fastCall("22", `null`), ids: []string{"22"}},
		{line: `{"jsonrpc":"2.0","id":23,"method":"tools/call"}`, ids: []string{"23"}},
		{line: fastCall("24", `{"Name":"raw_t"}`), ids: []string{"24"}},
		{line: fastCall("25", `{"name":"raw_t","arguments":"x"}`), ids: []string{"25"}},
		{line: fastCall("26", `{"name":"raw_t","_meta":5}`), ids: []string{"26"}},
		{line: fastCall("27", `{"name":"raw_t","arguments":`+strings.Repeat("[", 998)+strings.Repeat("]", 998)+`}`), ids: []string{"27"}},
		{line: fastCall("27", strings.Repeat("[", 1001)+strings.Repeat("]", 1001))}, // too deep: dropped
		// Over the message limit: dropped, and the session goes on.
		{line: fastCall("28", `{"name":"raw_t","arguments":{"x":`+big+`}}`)},
		{line: `{"jsonrpc":"2.0","id":29,"method":"ping"}`, ids: []string{"29"}},
		// A 2026-07-28 request on a legacy session: the SDK's.
		{line: fastCall("30", `{"name":"raw_t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`), ids: []string{"30"}},
		// Cancelled mid-call: not answered.
		{line: fastCall("40", `{"name":"raw_slow","arguments":{}}`), slow: true},
		{line: fastCall("40", `{"name":"raw_t","arguments":{}}`)}, // id in use: dropped
		{line: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":40,"reason":"user"}}`},
		{line: fastCall("41", `{"name":"raw_t","arguments":{}}`), ids: []string{"41"}},
	}
}

// TestFastCallsMatchSDK: the fast path writes the bytes the SDK's path
// writes, for every kind of answer a tools/call can get.
func TestFastCallsMatchSDK(t *testing.T) {
	run := func(slow bool) [][]string {
		c := newFastClient(t, slow)
		var out [][]string
		for i, st := range fastScript() {
			switch {
			case st.slow:
				io.WriteString(c.w, st.line+"\n")
				c.waitCallNamed("slow", 1)
			case len(st.ids) == 0:
				io.WriteString(c.w, st.line+"\n")
				out = append(out, c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"ping-%d","method":"ping"}`, i), fmt.Sprintf(`"ping-%d"`, i)))
			default:
				out = append(out, c.send(st.line, st.ids...))
			}
		}
		if slow && c.gw.fastCalls.Load() != 0 {
			t.Errorf("slowStdio: %d calls took the fast path", c.gw.fastCalls.Load())
		}
		for _, s := range c.srvs() {
			s.mu.Lock()
			seen, _ := json.Marshal(s.seen)
			s.mu.Unlock()
			if strings.Contains(string(seen), "9007199254740992") {
				t.Error("the server saw the client's progress token")
			}
		}
		if !slow && c.gw.fastCalls.Load() == 0 {
			t.Error("no call took the fast path")
		}
		return out
	}
	sdk, fast := run(true), run(false)
	if len(sdk) != len(fast) {
		t.Fatalf("%d steps answered on the SDK path, %d on the fast path", len(sdk), len(fast))
	}
	for i := range sdk {
		if !slices.Equal(sdk[i], fast[i]) {
			t.Errorf("step %d:\n sdk:  %.600q\n fast: %.600q", i, sdk[i], fast[i])
		}
	}
	// Spot checks that the script means what it says.
	all := strings.Join(slices.Concat(fast...), "")
	for _, want := range []string{`"[redacted]"`, `key=[redacted]`, `method not found: \"tools/call\"`, `"pong"`, `"half"`, `is invalid during session initialization`} {
		if !strings.Contains(all, want) {
			t.Errorf("no %s in the answers", want)
		}
	}
	if strings.Contains(all, "SECRET123") {
		t.Error("a secret reached the client")
	}
	if strings.Contains(all, "9007199254740992") {
		t.Error("a progress note with the token 2^53 for a call that sent 2^53+1")
	}
	if strings.Contains(all, `"id":40,`) {
		t.Error("the cancelled call was answered")
	}
}

// waitCallNamed waits until the server has received n tools/calls of name.
func (c *fastClient) waitCallNamed(name string, n int) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		got := 0
		if s := c.srvs(); len(s) > 0 {
			for _, m := range s[0].received("tools/call") {
				if p, _ := m["params"].(map[string]any); p["name"] == name {
					got++
				}
			}
		}
		if got >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	var seen []any
	for _, s := range c.srvs() {
		for _, m := range s.received("tools/call") {
			seen = append(seen, m["params"])
		}
	}
	c.t.Fatalf("the server did not get call %s #%d (got %.300v)", name, n, seen)
}

// TestFastCallsTaken fails when tools/calls silently stop taking the fast
// path (and so the benchmarks measure the SDK's).
func TestFastCallsTaken(t *testing.T) {
	if fastOff {
		t.Skip("MCPGODEBUG is set: the fast path is off")
	}
	c := newFastClient(t, false)
	// A refused initialize first: the one that succeeds makes it ready.
	c.send(`{"jsonrpc":"2.0","id":"i","method":"initialize","params":5}`, `"i"`)
	c.send(fastInit, "0")
	for i := range 5 {
		got := c.send(fastCall(fmt.Sprint(100+i), `{"name":"raw_t","arguments":{}}`), fmt.Sprint(100+i))
		if len(got) != 1 || !strings.Contains(got[0], `"pong"`) {
			t.Fatalf("call %d: %q", i, got)
		}
	}
	if n := c.gw.fastCalls.Load(); n != 5 {
		t.Fatalf("%d of 5 calls took the fast path", n)
	}
}

// FuzzFastParams: the fast path takes exactly the tools/call params the
// SDK would decode (its Unmarshal: a depth check, then a decoder with
// exact key matching, into its type), and decodes them to the same
// value; what it leaves, the SDK answers.
func FuzzFastParams(f *testing.F) {
	for _, s := range []string{
		`{"name":"t","arguments":{"x":1}}`, `{"name":"t"}`, `null`, `[1]`, `{"name":5}`,
		`{"Name":"t"}`, `{"name":"t","_meta":{"progressToken":1}}`, ` {"name":"t"} `,
		`{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
		`{"name":"t","arguments":"x","requestState":"s","inputResponses":{"a":{}}}`,
		`{"name":"t","_meta":5}`, `{"name":"\u0074","x":[[[]]]}`, `"s"`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // a message's params are always one valid value
		}
		var want *mcp.CallToolParamsRaw
		sdkErr := checkDepth(raw, maxDepth)
		if sdkErr == nil {
			dec := sjson.NewDecoder(bytes.NewReader(raw))
			dec.DontMatchCaseInsensitiveStructFields()
			sdkErr = dec.Decode(&want)
		}
		got := fastParams(raw)
		take := sdkErr == nil && want != nil
		if take {
			_, modern := want.Meta[mcp.MetaKeyProtocolVersion]
			take = !modern
		}
		if take != (got != nil) {
			t.Fatalf("%q: fast path takes it %v, the SDK decodes it %v (%v)", raw, got != nil, want != nil, sdkErr)
		}
		if take && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: fast %#v, SDK %#v", raw, got, want)
		}
	})
}

// bufCloser is a buffer for a stdioConn's output.
type bufCloser struct{ *bytes.Buffer }

func (bufCloser) Close() error { return nil }

// TestWriteRawOneLine: a large result with line breaks in it (a remote
// server's pretty-printed body) still goes out as one line, on both
// paths, so that no line of it passes for a message.
func TestWriteRawOneLine(t *testing.T) {
	forged := `{"jsonrpc":"2.0","id":5,"result":{"content":[]}}`
	raw := json.RawMessage("{\r\n \"a\":\n" + forged + ",\n \"pad\": \"" + strings.Repeat("x", swapMin) + "\"\n}")
	var out bytes.Buffer
	c := &stdioConn{t: &stdioTransport{w: bufCloser{&out}, swaps: newSwapTable()}}
	rid, _ := jsonrpc.MakeID(float64(7))
	if err := c.writeRaw(rid, raw); err != nil {
		t.Fatal(err)
	}
	c.writeFast(&jsonrpc.Response{ID: rid}, raw)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2: %.300q", len(lines), out.String())
	}
	for _, l := range lines {
		var m struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil || m.ID != 7 || !strings.Contains(string(m.Result), forged) {
			t.Errorf("line %.200q: %v", l, err)
		}
	}
}
