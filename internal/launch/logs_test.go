package launch

import (
	"log/slog"
	"strings"
	"testing"

	"mcpbox/internal/egress"
	"mcpbox/internal/redact"
)

func TestLineWriter(t *testing.T) {
	var b strings.Builder
	lw := &lineWriter{w: &b, prefix: "p: "}
	lw.Write([]byte("one\ntw"))
	lw.Write([]byte("o\x1b[31m\u009b\x7f\n" + strings.Repeat("x", maxLogLine+10) + "\nlast"))
	lw.Close()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 4 || lines[0] != "p: one" || lines[1] != "p: two?[31m??" || len(lines[2]) != len("p: ")+maxLogLine || lines[3] != "p: last" {
		t.Fatalf("lines = %q", lines)
	}
}

// TestEgressLogLevels: allowed connections are logged at the level the
// caller gives (debug for serve, whose audit records them), refusals
// always as warnings.
func TestEgressLogLevels(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	logEv := egressLogger(log, "srv", &redact.Book{}, slog.LevelDebug)
	logEv(egress.Event{Host: "allowed.example", Port: 443, Decision: "allow"})
	logEv(egress.Event{Host: "refused.example", Port: 443, Decision: "deny", Reason: "not in the allowlist"})
	out := buf.String()
	if strings.Contains(out, "allowed.example") || !strings.Contains(out, "level=WARN") || !strings.Contains(out, "refused.example") {
		t.Errorf("at info: want only the refusal, got:\n%s", out)
	}
	buf.Reset()
	log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	egressLogger(log, "srv", &redact.Book{}, slog.LevelDebug)(egress.Event{Host: "allowed.example", Port: 443, Decision: "allow"})
	if !strings.Contains(buf.String(), "allowed.example") {
		t.Errorf("at debug: the allowed connection is missing:\n%s", buf.String())
	}
}
