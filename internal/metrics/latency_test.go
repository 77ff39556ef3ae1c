package metrics

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"mcpbox/internal/audit"
)

// TestWaitAndStartLatency: the approval records' wait and the sandbox
// start records' latency (their Duration, read back from a real audit
// store) become the histograms mcpbox_approval_wait_seconds and
// mcpbox_sandbox_start_seconds; a revocation (no wait) is not a sample.
func TestWaitAndStartLatency(t *testing.T) {
	st, err := audit.Open(audit.Options{Path: filepath.Join(t.TempDir(), "audit.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, r := range []audit.Record{
		{Event: audit.EventApproval, Server: "fs", Decision: "approved", Duration: 2 * time.Second},
		{Event: audit.EventApproval, Server: "fs", Decision: "denied", Duration: 40 * time.Second},
		{Event: audit.EventApproval, Server: "fs", Decision: "approved", Duration: 500 * time.Millisecond},
		{Event: audit.EventApproval, Decision: "revoked"},
		{Event: audit.EventSandboxStart, Server: "fs", Duration: 120 * time.Millisecond},
		{Event: audit.EventSandboxStart, Server: "rogue", Duration: 3 * time.Second},
		{Event: audit.EventSandboxStop, Server: "fs", Duration: time.Hour},
	} {
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
	m := New(Options{Servers: []string{"fs"}})
	waits, starts := map[string][]float64{}, map[string][]float64{}
	for _, r := range recs {
		m.Observe(r)
		switch {
		case r.Event == audit.EventApproval && r.Duration > 0:
			waits[r.Decision] = append(waits[r.Decision], r.Duration.Seconds())
		case r.Event == audit.EventSandboxStart:
			server := r.Server
			if server != "fs" {
				server = "other"
			}
			starts[server] = append(starts[server], r.Duration.Seconds())
		}
	}
	fams := scrape(t, m.Handler())
	check := func(name string, labels map[string]string, want []float64) {
		t.Helper()
		if got := value(fams, name, labels); got != float64(len(want)) {
			t.Errorf("%s%v: %v samples, want %d", name, labels, got, len(want))
		}
		var sum float64
		for _, v := range want {
			sum += v
		}
		if got := histSum(fams, name, labels); got < sum-1e-9 || got > sum+1e-9 {
			t.Errorf("%s%v: sum %v, want %v", name, labels, got, sum)
		}
	}
	for dec, w := range waits {
		check("mcpbox_approval_wait_seconds", map[string]string{"server": "fs", "decision": dec}, w)
	}
	for server, s := range starts {
		check("mcpbox_sandbox_start_seconds", map[string]string{"server": server}, s)
	}
	if got := value(fams, "mcpbox_approval_wait_seconds", nil); got != 3 {
		t.Errorf("approval wait samples %v, want 3 (the revocation is none)", got)
	}
	if got := value(fams, "mcpbox_sandbox_start_seconds", nil); got != 2 {
		t.Errorf("sandbox start samples %v, want 2 (a stop is none)", got)
	}
}

// histSum is the sum of the histograms of name with labels.
func histSum(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	var sum float64
	f := fams[name]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.Metric {
		for _, lp := range m.Label {
			if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
				continue next
			}
		}
		sum += m.GetHistogram().GetSampleSum()
	}
	return sum
}
