package guard

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/redact"
)

// TestGuardHoldsUnannotatedTools: the guard decides a call with the
// annotations of the tool's current definition. One that leaves them out,
// or whose annotations are no object, waits for review (here nobody
// answers, so it is refused without running); one that says it is
// harmless runs.
func TestGuardHoldsUnannotatedTools(t *testing.T) {
	c, err := config.Load("guard.yaml", []byte(`version: 1
approvals: {timeout: 1s, channels: [cli]}
servers:
  echo:
    command: [echo-server]
    tools: {allow: [echo]}
`))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	g, err := New(c, Options{StateDir: dir, LockPath: filepath.Join(dir, "mcpbox.lock")}, slog.New(slog.DiscardHandler), &redact.Book{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name, def string
		runs      bool
		rule      string
	}{
		{"no annotations", `{"name":"echo","inputSchema":{"type":"object"}}`, false, "annotation destructiveHint (not set, so true)"},
		{"annotations no object", `{"name":"echo","inputSchema":{"type":"object"},"annotations":"x"}`, false, "annotation destructiveHint (not set, so true)"},
		{"harmless", string(harmlessEcho), true, "servers.echo.tools.allow"},
	} {
		ran := false
		res, err := g.call(ctx, &gateway.Call{Agent: gateway.LocalAgent, Server: "echo", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`),
			Definition: json.RawMessage(tc.def)},
			func(context.Context) (json.RawMessage, error) {
				ran = true
				return json.RawMessage(`{"content":[{"type":"text","text":"ran"}]}`), nil
			})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if ran != tc.runs || (!tc.runs && !strings.Contains(string(res), "needs approval")) {
			t.Errorf("%s: ran %v, result %s; want ran %v", tc.name, ran, res, tc.runs)
		}
		recs, err := g.AuditStore().Recent(ctx, audit.Filter{Event: audit.EventCall}, "", 0, 1)
		if err != nil || len(recs) != 1 || recs[0].Rule != tc.rule {
			t.Errorf("%s: call record %+v (%v), want rule %q", tc.name, recs, err, tc.rule)
		}
	}
}

// TestCategoryDefaults: a call record's category reads the annotations as
// the policy does, with MCP's defaults: destructiveHint and openWorldHint
// true unless set false, destructiveHint unset meaning nothing for a
// read-only tool (set true, it still counts).
func TestCategoryDefaults(t *testing.T) {
	f, tr := false, true
	ann := func(readOnly, destructive, openWorld *bool) map[string]any {
		m := map[string]any{}
		for k, v := range map[string]*bool{"readOnlyHint": readOnly, "destructiveHint": destructive, "openWorldHint": openWorld} {
			if v != nil {
				m[k] = *v
			}
		}
		return m
	}
	tests := []struct {
		name string
		ann  map[string]any
		want string
	}{
		{"no annotations", nil, "destructive"},
		{"empty", ann(nil, nil, nil), "destructive"},
		{"not destructive, world unset", ann(nil, &f, nil), "open-world"},
		{"not a boolean", map[string]any{"destructiveHint": "no", "openWorldHint": false}, "destructive"},
		{"read-only, world unset", ann(&tr, nil, nil), "open-world"},
		{"read-only, closed world", ann(&tr, nil, &f), "read-only"},
		{"read-only yet destructive", ann(&tr, &tr, &f), "destructive"},
		{"harmless", ann(&f, &f, &f), ""},
		{"destructive", ann(&f, &tr, &f), "destructive"},
	}
	for _, tt := range tests {
		if got := category(nil, "t", tt.ann); got != tt.want {
			t.Errorf("%s: category %q, want %q", tt.name, got, tt.want)
		}
	}
}
