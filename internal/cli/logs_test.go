package cli

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/audit"
)

// TestLogsUnknownEvent: a mistyped --event is refused, naming the events,
// rather than looking like a log with no such records.
func TestLogsUnknownEvent(t *testing.T) {
	code, out, errOut := runCLI("logs", "--event", "sesion_start", "--state-dir", t.TempDir())
	if code != exitUsage || out != "" || !strings.Contains(errOut, `--event "sesion_start"`) || !strings.Contains(errOut, "session_start") {
		t.Errorf("logs --event sesion_start: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestLogsUnknownDecision: decisions are not one enumerated set, so a
// --decision that no record has is not refused, but it is named with
// the decisions the log does have, rather than looking like a log with
// no such records; a decision that is there, or a filter that matches
// for another reason, prints no such line.
func TestLogsUnknownDecision(t *testing.T) {
	state := logWith(t, audit.Record{Event: audit.EventCall, Server: "gh", Tool: "a", Decision: "allow"},
		audit.Record{Event: audit.EventCall, Server: "gh", Tool: "b", Decision: "deny"}, audit.Record{Event: audit.EventSessionStart})
	code, out, errOut := runCLI("logs", "--decision", "denied", "--state-dir", state)
	if code != 0 || out != "" || !strings.Contains(errOut, `--decision "denied": no record has it yet; the decisions in this log are allow, deny`) {
		t.Errorf("logs --decision denied: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runCLI("logs", "--decision", "deny", "--state-dir", state)
	if code != 0 || strings.Count(out, "\n") != 1 || errOut != "" {
		t.Errorf("logs --decision deny: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runCLI("logs", "--decision", "deny", "--tool", "a", "--state-dir", state)
	if code != 0 || out != "" || errOut != "" {
		t.Errorf("logs --decision deny --tool a: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = runCLI("logs", "--decision", "deny", "--state-dir", logWith(t, audit.Record{Event: audit.EventSessionStart}))
	if code != 0 || !strings.Contains(errOut, "the decisions in this log are none") {
		t.Errorf("logs --decision deny, a log without decisions: exit %d, stderr %q", code, errOut)
	}
}

// TestLogsUnknownServerOrClient: a --server or --client that no record
// has is named with those the log has, as --decision is, rather than
// printing nothing.
func TestLogsUnknownServerOrClient(t *testing.T) {
	state := logWith(t, audit.Record{Event: audit.EventCall, Server: "gh", Client: "alice", Tool: "a", Decision: "allow"},
		audit.Record{Event: audit.EventCall, Server: "files", Client: "bob", Tool: "b", Decision: "allow"})
	code, out, errOut := runCLI("logs", "--server", "nosuch", "--state-dir", state)
	if code != 0 || out != "" || !strings.Contains(errOut, `--server "nosuch": no record has it yet; the servers in this log are files, gh`) {
		t.Errorf("logs --server nosuch: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = runCLI("logs", "--client", "carol", "--state-dir", state)
	if code != 0 || !strings.Contains(errOut, `--client "carol": no record has it yet; the clients in this log are alice, bob`) {
		t.Errorf("logs --client carol: exit %d, stderr %q", code, errOut)
	}
	if code, out, errOut = runCLI("logs", "--server", "gh", "--client", "bob", "--state-dir", state); code != 0 || out != "" || errOut != "" {
		t.Errorf("logs --server gh --client bob (both there, no record of both): exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// logWith is a state dir whose audit log holds recs.
func logWith(t *testing.T, recs ...audit.Record) string {
	t.Helper()
	state := t.TempDir()
	s, err := audit.Open(audit.Options{Path: filepath.Join(state, "audit.db"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		s.Add(r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return state
}
