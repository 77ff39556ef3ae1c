package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestApprovalInputRequired: a 2026-07-28 client (no session, no
// server-to-client requests) is asked to approve its call through an
// input_required result carrying the approval form; its retry with the
// answer runs or denies the call, a 2025 client is served by the same
// gateway at the same time, and the audit records the elicitation channel.
func TestApprovalInputRequired(t *testing.T) {
	m := modes(t)[0]
	s := auConfig(t, m, "approvals: {timeout: 1m}\n", auApproveBox)
	g := s.serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	legacy := s.connect(t, g, nil)
	for _, answer := range []string{"once", "deny"} {
		var forms []string
		opts := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			forms = append(forms, req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": answer}}, nil
		}}
		sess := s.connectVersion(t, g, opts, "2026-07-28")
		if got := sess.InitializeResult().ProtocolVersion; got != "2026-07-28" {
			t.Fatalf("negotiated %s, want 2026-07-28", got)
		}
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("%s: %v", answer, err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if len(forms) != 1 || !strings.Contains(forms[0], "whoami") {
			t.Fatalf("%s: approval forms %q, want one naming whoami", answer, forms)
		}
		switch answer {
		case "once":
			if res.IsError || text != auServer {
				t.Fatalf("approved: %q isError=%v, want %q", text, res.IsError, auServer)
			}
		case "deny":
			if !res.IsError || !strings.Contains(text, "approval") {
				t.Fatalf("denied: %q isError=%v, want an error about approval", text, res.IsError)
			}
		}
		// The legacy client, meanwhile, is unaffected: echo is not under review.
		gwMustCall(t, legacy, "echo", map[string]any{"text": "still here"}, "still here")
	}
	g.stop(t)
	recs := s.calls(t, "whoami")
	if len(recs) != 2 {
		t.Fatalf("want two whoami call records, got %v", recs)
	}
	for i, want := range [][2]string{{"approved", "ok"}, {"denied", "denied"}} {
		r := recs[i]
		if r.str("decision") != want[0] || r.str("outcome") != want[1] || !strings.HasPrefix(r.str("approver"), "elicitation") {
			t.Errorf("call record %v: want decision %s, outcome %s, approver elicitation...", r, want[0], want[1])
		}
	}
}
