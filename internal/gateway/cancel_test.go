package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCancelledNotAnswered: a call the client cancels gets no response
// (the receiver of a cancellation does not answer), on the fast path and
// through the SDK; the call hook (the audit) still sees it cancelled, and
// the id can be used again.
func TestCancelledNotAnswered(t *testing.T) {
	for _, slow := range []bool{false, true} {
		t.Run(fmt.Sprintf("slowStdio=%v", slow), func(t *testing.T) {
			errs := make(chan error, 4)
			c := newFastClientWith(t, slow, fastServer, Hooks{Call: func(ctx context.Context, _ *Call, next func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
				raw, err := next(ctx)
				errs <- err
				return raw, err
			}})
			c.send(fastInit, "0")
			c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			for round := range 3 {
				io.WriteString(c.w, fastCall("40", `{"name":"raw_slow","arguments":{}}`)+"\n")
				c.waitCallNamed("slow", round+1)
				io.WriteString(c.w, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":40,"reason":"user"}}`+"\n")
				select {
				case err := <-errs:
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("the hook saw %v, want context.Canceled", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the cancelled call did not end")
				}
				// The answer, were there one, is on its way now: a ping
				// and a moment let it arrive.
				got := c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"p%d","method":"ping"}`, round), fmt.Sprintf(`"p%d"`, round))
				time.Sleep(100 * time.Millisecond)
				for len(c.lines) > 0 {
					got = append(got, <-c.lines)
				}
				if len(got) != 1 {
					t.Fatalf("round %d: the cancelled call was answered: %q", round, got)
				}
			}
			// The id is free again, and answered.
			got := c.send(fastCall("40", `{"name":"raw_t","arguments":{}}`), "40")
			if len(got) != 1 || !strings.Contains(got[0], "pong") {
				t.Fatalf("id 40 again: %q", got)
			}
			<-errs
		})
	}
}

// TestCancelledHTTPNoCodeZero: a call the HTTP client cancels ends at
// once; whatever the SDK writes for it carries a JSON-RPC error code,
// not 0 ("MCP error 0: context canceled").
func TestCancelledHTTPNoCodeZero(t *testing.T) {
	launch, started := hangingLauncher(t)
	_, c := newHTTPGateway(t, &Server{Name: "s", Launch: launch, Allow: []string{"*"}}, Options{}, HTTPOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sid := c.mustInitialize(t, ctx)
	answer := c.callAsync(ctx, sid, "hang")
	waitFor(t, 10*time.Second, "the call reaching the server", func() bool { return receivedAll(started(), "tools/call") == 1 })
	if _, _, err := c.do(ctx, http.MethodPost, sid, map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": 2}}); err != nil {
		t.Fatal(err)
	}
	select {
	case body := <-answer:
		if strings.Contains(body, `"code":0`) {
			t.Errorf("the cancelled call was answered with code 0: %s", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call's request did not end")
	}
}
