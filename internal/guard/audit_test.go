package guard

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/redact"
)

// TestGuardAuditFailsClosed deletes the audit database under a running
// guard: no call after it is answered; they are refused with an error
// that names the audit problem.
func TestGuardAuditFailsClosed(t *testing.T) {
	r := newGuardRig(t, nil)
	if out, isErr := r.call(t, "before"); isErr || out != "before" {
		t.Fatalf("call before the failure: %q %v", out, isErr)
	}
	if err := os.Remove(filepath.Join(r.dir, "audit.db")); err != nil {
		t.Fatal(err)
	}
	// The store notices on this call's commit (its result is withheld) or,
	// if its idle check came first, before the call runs.
	out, isErr := r.call(t, "secret-result")
	if !isErr || strings.Contains(out, "secret-result") || !strings.Contains(out, "(its database file was deleted or replaced)") {
		t.Fatalf("call whose record cannot be committed: %q (isError %v), want it refused", out, isErr)
	}
	for range 3 {
		out, isErr := r.call(t, "after")
		if !isErr || !strings.Contains(out, "echo was not run: the audit log cannot be written (its database file was deleted or replaced)") {
			t.Fatalf("call while the audit store fails: %q (isError %v), want it refused", out, isErr)
		}
	}
}

// TestGuardAuditOnFailureAllow: with audit.on_failure: allow, the same
// calls go through, unaudited, and are counted.
func TestGuardAuditOnFailureAllow(t *testing.T) {
	r := newGuardRigWith(t, guardTestConfig+"audit: {on_failure: allow}\n", nil)
	if err := os.Remove(filepath.Join(r.dir, "audit.db")); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"one", "two"} {
		if out, isErr := r.call(t, text); isErr || out != text {
			t.Fatalf("call with on_failure allow: %q (isError %v), want %q", out, isErr, text)
		}
	}
	if n := r.g.unaudited.Load(); n != 2 {
		t.Fatalf("%d unaudited calls counted, want 2", n)
	}
}

// TestGuardAuditDiskFullWithholdsResult runs the guard's call hook with
// the state dir on a full 1 MiB tmpfs: the first call runs but its
// record cannot be committed, so its result is withheld; the next is
// refused before it runs; once space is freed calls pass again.
func TestGuardAuditDiskFullWithholdsResult(t *testing.T) {
	dir := smallTmpfs(t, "1m")
	c, err := config.Load("guard.yaml", []byte(guardTestConfig))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(c, Options{StateDir: dir, LockPath: filepath.Join(dir, "mcpbox.lock")},
		slog.New(slog.DiscardHandler), &redact.Book{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close) // before the unmount
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ran := 0
	// Arguments big enough that each record needs new pages on disk.
	args, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", 64<<10)})
	call := func() string {
		res, err := g.call(ctx, &gateway.Call{Agent: gateway.LocalAgent, Server: "echo", Tool: "echo", Arguments: args, Definition: harmlessEcho},
			func(context.Context) (json.RawMessage, error) {
				ran++
				return json.RawMessage(`{"content":[{"type":"text","text":"the-result"}]}`), nil
			})
		if err != nil {
			t.Fatalf("call hook: %v", err)
		}
		return string(res)
	}
	if out := call(); !strings.Contains(out, "the-result") {
		t.Fatalf("call before the disk is full: %s", out)
	}

	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for buf := make([]byte, 64<<10); ; {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()
	ran = 0
	if out := call(); ran != 1 || strings.Contains(out, "the-result") || !strings.Contains(out, "the result of echo is withheld") ||
		!strings.Contains(out, "(the disk is full)") {
		t.Fatalf("call whose record cannot be committed (ran %d times): %s, want its result withheld", ran, out)
	}
	if out := call(); ran != 1 || !strings.Contains(out, "echo was not run: the audit log cannot be written (the disk is full)") {
		t.Fatalf("call while the store fails (ran %d times in all): %s, want it refused before running", ran, out)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(15 * time.Second); g.store.Err() != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the audit store still fails 15 s after space was freed: %v", g.store.Err())
		}
	}
	if out := call(); !strings.Contains(out, "the-result") {
		t.Fatalf("call after space was freed: %s", out)
	}
}

// TestGuardCancelledCallNotBlamedOnAudit: a call cancelled while it runs
// (Ctrl-C on serve, whose calls end with "the gateway is shutting
// down") still has its record committed, and then its outcome passed
// on; it is never refused as "its audit record could not be written (a
// write error)", which sent users looking at a healthy audit log.
func TestGuardCancelledCallNotBlamedOnAudit(t *testing.T) {
	r := newGuardRigWith(t, "version: 1\nservers:\n  echo:\n    command: [echo-server]\n    tools: {allow: [echo]}\n", nil)
	shutdown := errors.New("the gateway is shutting down")
	for i := range 20 { // the race between the commit and ctx.Done, many times
		ctx, cancel := context.WithCancelCause(context.Background())
		res, err := r.g.call(ctx, &gateway.Call{Agent: gateway.LocalAgent, Server: "echo", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`), Definition: harmlessEcho},
			func(context.Context) (json.RawMessage, error) {
				cancel(shutdown)
				return nil, shutdown
			})
		if strings.Contains(string(res), "could not be written") || err == nil || !errors.Is(err, shutdown) {
			t.Fatalf("call %d cancelled by shutdown: %s, %v; want the shutdown error passed on", i, res, err)
		}
	}
	recs := r.records(t)
	if len(recs) != 20 || recs[0].Error != shutdown.Error() {
		t.Fatalf("%d records (first %+v), want 20 calls ended by the shutdown", len(recs), recs[0])
	}
}
