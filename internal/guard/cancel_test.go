package guard

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/redact"
)

// TestGuardApprovalCancelledByClient attacks an approval that outlives its
// request: the client gives up on a call that waits for approval (its
// context ends, so the SDK sends notifications/cancelled). The request
// leaves the pending list, approving it later fails saying it was
// cancelled, the call never runs, and the audit records it as cancelled
// with the reason.
func TestGuardApprovalCancelledByClient(t *testing.T) {
	r := newGuardRig(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := r.sess.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "review"}})
		done <- err
	}()
	var id string
	deadline := time.Now().Add(10 * time.Second)
	for id == "" {
		if p := r.g.broker.Pending(); len(p) == 1 {
			id = p[0].ID
		} else if time.Now().After(deadline) {
			t.Fatal("the call did not wait for approval")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	for len(r.g.broker.Pending()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("still pending after the client cancelled: %+v", r.g.broker.Pending())
		}
		time.Sleep(10 * time.Millisecond)
	}
	err := r.g.broker.Decide(id, approval.Decision{Allow: true, By: "cli:uid=0"})
	if !errors.Is(err, approval.ErrCancelled) || !strings.Contains(err.Error(), "was cancelled") {
		t.Fatalf("approving a cancelled request: %v, want %v", err, approval.ErrCancelled)
	}
	// One record, cancelled: the call never ran (that would be approved/ok).
	// The handler writes it once the broker has let go of the request, a
	// moment after the request left the pending list.
	recs := r.records(t)
	for len(recs) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		recs = r.records(t)
	}
	if len(recs) != 1 || recs[0].Decision != "cancelled" || recs[0].Outcome != "cancelled" ||
		recs[0].Approver != approval.ByCancelled || !strings.Contains(recs[0].Error, "cancelled the request") {
		t.Fatalf("call records %+v, want one cancelled with the reason", recs)
	}
	qctx, qcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer qcancel()
	apr, err := r.g.store.Query(qctx, audit.Filter{Event: audit.EventApproval})
	if err != nil {
		t.Fatal(err)
	}
	if len(apr) != 1 || apr[0].Decision != "cancelled" || apr[0].Detail["reason"] == "" || apr[0].Detail["id"] != id {
		t.Fatalf("approval records %+v, want one cancelled of %s with a reason", apr, id)
	}
}

// TestGuardRecordsCallsNeverRun: a call that ended before its tool could
// be looked up (cancelled while its server's tools were being listed, or
// a listing that failed, a server that did not start for the session),
// or that its Mcp-Param headers refused, ran nothing, and still gets its
// record, with what became of it.
func TestGuardRecordsCallsNeverRun(t *testing.T) {
	r := newGuardRig(t, nil)
	hooks := r.g.Hooks()
	cases := []struct{ why, decision, outcome, rule string }{
		{gateway.UnknownCancelled, "cancelled", audit.OutcomeCancelled, "not run: "},
		{gateway.UnknownUnlistable, "deny", audit.OutcomeError, "not run: "},
		{gateway.UnknownNotStarted, "deny", audit.OutcomeError, "not run: "},
		{gateway.UnknownHeaderMismatch, "deny", audit.OutcomeDenied, "refused: "},
		{gateway.UnknownStateRefused, "deny", audit.OutcomeDenied, "refused: "},
		{gateway.UnknownTooManyWaiting, "deny", audit.OutcomeDenied, "refused: "},
		{gateway.UnknownBadArguments, "deny", audit.OutcomeDenied, "refused: "},
	}
	for _, c := range cases {
		hooks.Unknown(&gateway.Call{Agent: gateway.LocalAgent, Server: "echo", Tool: "echo", Name: "echo", Arguments: []byte(`{"text":"x"}`)}, c.why)
	}
	recs := r.records(t)
	if len(recs) != len(cases) {
		t.Fatalf("%d records, want %d: %+v", len(recs), len(cases), recs)
	}
	for i, want := range cases {
		rec := recs[i]
		if rec.Decision != want.decision || rec.Outcome != want.outcome || rec.Rule != want.rule+want.why || rec.Tool != "echo" {
			t.Errorf("record %d: decision %q, outcome %q, rule %q, tool %q; want %s, %s, %s%s", i, rec.Decision, rec.Outcome, rec.Rule, rec.Tool, want.decision, want.outcome, want.rule, want.why)
		}
	}
}

// TestGuardApprovalWithdrawnAtInputEnd: a stdio client that closes its
// input still reads the answers to what it asked, but a call of it that
// waits for approval is withdrawn at once, not left to be approved for
// nobody: its answer says so, nothing is pending, the call never runs,
// and its audit record is cancelled with the reason.
func TestGuardApprovalWithdrawnAtInputEnd(t *testing.T) {
	c, err := config.Load("guard.yaml", []byte(guardTestConfig))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	g, err := New(c, Options{StateDir: dir, LockPath: filepath.Join(dir, "mcpbox.lock")}, log, &redact.Book{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	gw, err := gateway.New([]*gateway.Server{{Name: "echo", Scope: gateway.ScopeAgent, Allow: []string{"*"}, Launch: echoLauncher}},
		gateway.Options{Logger: log, Hooks: g.Hooks()})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	g.Attach(gw)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	defer outR.Close()
	served := make(chan error, 1)
	go func() { served <- gw.ServeStdio(context.Background(), gateway.LocalAgent, inR, outW) }()
	answer := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), `{"jsonrpc":"2.0","id":2,`) {
				answer <- sc.Text()
			}
		}
	}()
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"review"}}}`,
	} {
		if _, err := io.WriteString(inW, m+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(g.broker.Pending()) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the call did not wait for approval")
		}
		time.Sleep(10 * time.Millisecond)
	}
	inW.Close()
	select {
	case a := <-answer:
		if !strings.Contains(a, "cancelled while waiting for approval (the client closed its input)") {
			t.Fatalf("the call's answer: %s", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call waiting for approval was not withdrawn at the end of the input")
	}
	if p := g.broker.Pending(); len(p) != 0 {
		t.Fatalf("still pending: %+v", p)
	}
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio did not return after the answer")
	}
	r := &guardRig{g: g}
	recs := r.records(t)
	if len(recs) != 1 || recs[0].Decision != "cancelled" || !strings.Contains(recs[0].Error, "closed its input") {
		t.Fatalf("call records %+v, want one cancelled with the reason", recs)
	}
}
