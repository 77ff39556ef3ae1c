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

// noteServer answers tools/call of tool with the notifications notes
// writes for the call's progress token, then its result, in one write.
func noteServer(tool string, notes func(b *strings.Builder, tok []byte)) func(*rawServer, map[string]any) {
	return func(s *rawServer, msg map[string]any) {
		switch msg["method"] {
		case "tools/list":
			s.reply(msg, `{"tools":[{"name":"`+tool+`","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			params, _ := msg["params"].(map[string]any)
			meta, _ := params["_meta"].(map[string]any)
			tok, _ := json.Marshal(meta["progressToken"])
			id, _ := json.Marshal(msg["id"])
			var b strings.Builder
			notes(&b, tok)
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, id)
			s.send(b.String())
		}
	}
}

// burstServer answers tools/call with many progress and log
// notifications and then its result, in one write.
var burstServer = noteServer("burst", func(b *strings.Builder, tok []byte) {
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(b, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d}}`+"\n", tok, i)
		fmt.Fprintf(b, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":%d}}`+"\n", i)
	}
})

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
				for _, n := range c.untilResult(t, fmt.Sprint(i)) {
					switch {
					case n.Method == "notifications/progress" && n.Params.Token == tok:
						progress++
					case n.Method == "notifications/message":
						logs++
					}
				}
				if progress != 20 || logs != 20 {
					t.Fatalf("call %d: %d progress and %d log notifications before the result, want 20 and 20", i, progress, logs)
				}
			}
		})
	}
}

// noted is a notification the client read before a result.
type noted struct {
	Method string `json:"method"`
	Params struct {
		Token    any     `json:"progressToken"`
		Progress float64 `json:"progress"`
		Total    float64 `json:"total"`
		Message  string  `json:"message"`
	} `json:"params"`
}

// untilResult reads c's lines up to the response to the request id and
// returns the notifications before it.
func (c *fastClient) untilResult(t *testing.T, id string) []noted {
	t.Helper()
	var notes []noted
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l := <-c.lines:
			var m struct {
				ID json.RawMessage `json:"id"`
				noted
			}
			json.Unmarshal([]byte(l), &m)
			switch {
			case m.Method == "" && string(m.ID) == id:
				return notes
			case m.Method != "":
				notes = append(notes, m.noted)
			}
		case <-timeout:
			t.Fatalf("no result for request %s", id)
		}
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

// startsAtZero answers tools/call with progress notes that start at 0,
// as many servers do, repeat a value (the final one too) and carry
// messages, then its result.
var startsAtZero = noteServer("work", func(b *strings.Builder, tok []byte) {
	for i, v := range []string{"0", "0", "0.5", "0.5", "2", "2"} {
		fmt.Fprintf(b, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%s,"total":2,"message":"step %d"}}`+"\n", tok, v, i)
	}
})

// TestProgressAfterGatewayNote: where the gateway told the client a note
// of its own on a call's token (Call.Progress, at 0), the server's notes
// that would not increase on it are lifted just above the last one, and
// none is lost; a call the gateway sent no note for gets the server's
// values as they are.
func TestProgressAfterGatewayNote(t *testing.T) {
	hooks := Hooks{Call: func(ctx context.Context, c *Call, next func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
		if c.Progress != nil && strings.Contains(string(c.Arguments), `"wait":true`) {
			c.Progress("waiting")
			c.Progress("a second note is not sent")
		}
		return next(ctx)
	}}
	for _, slow := range []bool{false, true} {
		t.Run(fmt.Sprintf("slowStdio=%v", slow), func(t *testing.T) {
			c := newFastClientWith(t, slow, startsAtZero, hooks)
			c.send(fastInit, "0")
			c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			for i, wait := range []bool{true, false} {
				id := fmt.Sprint(i + 1)
				c.send(fastCall(id, fmt.Sprintf(`{"name":"raw_work","arguments":{"wait":%v},"_meta":{"progressToken":"t%s"}}`, wait, id)))
				var got, totals []float64
				var messages []string
				for _, n := range c.untilResult(t, id) {
					if n.Method == "notifications/progress" {
						got = append(got, n.Params.Progress)
						totals = append(totals, n.Params.Total)
						messages = append(messages, n.Params.Message)
					}
				}
				want := []string{"waiting", "step 0", "step 1", "step 2", "step 3", "step 4", "step 5"}
				if !wait {
					want = want[1:]
				}
				if fmt.Sprint(messages) != fmt.Sprint(want) {
					t.Fatalf("call %s: notes %q, want %q", id, messages, want)
				}
				if !wait {
					if fmt.Sprint(got) != "[0 0 0.5 0.5 2 2]" {
						t.Errorf("call %s without the gateway's note: progress %v, want the server's own", id, got)
					}
					continue
				}
				for j := 1; j < len(got); j++ {
					if got[j] <= got[j-1] {
						t.Fatalf("call %s: progress %v does not increase", id, got)
					}
				}
				if got[0] != 0 || got[2] >= 0.5 || got[3] != 0.5 || got[4] >= 0.6 || got[5] != 2 || got[6] >= 2.1 {
					t.Errorf("call %s: progress %v, want 0, the server's values, and those lifted only just above the last", id, got)
				}
				for j := 1; j < len(got); j++ {
					if got[j] > totals[j] {
						t.Errorf("call %s: progress %v above its total %v", id, got[j], totals[j])
					}
				}
			}
		})
	}
}
