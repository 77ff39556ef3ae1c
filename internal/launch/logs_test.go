package launch

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"mcpbox/internal/audit"
	"mcpbox/internal/credinject"
	"mcpbox/internal/egress"
	"mcpbox/internal/gateway"
	"mcpbox/internal/redact"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/track"
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

// TestLastErrorLine: the error above a runtime's last words is kept
// beside the last line (Node prints its version last, Go a stack frame);
// when the last line is the error, or none reads like one, there is none.
func TestLastErrorLine(t *testing.T) {
	for _, tt := range []struct{ out, last, errLine string }{
		{"node:internal/modules/esm/resolve:873\n  throw new ERR_MODULE_NOT_FOUND(packageName, fileURLToPath(base), null);\n        ^\n\n" +
			"Error [ERR_MODULE_NOT_FOUND]: Cannot find package '@modelcontextprotocol/sdk' imported from /opt/nm/index.js\n" +
			"    at packageResolve (node:internal/modules/esm/resolve:873:9) {\n  code: 'ERR_MODULE_NOT_FOUND'\n}\n\nNode.js v20.20.2\n",
			"Node.js v20.20.2", "Error [ERR_MODULE_NOT_FOUND]: Cannot find package '@modelcontextprotocol/sdk' imported from /opt/nm/index.js"},
		{"Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nModuleNotFoundError: No module named 'mcp'\n",
			"ModuleNotFoundError: No module named 'mcp'", ""},
		{"panic: runtime error: index out of range [3] with length 3\n\ngoroutine 1 [running]:\nmain.main()\n\t/src/main.go:9 +0x1d\n",
			"\t/src/main.go:9 +0x1d", "panic: runtime error: index out of range [3] with length 3"},
		{"listening on stdio\nboom: bad config\n", "boom: bad config", ""},
		{"an error happened\nexiting\n", "exiting", ""},
	} {
		lw := &lineWriter{w: io.Discard}
		lw.Write([]byte(tt.out))
		last, errLine := lw.Last(time.Minute)
		if last != tt.last || errLine != tt.errLine {
			t.Errorf("Last() = %q, %q; want %q, %q", last, errLine, tt.last, tt.errLine)
		}
	}
}

// TestEgressLogLevels: allowed connections are logged at the level the
// caller gives (debug for serve, whose audit records them), refusals
// always as warnings.
func TestEgressLogLevels(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	logEv := egressLogger(log, "srv", slog.LevelDebug)
	logEv(egress.Event{Host: "allowed.example", Port: 443, Decision: "allow"})
	logEv(egress.Event{Host: "refused.example", Port: 443, Decision: "deny", Reason: "not in the allowlist"})
	out := buf.String()
	if strings.Contains(out, "allowed.example") || !strings.Contains(out, "level=WARN") || !strings.Contains(out, "refused.example") {
		t.Errorf("at info: want only the refusal, got:\n%s", out)
	}
	buf.Reset()
	log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	egressLogger(log, "srv", slog.LevelDebug)(egress.Event{Host: "allowed.example", Port: 443, Decision: "allow"})
	if !strings.Contains(buf.String(), "allowed.example") {
		t.Errorf("at debug: the allowed connection is missing:\n%s", buf.String())
	}
}

// egressObserver keeps the egress events a launcher reports.
type egressObserver struct {
	recordingObserver
	mu  sync.Mutex
	evs []egress.Event
}

func (o *egressObserver) EgressEvent(_ string, _ gateway.Scope, _ *track.Sandbox, ev egress.Event) {
	o.mu.Lock()
	o.evs = append(o.evs, ev)
	o.mu.Unlock()
}

// A server that carries a secret out in a DNS name finds it lower-cased
// by the proxy; the log, the audit's egress record and the call's
// domains get the name redacted all the same (before, only an exact-case
// match was, and an upper-case key id came back whole).
func TestEgressHostRedactedInAnyCase(t *testing.T) {
	const keyID = "AKIAZ7Q3XR5TW2PL9MVK"
	book := &redact.Book{}
	if err := book.Add("AWS_KEY", []byte(keyID)); err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	obs := &egressObserver{}
	l := NewLocal(LocalOptions{Log: log, Book: book, Observer: obs})
	in := &sandboxInstance{l: l, rec: track.NewSandbox(),
		spec: sandbox.Spec{Network: sandbox.Network{Rules: []egress.Rule{{Host: "api.example.com"}}}}}
	in.setupEgress()
	host := strings.ToLower(keyID) + ".evil.test"
	call := in.rec.Begin()
	ev := egress.Event{Time: time.Now(), Host: host, Port: 443, Decision: "deny", Reason: "no rule allows " + host + ":443"}
	in.spec.Network.Opened(ev)
	in.spec.Network.Log(ev)
	var rec audit.Record
	in.rec.Finish(call, &rec)
	seen := buf.String() + fmt.Sprint(obs.evs) + fmt.Sprint(rec.Domains)
	if strings.Contains(strings.ToLower(seen), strings.ToLower(keyID)) {
		t.Errorf("the key id came through:\n%s", seen)
	}
	if len(obs.evs) != 1 || obs.evs[0].Host != "[REDACTED:AWS_KEY].evil.test" || len(rec.Domains) != 1 || rec.Domains[0].Host != "[REDACTED:AWS_KEY].evil.test" {
		t.Errorf("audited %+v, call domains %+v", obs.evs, rec.Domains)
	}
}

// A secret event's host (lower-cased, split into labels) and where (a
// header name, re-cased) are redacted before the log and the audit.
func TestSecretEventRedactedInAnyCase(t *testing.T) {
	const keyID = "AKIAZ7Q3XR5TW2PL9MVK"
	book := &redact.Book{}
	if err := book.Add("AWS_KEY", []byte(keyID)); err != nil {
		t.Fatal(err)
	}
	ev := redactSecretEvent(book, credinject.Event{Kind: "exfiltration", Credential: "GH",
		Host:  strings.ToLower(keyID[:10]) + "." + strings.ToLower(keyID[10:]) + ".files.example.com",
		Where: "header Akiaz7q3xr5tw2pl9mvk", Reason: "placeholder of GH in header Akiaz7q3xr5tw2pl9mvk"})
	var buf strings.Builder
	SecretEventLogger(slog.New(slog.NewTextHandler(&buf, nil)), "srv")(ev)
	if strings.Contains(strings.ToLower(buf.String()+fmt.Sprint(ev)), strings.ToLower(keyID)) ||
		strings.Contains(strings.ToLower(buf.String()), strings.ToLower(keyID[:10])) {
		t.Errorf("the key id came through: %+v\n%s", ev, buf.String())
	}
}
