package guard

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/admin"
	"mcpbox/internal/approval"
	"mcpbox/internal/gateway"
	"mcpbox/internal/track"
)

// TestCallsInHand: `mcpbox ps` and the dashboard show a call on its
// sandbox's row while it waits for approval and while it runs (the audit
// has no record of it until it ends), and not once it has ended.
func TestCallsInHand(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	hold := func(text string) {
		if text == "review" {
			entered <- struct{}{}
			<-release
		}
	}
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	r := newGuardRigServer(t, guardTestConfig, nil,
		&gateway.Server{Name: "echo", Scope: gateway.ScopeAgent, Allow: []string{"*"}, Launch: echoLauncherWith(hold)})
	if out, isErr := r.call(t, "hi"); isErr || out != "hi" {
		t.Fatalf("first call: %q %v", out, isErr)
	}
	t.Cleanup(free) // before the rig's cleanup, which waits for the server
	gw := r.g.gw.Load()
	ins := gw.Instances()
	if len(ins) != 1 {
		t.Fatalf("instances %+v, want one", ins)
	}
	sb := track.NewSandbox()
	defer r.g.SandboxStarted("echo", ins[0].Scope, sb)()
	calls := func() []admin.Call {
		t.Helper()
		for _, row := range r.g.SandboxRows(gw) {
			if row.ID == sb.ID {
				return row.Calls
			}
		}
		t.Fatalf("no row of sandbox %s", sb.ID)
		return nil
	}
	if c := calls(); len(c) != 0 {
		t.Fatalf("calls in hand before any: %+v", c)
	}

	before := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := r.sess.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "review"}})
		done <- err
	}()
	id := r.waitingID(t)
	if c := calls(); len(c) != 1 || c[0].Tool != "echo" || c[0].Waiting != "approval" || c[0].Started.Before(before) {
		t.Fatalf("calls in hand while it waits for approval: %+v, want echo awaiting approval", c)
	}
	if err := r.g.broker.Decide(id, approval.Decision{Allow: true, By: "cli:uid=0"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the approved call did not reach the server")
	}
	if c := calls(); len(c) != 1 || c[0].Tool != "echo" || c[0].Waiting != "" {
		t.Fatalf("calls in hand while it runs: %+v, want echo running", c)
	}
	free()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the held call: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the released call did not return")
	}
	if c := calls(); len(c) != 0 {
		t.Fatalf("calls in hand after the call ended: %+v", c)
	}
}
