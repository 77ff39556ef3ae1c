package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMalformedResponseFailsCall: a server that answers a call with a
// response that does not decode (a raw control byte, nesting deeper than
// the decoder takes, an id that is no id) fails that call at once with an
// error naming the server, although no call_timeout is set; the session
// goes on.
func TestMalformedResponseFailsCall(t *testing.T) {
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	tests := []struct {
		name  string
		reply func(id string) string
		want  string
	}{
		{"control byte", func(id string) string {
			return `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"a` + "\x01" + `b"}]}}`
		}, "raw control character"},
		{"control byte, id last", func(id string) string {
			return `{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"a` + "\x1f" + `b"}]},"id":` + id + `}`
		}, "raw control character"},
		{"10000 levels", func(id string) string {
			return `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[],"x":` + deep + `}}`
		}, "nesting deeper"},
		{"10000 levels, id last", func(id string) string {
			return `{"jsonrpc":"2.0","result":{"x":` + deep + `},"id":` + id + `}`
		}, "nesting deeper"},
		{"id is an object", func(string) string {
			return `{"jsonrpc":"2.0","id":{"n":1},"result":{"content":[]}}`
		}, "neither a string nor an integer"},
		{"id is true", func(string) string {
			return `{"jsonrpc":"2.0","id":true,"result":{"content":[]}}`
		}, "neither a string nor an integer"},
		{"id is null", func(string) string {
			return `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`
		}, "neither a string nor an integer"},
		{"no id", func(string) string {
			return `{"jsonrpc":"2.0","result":{"content":[]}}`
		}, "no id"},
		{"id never sent", func(string) string {
			return `{"jsonrpc":"2.0","id":"x-1","result":{"content":[]}}`
		}, "never sent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			launch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
				if msg["method"] != "tools/call" {
					return
				}
				if msg["params"].(map[string]any)["name"] == "bad" {
					id, _ := json.Marshal(msg["id"])
					s.send(tt.reply(string(id)))
					return
				}
				s.reply(msg, `{"content":[{"type":"text","text":"fine"}]}`)
			})
			gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}}) // no call_timeout
			c := newRawClient(t, gw)
			start := time.Now()
			resp, _ := c.call("tools/call", map[string]any{"name": "bad"})
			e, _ := resp["error"].(map[string]any)
			msg := fmt.Sprint(e["message"])
			if e == nil || !strings.Contains(msg, tt.want) || (tt.want != "never sent" && !strings.Contains(msg, "server raw sent a malformed response")) {
				t.Fatalf("%.300v, want an error naming server raw and %q", resp, tt.want)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("the call failed only after %s", d)
			}
			resp, _ = c.call("tools/call", map[string]any{"name": "good"})
			if !strings.Contains(fmt.Sprint(resp["result"]), "fine") {
				t.Fatalf("after the malformed response: %v", resp)
			}
		})
	}
}

// TestUnreadableIDFailsEveryCall: a response whose id cannot be read
// answers one of the calls waiting, nobody can tell which: all of them
// fail instead of one hanging.
func TestUnreadableIDFailsEveryCall(t *testing.T) {
	var mu sync.Mutex
	waiting := 0
	launch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] != "tools/call" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if waiting++; waiting == 2 {
			s.send(`{"jsonrpc":"2.0","id":[7],"result":{}}`)
		}
	})
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}})
	c := newRawClient(t, gw)
	// Two calls in flight at once, answered by the one bad response.
	for i := range 2 {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call", "params": map[string]any{"name": "t"}})
		c.w.Write(append(b, '\n'))
	}
	failed := map[float64]bool{}
	timeout := time.After(10 * time.Second)
	for len(failed) < 2 {
		select {
		case msg := <-c.lines:
			<-c.rawLn
			id, _ := msg["id"].(float64)
			e, _ := msg["error"].(map[string]any)
			if id >= 100 && e != nil && strings.Contains(fmt.Sprint(e["message"]), "server raw sent a malformed response") {
				failed[id] = true
			}
		case <-timeout:
			t.Fatalf("calls failed: %v, want both", failed)
		}
	}
}

// FuzzScanTop: on a valid JSON object, the tolerant walk finds the same
// top-level id, method and result/error members as encoding/json.
func FuzzScanTop(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"result":{"id":2,"x":"}\"{"},"id":"a\"b"}`,
		`{"method":"m","params":[{"id":3}],"id":4}`,
		` { "error" : {"code":1} , "id" : -5 } `,
		`{"x":[[{"id":6}]],"y":"id","z":null}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var ref map[string]json.RawMessage
		if json.Unmarshal(b, &ref) != nil || !bytes.HasPrefix(bytes.TrimLeft(b, " \t\r\n"), []byte("{")) {
			return
		}
		if bytes.Contains(b, []byte(`\u`)) {
			return // keys are compared as written
		}
		got := scanTop(b)
		if id, ok := ref["id"]; ok != (got.id != nil) || (ok && !bytes.Equal(bytes.TrimSpace(id), got.id)) {
			t.Fatalf("%s: id %q, want %q", b, got.id, ref["id"])
		}
		_, m := ref["method"]
		_, r := ref["result"]
		_, e := ref["error"]
		if got.method != m || got.response != (r || e) || got.control {
			t.Fatalf("%s: %+v", b, got)
		}
	})
}

// TestStdioBadParams: over stdio, initialize params and tools/call
// arguments that are no object get -32602 with a message that names no
// Go type, and the call is told to Hooks.Unknown.
func TestStdioBadParams(t *testing.T) {
	whys := make(chan string, 8)
	a := &Server{Name: "a", Prefix: "a__", Launch: sdkLauncher(func(Scope) *mcp.Server { return testServer("a") }, nil, nil), Allow: []string{"*"}}
	gw, err := New([]*Server{a}, Options{Hooks: Hooks{Unknown: func(c *Call, why string) { whys <- c.Server + "/" + c.Tool + ": " + why }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	c := newRawClient(t, gw)
	for _, tt := range []struct {
		method string
		params any
		want   string
	}{
		{"initialize", "x", `"params" must be an object`},
		{"tools/call", map[string]any{"name": "a__echo", "arguments": "f.txt"}, `"arguments" must be an object`},
	} {
		resp, _ := c.call(tt.method, tt.params)
		e, _ := resp["error"].(map[string]any)
		if e == nil || e["code"] != float64(-32602) || !strings.Contains(e["message"].(string), tt.want) {
			t.Fatalf("%s: %v, want -32602 with %q", tt.method, resp, tt.want)
		}
	}
	select {
	case got := <-whys:
		if want := "a/echo: " + UnknownBadArguments; got != want {
			t.Errorf("Unknown hook: %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the refused call reached no hook")
	}
}
