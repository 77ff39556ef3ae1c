package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// drainServer answers "later" after a while, and for "ask" asks the
// client something (elicitation) and answers once it has its answer.
func drainServer(s *rawServer, msg map[string]any) {
	switch msg["method"] {
	case "tools/list":
		s.reply(msg, `{"tools":[{"name":"later","inputSchema":{"type":"object"}},{"name":"ask","inputSchema":{"type":"object"}}]}`)
	case "tools/call":
		params, _ := msg["params"].(map[string]any)
		switch params["name"] {
		case "later":
			go func() {
				time.Sleep(300 * time.Millisecond)
				s.reply(msg, `{"content":[{"type":"text","text":"answered late"}]}`)
			}()
		case "ask":
			s.send(`{"jsonrpc":"2.0","id":"q1","method":"elicitation/create","params":{"message":"sure?","requestedSchema":{"type":"object","properties":{}}}}`)
		}
	}
}

// readToEnd returns every line the gateway writes until it closes its
// output, at most within 20 s.
func (c *fastClient) readToEnd() []string {
	c.t.Helper()
	var got []string
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				return got
			}
			got = append(got, l)
		case <-timeout:
			c.t.Fatalf("the gateway did not end its output after the client's input ended; got %q", got)
		}
	}
}

// TestStdioInputEndDrains: a client that writes its requests and closes
// its input at once (a script piping them in) still gets every answer,
// on the fast path and through the SDK; the session ends after them.
func TestStdioInputEndDrains(t *testing.T) {
	for _, slow := range []bool{false, true} {
		t.Run(fmt.Sprintf("slowStdio=%v", slow), func(t *testing.T) {
			c := newFastClientWith(t, slow, drainServer, Hooks{})
			c.send(fastInit, "0")
			var script strings.Builder
			script.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
			for i := 1; i <= 3; i++ {
				fmt.Fprintf(&script, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"raw_later","arguments":{}}}`+"\n", i)
			}
			script.WriteString(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}` + "\n")
			if _, err := io.WriteString(c.w, script.String()); err != nil {
				t.Fatal(err)
			}
			c.w.Close()
			answered := map[string]string{}
			for _, l := range c.readToEnd() {
				var m struct {
					ID     json.RawMessage `json:"id"`
					Result json.RawMessage `json:"result"`
					Error  json.RawMessage `json:"error"`
				}
				if json.Unmarshal([]byte(l), &m) == nil && m.ID != nil {
					answered[string(m.ID)] = string(m.Result) + string(m.Error)
				}
			}
			for _, id := range []string{"1", "2", "3"} {
				if !strings.Contains(answered[id], "answered late") {
					t.Errorf("call %s: %q, want its answer", id, answered[id])
				}
			}
			if !strings.Contains(answered["4"], "raw_later") {
				t.Errorf("tools/list: %q, want the tools", answered["4"])
			}
		})
	}
}

// TestStdioInputEndNoWaitForClient: a call that asks the client something
// after the client's input ended cannot be answered, so the session does
// not wait for it: it ends at once, the call cancelled.
func TestStdioInputEndNoWaitForClient(t *testing.T) {
	for _, slow := range []bool{false, true} {
		t.Run(fmt.Sprintf("slowStdio=%v", slow), func(t *testing.T) {
			c := newFastClientWith(t, slow, drainServer, Hooks{})
			c.send(strings.Replace(fastInit, `"capabilities":{}`, `"capabilities":{"elicitation":{}}`, 1), "0")
			io.WriteString(c.w, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"raw_ask","arguments":{}}}`+"\n")
			c.w.Close()
			begin := time.Now()
			got := c.readToEnd()
			if took := time.Since(begin); took > 10*time.Second {
				t.Fatalf("the session ended %v after the input; want at once", took)
			}
			if !strings.Contains(strings.Join(got, ""), "elicitation/create") {
				t.Fatalf("the client was not asked: %q", got)
			}
		})
	}
}

// TestInFlightTracks: what the client asked is open until answered or
// cancelled by the client; a request of ours to it stops a drain until
// answered or cancelled by us (the client then answers it no more).
func TestInFlightTracks(t *testing.T) {
	never := func() bool { return false }
	closed := make(chan struct{})
	id := func(v any) jsonrpc.ID {
		id, err := jsonrpc.MakeID(v)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	call := func(n float64, method string) *jsonrpc.Request {
		return &jsonrpc.Request{ID: id(n), Method: method}
	}
	cancelled := func(id any) *jsonrpc.Request {
		p, _ := json.Marshal(map[string]any{"requestId": id})
		return &jsonrpc.Request{Method: "notifications/cancelled", Params: p}
	}
	var f inFlight
	f.read(call(1, "tools/call"))
	f.read(call(2, "tools/call"))
	f.answered(id(float64(1)), nil)
	f.read(cancelled(2))
	if !f.drain(context.Background(), closed, never) {
		t.Fatal("a drain with every request answered or cancelled did not end answered")
	}

	var g inFlight
	g.read(call(3, "tools/call"))
	g.sent(&jsonrpc.Request{ID: id("q1"), Method: "elicitation/create"})
	// Until our request is out, the drain waits for it to be.
	go func() {
		time.Sleep(50 * time.Millisecond)
		g.written()
	}()
	begin := time.Now()
	if g.drain(context.Background(), closed, never) {
		t.Fatal("a drain while the client is asked something reported every answer written")
	}
	if time.Since(begin) < 40*time.Millisecond {
		t.Error("the drain gave up before our request to the client was written")
	}
	g.sent(cancelled("q1"))
	go func() {
		time.Sleep(50 * time.Millisecond)
		g.answered(id(float64(3)), nil)
	}()
	if !g.drain(context.Background(), closed, never) {
		t.Fatal("once our request was cancelled, the drain still gave up")
	}

	var h inFlight
	h.read(call(4, "tools/call"))
	if h.drain(context.Background(), closed, func() bool { return true }) {
		t.Fatal("a drain for a client gone reported every answer written")
	}
}
