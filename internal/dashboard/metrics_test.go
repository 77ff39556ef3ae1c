package dashboard

import (
	"net/http"
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"mcpbox/internal/audit"
	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
	"mcpbox/internal/metrics"
)

// TestMetricsFollowTheAudit: the metrics fed from the same stream as the
// page, wired as serve will wire them, count what the audit holds after
// a scripted run: calls by decision and outcome, approvals, egress.
func TestMetricsFollowTheAudit(t *testing.T) {
	var m *metrics.Metrics
	r := newRigWith(t, func(g *guard.Guard, gw *gateway.Gateway) func(audit.Record) {
		b := g.WebAdmin(gw)
		m = metrics.New(metrics.Options{
			Servers: []string{"echo", "tools"}, KnownTool: g.KnownTool,
			Gauges: func() metrics.Gauges {
				p, _ := b.Approvals()
				var out metrics.Gauges
				for _, q := range p {
					out.Pending = append(out.Pending, q.Time)
				}
				for _, s := range b.Sandboxes() {
					out.Sandboxes = append(out.Sandboxes, metrics.Sandbox{Server: s.Server, State: s.State, Memory: s.Memory, Pids: s.Pids})
				}
				return out
			},
		})
		return m.Observe
	})
	b := r.browserLoggedIn(t)
	r.call(t, "hello")
	r.call(t, "forbidden-zone")
	r.call(t, "again")
	id, res := pendingCall(t, r, b, "review metrics")
	scrapeOnce := scrape(t, m)
	if got := sum(scrapeOnce, "mcpbox_approvals_pending", nil); got != 1 {
		t.Errorf("approvals pending while one waits: %v", got)
	}
	if code, body := b.post("/ui/api/approvals/"+id, b.csrf, map[string]string{"decision": "allow"}); code != 200 {
		t.Fatalf("approve: %d %s", code, body)
	}
	<-res
	refusedEgress(r, "evil.example")
	r.flush(t)
	all := r.records(t, "")
	var fams map[string]*dto.MetricFamily
	waitFor(t, "the metrics to see every record", func() bool {
		fams = scrape(t, m)
		return sum(fams, "mcpbox_audit_records_total", nil) == float64(len(all))
	})
	type key struct{ tool, decision, outcome string }
	calls := map[key]float64{}
	egress := map[string]float64{}
	var approvals float64
	for _, rec := range all {
		switch rec.Event {
		case audit.EventCall:
			calls[key{rec.Tool, rec.Decision, rec.Outcome}]++
		case audit.EventEgress:
			egress[rec.Decision]++
		case audit.EventApproval:
			approvals++
		}
	}
	if len(calls) < 3 {
		t.Fatalf("the script made too few kinds of call: %v", calls)
	}
	for k, n := range calls {
		if got := sum(fams, "mcpbox_calls_total", map[string]string{"server": "echo", "tool": k.tool, "decision": k.decision, "outcome": k.outcome}); got != n {
			t.Errorf("calls %+v: %v, want %v", k, got, n)
		}
	}
	for d, n := range egress {
		if got := sum(fams, "mcpbox_egress_connections_total", map[string]string{"server": "echo", "decision": d}); got != n {
			t.Errorf("egress %s: %v, want %v", d, got, n)
		}
	}
	if got := sum(fams, "mcpbox_approvals_total", nil); got != approvals || approvals != 1 {
		t.Errorf("approvals %v, audit %v", got, approvals)
	}
	if got := sum(fams, "mcpbox_approvals_pending", nil); got != 0 {
		t.Errorf("approvals pending after the decision: %v", got)
	}
	var n float64
	for _, c := range calls {
		n += c
	}
	if got := sum(fams, "mcpbox_call_duration_seconds", map[string]string{"server": "echo", "tool": "echo"}); got != n {
		t.Errorf("latency samples %v, want one per call (%v)", got, n)
	}
}

func scrape(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d", rec.Code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	return fams
}

// sum adds the samples of name whose labels include labels.
func sum(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	var total float64
	f := fams[name]
	if f == nil {
		return 0
	}
next:
	for _, mt := range f.Metric {
		have := map[string]string{}
		for _, lp := range mt.Label {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case mt.Counter != nil:
			total += mt.Counter.GetValue()
		case mt.Gauge != nil:
			total += mt.Gauge.GetValue()
		case mt.Histogram != nil:
			total += float64(mt.Histogram.GetSampleCount())
		}
	}
	return total
}
