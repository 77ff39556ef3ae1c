package gateway

import (
	"testing"
	"time"
)

// TestServerNotificationNeverBecomesRequest: a server that sends a
// notification named like a request (no id) must not make the gateway
// send that request to the client: it would bypass the checks on
// server→client requests (only sampling, elicitation and ping, to the
// one session they can belong to) and hang the call until the client
// answered. Found by FuzzGatewayGarbage.
func TestServerNotificationNeverBecomesRequest(t *testing.T) {
	for _, method := range []string{"roots/list", "sampling/createMessage", "elicitation/create", "tools/list", "ping"} {
		t.Run(method, func(t *testing.T) {
			launch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
				switch msg["method"] {
				case "tools/list":
					s.reply(msg, `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
				case "tools/call":
					s.send(`{"jsonrpc":"2.0","method":"` + method + `","params":{"messages":[],"maxTokens":1,"message":"m","requestedSchema":{"type":"object"}}}`)
					s.send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"still forwarded"}}`)
					s.reply(msg, `{"content":[{"type":"text","text":"ok"}]}`)
				}
			})
			gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}, Restart: RestartNo})
			c := newRawClient(t, gw)
			c.w.Write([]byte(`{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"t","arguments":{}}}` + "\n"))
			var seen []map[string]any
			timeout := time.After(10 * time.Second)
			for resp := false; !resp; {
				select {
				case m, ok := <-c.lines:
					<-c.rawLn
					if !ok {
						t.Fatal("connection closed")
					}
					if m["id"] == "call" && m["method"] == nil {
						if m["result"] == nil {
							t.Fatalf("call response: %v", m)
						}
						resp = true
						break
					}
					seen = append(seen, m)
				case <-timeout:
					t.Fatalf("no response to the call in 10s; the client got %v", seen)
				}
			}
			logged := false
			for _, n := range seen {
				if n["method"] == method {
					t.Errorf("the server's %q notification reached the client: %v", method, n)
				}
				logged = logged || n["method"] == "notifications/message"
			}
			if !logged {
				t.Errorf("a real notification from the server was not forwarded; client got %v", seen)
			}
		})
	}
}
