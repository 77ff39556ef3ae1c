package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestApprovalWaitProgress: a client that cannot be asked (no
// elicitation) but sent a progressToken with its call hears, on the
// call's own stream, that the call waits for a person, in 2025-11-25
// and in 2026-07-28, in words that name no command, approval ID or log
// (the agent could use them to approve itself); the call then runs
// once approved with mcpbox approve.
func TestApprovalWaitProgress(t *testing.T) {
	m := modes(t)[0]
	s := auConfig(t, m, "approvals: {timeout: 1m}\n", auApproveBox)
	g := s.serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var seen []string
	for _, version := range gwVersions {
		notes := make(chan *mcp.ProgressNotificationParams, 8)
		sess := s.connectVersion(t, g, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			notes <- req.Params
		}}, version)
		token := "wait-" + version
		call := make(chan auCall, 1)
		go func() {
			params := &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}}
			params.SetProgressToken(token)
			res, err := sess.CallTool(ctx, params)
			call <- auCall{res: res, err: err}
		}()
		p := s.pendingFor(t, "whoami", seen...)
		seen = append(seen, p.str("id"))
		select {
		case n := <-notes:
			if n.ProgressToken != token || !strings.Contains(n.Message, "a person, not the agent, must decide this call within 1m0s") ||
				strings.Contains(n.Message, p.str("id")) || strings.Contains(n.Message, "mcpbox") || strings.Contains(n.Message, "log") {
				t.Errorf("%s: progress while the call waits: %+v", version, n)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s: no progress notification while the call waits", version)
		}
		if r := s.cli(t, "approve", p.str("id"), "--config", s.cfg); r.code != 0 {
			t.Fatalf("%s: mcpbox approve:\n%s", version, r)
		}
		wantOK(t, await(t, call), auServer)
	}
}
