package e2e

import (
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The session cancel tests attack calls that outlive their client: a
// call waiting for approval whose session ended must not be approvable
// afterwards, and a gateway told to stop must stop while calls wait for
// approval or hang upstream.

// TestApprovalWithdrawnWithSession: the client ends its session (DELETE)
// while its call waits for approval. The DELETE returns at once, the
// request leaves `mcpbox approvals`, and `mcpbox approve ID` fails saying
// it was cancelled: the call never runs for a session that is gone.
func TestApprovalWithdrawnWithSession(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := auConfig(t, m, "approvals: {timeout: 2m}\n", auApproveBox)
		g := s.serve(t)
		sess := s.connect(t, g, nil)
		call := callAsync(sess, "whoami", nil)
		p := s.pendingFor(t, "whoami")

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, g.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+s.token)
		req.Header.Set("Mcp-Session-Id", sess.ID())
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("DELETE of a session whose call waits for approval: %v after %v", err, time.Since(start))
		}
		resp.Body.Close()
		if took := time.Since(start); resp.StatusCode != http.StatusNoContent || took > 2*time.Second {
			t.Fatalf("DELETE = %d after %v, want 204 at once", resp.StatusCode, took)
		}
		if pending := s.approvals(t, "pending"); len(pending) != 0 {
			t.Fatalf("still pending after the session ended: %v", pending)
		}
		r := s.cli(t, "approve", p.str("id"), "--config", s.cfg)
		if r.code == 0 || !strings.Contains(r.stderr, p.str("id")+" was cancelled") || !strings.Contains(r.stderr, "ended its session") {
			t.Fatalf("approving the withdrawn request:\n%s\nwant a non-zero exit saying it was cancelled", r)
		}
		select {
		case <-call:
		case <-time.After(10 * time.Second):
			t.Fatal("the call did not end with its session")
		}
		g.stop(t)

		recs := s.calls(t, "whoami")
		if len(recs) != 1 || recs[0].str("decision") != "cancelled" || recs[0].str("outcome") != "cancelled" ||
			!strings.Contains(recs[0].str("error"), "ended its session") {
			t.Fatalf("whoami call records %v, want one cancelled because the session ended", recs)
		}
	})
}

// TestServeStopsWithWaitingCalls: SIGTERM while one call waits for
// approval and another hangs in the server stops serve within 2 s, with
// exit 0; the audit records both calls as cancelled.
func TestServeStopsWithWaitingCalls(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := auConfig(t, m, "approvals: {timeout: 2m}\n", auApproveBox)
		g := s.serve(t)
		sess := s.connect(t, g, nil)
		waiting := callAsync(sess, "whoami", nil)
		hanging := callAsync(sess, "slow", map[string]any{"ms": 600000})
		s.pendingFor(t, "whoami")
		probe := s.connect(t, g, nil)
		deadline := time.Now().Add(30 * time.Second)
		for gwMustCall(t, probe, "inflight", nil, "") != "1" {
			if time.Now().After(deadline) {
				t.Fatal("the slow call did not reach the server")
			}
			time.Sleep(50 * time.Millisecond)
		}

		start := time.Now()
		if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-g.done:
			if g.err != nil {
				t.Errorf("mcpbox serve after SIGTERM: %v, want exit 0", g.err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("mcpbox serve still runs 2 s after SIGTERM with calls waiting\n%s", g.logs)
		}
		t.Logf("serve stopped %v after SIGTERM", time.Since(start))
		for _, ch := range []<-chan auCall{waiting, hanging} {
			select {
			case <-ch:
			case <-time.After(10 * time.Second):
				t.Fatal("a call was not answered when serve stopped")
			}
		}

		for tool, reason := range map[string]string{"whoami": "shutting down", "slow": ""} {
			recs := s.calls(t, tool)
			if len(recs) != 1 || recs[0].str("outcome") != "cancelled" || !strings.Contains(recs[0].str("error"), reason) {
				t.Errorf("%s call records %v, want one cancelled (%q)", tool, recs, reason)
			}
		}
		if recs := s.calls(t, "whoami"); len(recs) == 1 && recs[0].str("decision") != "cancelled" {
			t.Errorf("whoami call record %v, want decision cancelled", recs[0])
		}
	})
}
