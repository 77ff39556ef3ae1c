package guard

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
)

const prefixedConfig = `version: 1
approvals: {timeout: 30s}
servers:
  echo:
    command: [echo-server]
    prefix: e_
    tools:
      rules:
        - {tool: echo, when: 'args.text.startsWith("forbidden")', action: deny}
        - {tool: echo, when: 'args.text == "review"', action: approve}
      allow: [echo]
`

// TestGuardNamesToolAsCalled: with a prefix, the refusal the model
// reads, the approval request and its question, the approvals listing
// and the audit records all name the tool as the client called it.
func TestGuardNamesToolAsCalled(t *testing.T) {
	c, err := config.Load("guard.yaml", []byte(prefixedConfig))
	if err != nil {
		t.Fatal(err)
	}
	r := newGuardRigServer(t, prefixedConfig, nil, &gateway.Server{Name: "echo", Prefix: c.EffectivePrefix(c.Server("echo")),
		Scope: gateway.ScopeAgent, Allow: []string{"*"}, Launch: echoLauncher})
	g, sess := r.g, r.sess
	const name = "e_echo"
	call := func(text string) *mcp.CallToolResult {
		cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer ccancel()
		res, err := sess.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": text}})
		if err != nil {
			t.Fatalf("calling %s: %v", name, err)
		}
		return res
	}

	if res := call("forbidden-zone"); !res.IsError || !strings.Contains(gwTextOf(res), "the policy denies "+name+" ") {
		t.Errorf("refusal %q, want it to name %s", gwTextOf(res), name)
	}
	waited := make(chan *mcp.CallToolResult, 1)
	go func() { waited <- call("review") }()
	var req approval.Request
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if p, _ := g.Approvals(); len(p) == 1 {
			req = p[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the call did not wait for approval")
		}
	}
	if req.Name != name || !strings.HasPrefix(g.broker.Message(req), "Allow "+name+" ") {
		t.Errorf("approval request named %q, question %q; want %s", req.Name, g.broker.Message(req), name)
	}
	if err := g.broker.Decide(req.ID, approval.Decision{Allow: true, Scope: approval.ScopeAlways, By: "cli:uid=0"}); err != nil {
		t.Fatal(err)
	}
	if res := <-waited; res.IsError {
		t.Fatalf("the approved call: %q", gwTextOf(res))
	}
	if _, m := g.Approvals(); len(m) != 1 || m[0].Name != name {
		t.Errorf("remembered %+v, want one named %s", m, name)
	}

	fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer fcancel()
	if err := g.store.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	recs, err := g.store.Query(fctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, r := range recs {
		if r.Event != audit.EventCall && r.Event != audit.EventApproval {
			continue
		}
		n++
		if r.Name != name || r.Tool != "echo" || r.Server != "echo" {
			t.Errorf("%s record named %q (tool %s/%s), want %s", r.Event, r.Name, r.Server, r.Tool, name)
		}
	}
	if n != 3 { // two calls, one approval
		t.Errorf("%d call and approval records, want 3: %+v", n, recs)
	}
}

func gwTextOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
