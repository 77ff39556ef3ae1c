package metrics

import (
	"maps"
	"net/http"
	"slices"
)

// states bounds the state label.
var states = []string{"starting", "running", "paused", "stopped", "failed", "restarting"}

// gauges reads Options.Gauges for one scrape.
func (m *Metrics) gauges() []*family {
	g := m.opts.Gauges()
	now := m.opts.Now()
	var oldest float64
	for _, t := range g.Pending {
		oldest = max(oldest, now.Sub(t).Seconds())
	}
	type key struct{ server, state string }
	count := map[key]float64{}
	mem, pids := map[string]float64{}, map[string]float64{}
	for _, s := range g.Sandboxes {
		server := m.server(s.Server)
		count[key{server, bounded(s.State, states)}]++
		mem[server] += float64(s.Memory)
		pids[server] += float64(s.Pids)
	}
	sandboxes := &family{name: "mcpbox_sandboxes", help: "Sandboxes by server and state.", typ: typeGauge}
	keys := make([]key, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int { return slices.Compare([]string{a.server, a.state}, []string{b.server, b.state}) })
	for _, k := range keys {
		sandboxes.add("", count[k], label{"server", k.server}, label{"state", k.state})
	}
	fams := []*family{
		gauge("mcpbox_approvals_pending", "Approval requests waiting for a human.", float64(len(g.Pending))),
		gauge("mcpbox_approval_oldest_wait_seconds", "How long the oldest pending approval request has waited (0: none).", oldest),
	}
	for _, f := range []*family{
		sandboxes,
		byServer("mcpbox_sandbox_memory_bytes", "Memory of the sandboxes of a server, summed.", mem),
		byServer("mcpbox_sandbox_pids", "Processes in the sandboxes of a server, summed.", pids),
	} {
		if len(f.samples) > 0 { // as client_golang: no samples, no family
			fams = append(fams, f)
		}
	}
	return fams
}

// byServer is a gauge family with a server label.
func byServer(name, help string, v map[string]float64) *family {
	f := &family{name: name, help: help, typ: typeGauge}
	for _, s := range slices.Sorted(maps.Keys(v)) {
		f.add("", v[s], label{"server", s})
	}
	return f
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
