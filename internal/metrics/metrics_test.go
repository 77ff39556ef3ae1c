package metrics

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"mcpbox/internal/audit"
)

// scrape fetches h and parses the text format.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	return fams
}

// value is the counter, gauge or histogram count of name with labels.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	var sum float64
next:
	for _, m := range f.Metric {
		for _, lp := range m.Label {
			if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

// TestMetricsMatchTheAudit: a scripted run's records, written to a real
// audit store and read back, are observed; the scrape's counts equal
// counts computed from the records themselves.
func TestMetricsMatchTheAudit(t *testing.T) {
	st, err := audit.Open(audit.Options{Path: filepath.Join(t.TempDir(), "audit.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	script := []audit.Record{
		{Event: audit.EventCall, Server: "fs", Tool: "read", Decision: "allow", Outcome: audit.OutcomeOK, Duration: 20 * time.Millisecond},
		{Event: audit.EventCall, Server: "fs", Tool: "read", Decision: "allow", Outcome: audit.OutcomeIsError, Duration: time.Second},
		{Event: audit.EventCall, Server: "fs", Tool: "write", Decision: "deny", Outcome: audit.OutcomeDenied},
		// A tool the gateway does not list, and a server not configured:
		// both fold into "other".
		{Event: audit.EventCall, Server: "fs", Tool: "x<script>", Decision: "allow", Outcome: audit.OutcomeOK},
		{Event: audit.EventCall, Server: "rogue", Tool: "read", Decision: "allow", Outcome: audit.OutcomeOK},
		{Event: audit.EventApproval, Server: "fs", Decision: "approved"},
		{Event: audit.EventEgress, Server: "fs", Decision: "deny", Domains: []audit.Domain{{Host: "evil.example", Port: 443, Decision: "deny"}}},
		{Event: audit.EventEgress, Server: "fs", Decision: "allow", Domains: []audit.Domain{{Host: "ok.example", Port: 443, Decision: "allow", BytesUp: 10, BytesDown: 300}}},
		{Event: audit.EventPin, Server: "fs", Decision: "changed"},
		{Event: audit.EventTrust, Server: "fs"},
		{Event: audit.EventRestart, Server: "fs", Decision: "restart"},
		{Event: audit.EventSandboxStart, Server: "fs"},
	}
	for _, r := range script {
		st.Add(r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := st.Query(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	pending := []time.Time{time.Now().Add(-3 * time.Second), time.Now().Add(-time.Second)}
	m := New(Options{
		Servers:   []string{"fs"},
		KnownTool: func(server, tool string) bool { return server == "fs" && (tool == "read" || tool == "write") },
		Gauges: func() Gauges {
			return Gauges{Pending: pending, Sandboxes: []Sandbox{
				{Server: "fs", State: "running", Memory: 1000, Pids: 3},
				{Server: "fs", State: "paused", Memory: 500, Pids: 1},
			}}
		},
		Redactions: func() float64 { return 7 },
	})
	for _, r := range recs {
		m.Observe(r)
	}
	fams := scrape(t, m.Handler())

	// Expected counts from the records, not from the script.
	calls := map[[4]string]float64{}
	egress := map[string]float64{}
	for _, r := range recs {
		switch r.Event {
		case audit.EventCall:
			server, tool := r.Server, r.Tool
			if server != "fs" {
				server = "other"
			}
			if server != "fs" || (tool != "read" && tool != "write") {
				tool = "other"
			}
			calls[[4]string{server, tool, r.Decision, r.Outcome}]++
		case audit.EventEgress:
			egress[r.Domains[0].Decision]++
		}
	}
	for k, n := range calls {
		got := value(fams, "mcpbox_calls_total", map[string]string{"server": k[0], "tool": k[1], "decision": k[2], "outcome": k[3]})
		if got != n {
			t.Errorf("calls %v = %v, want %v", k, got, n)
		}
	}
	if got := value(fams, "mcpbox_calls_total", nil); got != 5 {
		t.Errorf("calls in all %v, want 5", got)
	}
	if got := value(fams, "mcpbox_call_duration_seconds", map[string]string{"server": "fs", "tool": "read"}); got != 2 {
		t.Errorf("latency samples of fs/read %v, want 2", got)
	}
	for dec, n := range egress {
		if got := value(fams, "mcpbox_egress_connections_total", map[string]string{"server": "fs", "decision": dec}); got != n {
			t.Errorf("egress %s = %v, want %v", dec, got, n)
		}
	}
	for name, want := range map[string]float64{
		"mcpbox_approvals_total":      1,
		"mcpbox_pin_changes_total":    2,
		"mcpbox_restarts_total":       1,
		"mcpbox_sandbox_events_total": 1,
		"mcpbox_approvals_pending":    2,
		"mcpbox_sandboxes":            2,
		"mcpbox_sandbox_memory_bytes": 1500,
		"mcpbox_sandbox_pids":         4,
		"mcpbox_redactions_total":     7,
		"mcpbox_audit_records_total":  float64(len(recs)),
	} {
		if got := value(fams, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := value(fams, "mcpbox_egress_bytes_total", map[string]string{"direction": "down"}); got != 300 {
		t.Errorf("egress bytes down %v, want 300", got)
	}
	if got := value(fams, "mcpbox_approval_oldest_wait_seconds", nil); got < 3 || got > 60 {
		t.Errorf("oldest wait %v, want about 3 s", got)
	}
	// No label value outside the bounded sets.
	for name, f := range fams {
		for _, m := range f.Metric {
			for _, lp := range m.Label {
				if strings.ContainsAny(lp.GetValue(), "<>") || lp.GetValue() == "rogue" {
					t.Errorf("%s has an unbounded label %s=%q", name, lp.GetName(), lp.GetValue())
				}
			}
		}
	}
}

func TestHealthAndReady(t *testing.T) {
	get := func(h http.Handler) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, string(b)
	}
	if code, body := get(Healthz()); code != 200 || body != "ok\n" {
		t.Errorf("healthz %d %q", code, body)
	}
	var err error = io.ErrUnexpectedEOF
	ready := Readyz(func() error { return err })
	if code, body := get(ready); code != 503 || !strings.Contains(body, "unexpected EOF") {
		t.Errorf("readyz while failing %d %q", code, body)
	}
	err = nil
	if code, _ := get(ready); code != 200 {
		t.Errorf("readyz when ready %d", code)
	}
}
