package gateway

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestDefaultCallTimeout: with no call_timeout, a server that never
// answers holds a call (and a list) only until the gateway's default.
func TestDefaultCallTimeout(t *testing.T) {
	launch, started := rawLauncher(t, func(s *rawServer, msg map[string]any) {}) // never answers
	const limit = 300 * time.Millisecond
	gw, err := New([]*Server{{Name: "raw", Launch: launch, Allow: []string{"*"}}}, Options{CallTimeout: limit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	c := newRawClient(t, gw)
	start := time.Now()
	resp, _ := c.call("tools/call", map[string]any{"name": "t"})
	e, _ := resp["error"].(map[string]any)
	if e == nil || e["code"].(float64) != codeTimeout || !strings.Contains(fmt.Sprint(e["message"]), "after "+limit.String()) {
		t.Fatalf("%v, want a timeout error after %s", resp, limit)
	}
	if d := time.Since(start); d < limit || d > 10*time.Second {
		t.Fatalf("the call ended after %s, want about %s", d, limit)
	}
	if len(started()[0].received("notifications/cancelled")) == 0 {
		time.Sleep(100 * time.Millisecond)
		if len(started()[0].received("notifications/cancelled")) == 0 {
			t.Fatal("the server was not told that the call was cancelled")
		}
	}
	// tools/list asks the server too: it gives up on it and lists nothing.
	start = time.Now()
	resp, _ = c.call("tools/list", nil)
	if resp["error"] != nil || time.Since(start) > 10*time.Second {
		t.Fatalf("tools/list after %s: %v", time.Since(start), resp)
	}
}
