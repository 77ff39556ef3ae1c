package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// burstServer answers tools/call with many progress and log
// notifications and then its result, in one write.
func burstServer(s *rawServer, msg map[string]any) {
	switch msg["method"] {
	case "tools/list":
		s.reply(msg, `{"tools":[{"name":"burst","inputSchema":{"type":"object"}}]}`)
	case "tools/call":
		params, _ := msg["params"].(map[string]any)
		meta, _ := params["_meta"].(map[string]any)
		tok, _ := json.Marshal(meta["progressToken"])
		id, _ := json.Marshal(msg["id"])
		var b strings.Builder
		for i := 1; i <= 20; i++ {
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d}}`+"\n", tok, i)
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":%d}}`+"\n", i)
		}
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, id)
		s.send(b.String())
	}
}

// TestNotificationsBeforeResult: every notification a server sends for a
// call before its result reaches the client before the result, on the
// fast path and through the SDK.
func TestNotificationsBeforeResult(t *testing.T) {
	for _, slow := range []bool{false, true} {
		t.Run(fmt.Sprintf("slowStdio=%v", slow), func(t *testing.T) {
			c := newFastClientWith(t, slow, burstServer, Hooks{})
			c.send(fastInit, "0")
			c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			for i := 1; i <= 50; i++ {
				tok := fmt.Sprintf("t%d", i)
				c.send(fastCall(fmt.Sprint(i), `{"name":"raw_burst","arguments":{},"_meta":{"progressToken":"`+tok+`"}}`))
				progress, logs := 0, 0
				timeout := time.After(20 * time.Second)
			read:
				for {
					select {
					case l := <-c.lines:
						var m struct {
							ID     json.RawMessage `json:"id"`
							Method string          `json:"method"`
							Params struct {
								Token string `json:"progressToken"`
							} `json:"params"`
						}
						json.Unmarshal([]byte(l), &m)
						switch {
						case m.Method == "notifications/progress" && m.Params.Token == tok:
							progress++
						case m.Method == "notifications/message":
							logs++
						case m.Method == "" && string(m.ID) == fmt.Sprint(i):
							break read
						}
					case <-timeout:
						t.Fatalf("call %d: no result", i)
					}
				}
				if progress != 20 || logs != 20 {
					t.Fatalf("call %d: %d progress and %d log notifications before the result, want 20 and 20", i, progress, logs)
				}
			}
		})
	}
}

// TestNotificationsBeforeResultHTTP is TestNotificationsBeforeResult
// for a Streamable HTTP client: on the call's own stream, in order.
func TestNotificationsBeforeResultHTTP(t *testing.T) {
	launch, _ := rawLauncher(t, burstServer)
	_, c := newHTTPGateway(t, &Server{Name: "s", Launch: launch, Allow: []string{"*"}}, Options{}, HTTPOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sid := c.mustInitialize(t, ctx)
	for i := 1; i <= 20; i++ {
		_, b, err := c.do(ctx, http.MethodPost, sid, map[string]any{"jsonrpc": "2.0", "id": i, "method": "tools/call",
			"params": map[string]any{"name": "burst", "arguments": map[string]any{}, "_meta": map[string]any{"progressToken": i}}})
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		res := strings.Index(s, `"result"`)
		if res < 0 || strings.Count(s[:res], "notifications/progress") != 20 || strings.Count(s[:res], "notifications/message") != 20 {
			t.Fatalf("call %d: want 20 progress and 20 log notifications before the result: %s", i, s)
		}
	}
}
