package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFastCallsIDAttacks: a hostile stdio client's ids cannot make the
// fast path answer the wrong request, run a call the SDK would drop, or
// cancel another call: the numeric id 1 and the string id "1" are two
// calls, each cancelled only by its own id; a tools/call reusing an id
// the SDK has in flight never reaches the server; a cancellation of an
// id nobody has, or of the SDK's, leaves the fast calls running.
func TestFastCallsIDAttacks(t *testing.T) {
	if fastOff {
		t.Skip("MCPGODEBUG is set: the fast path is off")
	}
	c := newFastClient(t, false)
	c.send(fastInit, "0")
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	io.WriteString(c.w, fastCall("1", `{"name":"raw_slow","arguments":{"n":"num"}}`)+"\n")
	io.WriteString(c.w, fastCall(`"1"`, `{"name":"raw_slow","arguments":{"n":"str"}}`)+"\n")
	c.waitCallNamed("slow", 2)
	// The same ids again, while in flight: dropped, never run.
	io.WriteString(c.w, fastCall("1", `{"name":"raw_t","arguments":{}}`)+"\n")
	io.WriteString(c.w, fastCall(`"1"`, `{"name":"raw_t","arguments":{}}`)+"\n")
	io.WriteString(c.w, fastCall("1.0", `{"name":"raw_t","arguments":{}}`)+"\n")
	// Cancellations of ids no call has.
	for _, id := range []string{`"01"`, `0.5`, `2`, `null`, `" 1"`, `true`, `{"a":1}`, `[1]`} {
		io.WriteString(c.w, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+id+`}}`+"\n")
	}
	got := c.send(`{"jsonrpc":"2.0","id":"p1","method":"ping"}`, `"p1"`)
	if len(got) != 1 {
		t.Fatalf("a dropped call or a cancellation was answered: %q", got)
	}
	// Dropped, but not unseen: the operator learns of the buggy client.
	if n := strings.Count(c.log(), "reused the id of a request still in flight"); n != 3 {
		t.Errorf("%d warnings of a reused id, want 3:\n%s", n, c.log())
	}
	// The string id cancels its own call only, and neither is answered:
	// the receiver of a cancellation does not answer.
	io.WriteString(c.w, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"1"}}`+"\n")
	waitFor(t, 10*time.Second, "the cancelled call ending", func() bool { return c.fastInFlight() == 1 })
	io.WriteString(c.w, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`+"\n")
	waitFor(t, 10*time.Second, "the cancelled call ending", func() bool { return c.fastInFlight() == 0 })
	got = c.send(`{"jsonrpc":"2.0","id":"p2","method":"ping"}`, `"p2"`)
	if len(got) != 1 {
		t.Fatalf("a cancelled call was answered: %q", got)
	}
	// The freed ids can be used again, and each is answered once.
	got = c.send(fastCall("1", `{"name":"raw_t","arguments":{}}`), "1")
	if len(got) != 1 || !strings.Contains(got[0], "pong") {
		t.Fatalf("id 1 again: %q", got)
	}
	if n := c.countCalls("t"); n != 1 {
		t.Fatalf("the server ran %d calls of t, want 1 (a dropped duplicate ran)", n)
	}
}

// fastInFlight is how many fast calls the gateway has in flight.
func (c *fastClient) fastInFlight() int {
	c.gw.mu.Lock()
	defer c.gw.mu.Unlock()
	n := 0
	for d := range c.gw.sessions {
		if f := d.fast; f != nil {
			f.mu.Lock()
			n += len(f.calls)
			f.mu.Unlock()
		}
	}
	return n
}

// countCalls is how many tools/calls of name the server has received.
func (c *fastClient) countCalls(name string) int {
	n := 0
	if s := c.srvs(); len(s) > 0 {
		for _, m := range s[0].received("tools/call") {
			if p, _ := m["params"].(map[string]any); p["name"] == name {
				n++
			}
		}
	}
	return n
}

// TestFastCallsStorm: many concurrent calls and cancellations with
// colliding ids, from writers racing on the one input (run with -race):
// every answered id is answered once, on a line of its own, and the
// session ends cleanly (the test's cleanup waits for ServeStdio).
func TestFastCallsStorm(t *testing.T) {
	if fastOff {
		t.Skip("MCPGODEBUG is set: the fast path is off")
	}
	c := newFastClient(t, false)
	c.send(fastInit, "0")
	var mu sync.Mutex
	write := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		io.WriteString(c.w, s+"\n")
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				id := fmt.Sprint(g*1000 + i)
				name := "raw_t"
				if i%3 == 0 {
					name = "raw_slow"
				}
				write(fastCall(id, `{"name":"`+name+`","arguments":{}}`))
				write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `}}`)
				write(fastCall(`"`+id+`"`, `{"name":"raw_t","arguments":{}}`))
			}
		}()
	}
	wg.Wait()
	write(`{"jsonrpc":"2.0","id":"end","method":"ping"}`)
	seen := map[string]int{}
	deadline := time.After(30 * time.Second)
	for seen[`"end"`] == 0 {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatal("the connection closed")
			}
			if !strings.HasPrefix(l, `{"jsonrpc":"2.0",`) || strings.Count(l, "\n") != 1 {
				t.Fatalf("a torn or merged line: %.300q", l)
			}
			i := strings.Index(l, `"id":`)
			if i < 0 {
				continue
			}
			rest := l[i+5:]
			id := rest[:strings.IndexAny(rest, ",}")]
			seen[id]++
			if seen[id] > 1 {
				t.Fatalf("id %s answered twice", id)
			}
		case <-deadline:
			t.Fatalf("no answer to the last ping (%d answers)", len(seen))
		}
	}
}

// TestFilteredResultStaysJSON: a filter (the redactor) that breaks a
// result's JSON (a secret whose value is JSON text, matched across the
// result's structure: `{"":"\"a` in `{"":"\"a"}`) never sends the
// client a line that is not JSON, nor leaves the call unanswered: on
// both paths, small (the SDK's marshalling refused it and the call got
// no answer) and large (written as is: an invalid line on the wire), the
// client gets an error; a server's error whose data is broken so goes
// out without its data.
func TestFilteredResultStaysJSON(t *testing.T) {
	server := func(s *rawServer, msg map[string]any) {
		switch msg["method"] {
		case "tools/list":
			s.reply(msg, `{"tools":[{"name":"small","inputSchema":{"type":"object"}},{"name":"big","inputSchema":{"type":"object"}},{"name":"rpcerr","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			params, _ := msg["params"].(map[string]any)
			if params["name"] == "rpcerr" {
				id, _ := json.Marshal(msg["id"])
				s.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-32602,"message":"bad","data":{"k":"SECRET","j":"\"],\"x\":1}"}}}`)
				return
			}
			pad := ""
			if params["name"] == "big" {
				pad = strings.Repeat("p", 8<<10)
			}
			s.reply(msg, `{"content":[{"type":"text","text":"`+pad+`"}],"structuredContent":{"k":"SECRET","j":"\"],\"x\":1}"}}`)
		}
	}
	hooks := Hooks{Filter: func(_ string, raw []byte) []byte {
		return bytes.ReplaceAll(raw, []byte(`"SECRET","j":"`), []byte(`[REDACTED:T]`))
	}}
	for _, slow := range []bool{false, true} {
		c := newFastClientWith(t, slow, server, hooks)
		c.send(fastInit, "0")
		for i, name := range []string{"big", "small", "rpcerr"} {
			id := fmt.Sprint(10 + i)
			got := c.send(fastCall(id, `{"name":"raw_`+name+`","arguments":{}}`), id)
			for _, l := range got {
				var m struct {
					Error *struct{ Message string } `json:"error"`
				}
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("slow=%v %s: a line that is not JSON reached the client: %.200q", slow, name, l)
				}
				if m.Error == nil || strings.Contains(l, "SECRET") {
					t.Fatalf("slow=%v %s: %.300q, want an error", slow, name, l)
				}
			}
		}
	}
}
