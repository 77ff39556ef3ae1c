package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	descPending = prometheus.NewDesc("mcpbox_approvals_pending",
		"Approval requests waiting for a human.", nil, nil)
	descOldest = prometheus.NewDesc("mcpbox_approval_oldest_wait_seconds",
		"How long the oldest pending approval request has waited (0: none).", nil, nil)
	descSandboxes = prometheus.NewDesc("mcpbox_sandboxes",
		"Sandboxes by server and state.", []string{"server", "state"}, nil)
	descMemory = prometheus.NewDesc("mcpbox_sandbox_memory_bytes",
		"Memory of the sandboxes of a server, summed.", []string{"server"}, nil)
	descPids = prometheus.NewDesc("mcpbox_sandbox_pids",
		"Processes in the sandboxes of a server, summed.", []string{"server"}, nil)
)

// states bounds the state label.
var states = []string{"starting", "running", "paused", "stopped", "failed", "restarting"}

// gaugeCollector reads Options.Gauges at each scrape.
type gaugeCollector struct{ m *Metrics }

func (c gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPending
	ch <- descOldest
	ch <- descSandboxes
	ch <- descMemory
	ch <- descPids
}

func (c gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	g := c.m.opts.Gauges()
	now := c.m.opts.Now()
	var oldest float64
	for _, t := range g.Pending {
		oldest = max(oldest, now.Sub(t).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(len(g.Pending)))
	ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, oldest)
	type key struct{ server, state string }
	count := map[key]float64{}
	mem, pids := map[string]float64{}, map[string]float64{}
	for _, s := range g.Sandboxes {
		server := c.m.server(s.Server)
		count[key{server, bounded(s.State, states)}]++
		mem[server] += float64(s.Memory)
		pids[server] += float64(s.Pids)
	}
	for k, n := range count {
		ch <- prometheus.MustNewConstMetric(descSandboxes, prometheus.GaugeValue, n, k.server, k.state)
	}
	for s, v := range mem {
		ch <- prometheus.MustNewConstMetric(descMemory, prometheus.GaugeValue, v, s)
	}
	for s, v := range pids {
		ch <- prometheus.MustNewConstMetric(descPids, prometheus.GaugeValue, v, s)
	}
}

// Healthz answers 200 "ok" while the process serves HTTP at all.
func Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
}

// Readyz answers 200 "ready" when ready returns nil, else 503 with the
// error's text (ready is the caller's: the gateway attached, the audit
// store writing). A nil ready is always ready.
func Readyz(ready func() error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if ready != nil {
			if err := ready(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				w.Write([]byte("not ready: " + err.Error() + "\n"))
				return
			}
		}
		w.Write([]byte("ready\n"))
	})
}
