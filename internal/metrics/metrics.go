package metrics

import (
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"mcpbox/internal/audit"
)

// other stands for every label value outside the bounded set.
const other = "other"

// decisions bounds the decision label of calls, egress, approvals, pins
// and restarts: the values the guard, the egress proxy and the restart
// policy write. Anything else counts as "other".
var decisions = []string{
	"allow", "deny", "approved", "denied", "cancelled", "revoked", "rate_limited",
	"new", "changed", "removed", "trusted", "restart", "give_up",
}

// Sandbox is one sandbox as the gauges see it.
type Sandbox struct {
	Server string
	State  string // running, paused, stopped, ...
	Memory uint64 // bytes
	Pids   uint64
}

// Gauges are the values read at each scrape.
type Gauges struct {
	// Pending are the times the pending approval requests were asked.
	Pending []time.Time
	// Sandboxes are the current sandboxes.
	Sandboxes []Sandbox
}

// Options configure New.
type Options struct {
	// Servers are the configured servers: the values of the server label
	// (anything else is "other").
	Servers []string
	// KnownTool, if non-nil, says whether tool is a tool the gateway
	// lists for server; nil: every tool is "other".
	KnownTool func(server, tool string) bool
	// Gauges, if non-nil, is called at each scrape for the live values;
	// nil: those metrics stay absent.
	Gauges func() Gauges
	// Redactions, if non-nil, is the number of secrets redacted so far
	// (mcpbox_redactions_total); nil: absent.
	Redactions func() float64
	// Now, if non-nil, is the clock of the approval waits; nil: time.Now.
	Now func() time.Time
}

// Metrics holds the registry of one serve. Observe is safe for
// concurrent use.
type Metrics struct {
	opts Options
	reg  *prometheus.Registry

	calls        *prometheus.CounterVec
	callDuration *prometheus.HistogramVec
	approvals    *prometheus.CounterVec
	egress       *prometheus.CounterVec
	egressBytes  *prometheus.CounterVec
	pins         *prometheus.CounterVec
	restarts     *prometheus.CounterVec
	sandboxes    *prometheus.CounterVec
	records      *prometheus.CounterVec
	approvalWait *prometheus.HistogramVec // the approval records' Duration
	sandboxStart *prometheus.HistogramVec // the sandbox start records' Duration
}

// New registers the metrics of one serve in a registry of its own (not
// the process-wide default, so two gateways in one test process do not
// collide), with the Go runtime and process collectors.
func New(o Options) *Metrics {
	if o.Now == nil {
		o.Now = time.Now
	}
	m := &Metrics{opts: o, reg: prometheus.NewRegistry()}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpbox_calls_total", Help: "Tool calls by server, tool, decision and outcome.",
	}, []string{"server", "tool", "decision", "outcome"})
	m.callDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "mcpbox_call_duration_seconds", Help: "Tool call latency, approval wait included.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"server", "tool"})
	m.approvals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpbox_approvals_total", Help: "Approval requests decided, by server and decision.",
	}, []string{"server", "decision"})
	m.egress = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpbox_egress_connections_total", Help: "Egress connections by server and decision.",
	}, []string{"server", "decision"})
	m.egressBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpbox_egress_bytes_total", Help: "Egress bytes by server, decision and direction (up, down).",
	}, []string{"server", "decision", "direction"})
	m.pins = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpbox_pin_changes_total", Help: "Pin events (new, changed, removed definitions) and trusts, by server.",
	}, []string{"server", "decision"})
	m.restarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpbox_restarts_total", Help: "Restart policy decisions after a server ended (restart, give_up).",
	}, []string{"server", "decision"})
	m.sandboxes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpbox_sandbox_events_total", Help: "Sandbox starts, stops, crashes, pauses and resumes, by server.",
	}, []string{"server", "event"})
	m.records = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpbox_audit_records_total", Help: "Audit records committed, by event.",
	}, []string{"event"})
	m.approvalWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "mcpbox_approval_wait_seconds", Help: "How long approval requests waited for their decision, by server and decision.",
		Buckets: []float64{.1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
	}, []string{"server", "decision"})
	m.sandboxStart = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "mcpbox_sandbox_start_seconds", Help: "Sandbox start latency (until the server runs), by server.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"server"})
	m.reg.MustRegister(m.calls, m.callDuration, m.approvals, m.egress, m.egressBytes, m.pins,
		m.restarts, m.sandboxes, m.records, m.approvalWait, m.sandboxStart,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if o.Gauges != nil {
		m.reg.MustRegister(gaugeCollector{m})
	}
	if o.Redactions != nil {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "mcpbox_redactions_total", Help: "Secrets redacted from what crossed the gateway.",
		}, o.Redactions))
	}
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Registry is the registry, for a caller that adds collectors (an
// OpenTelemetry bridge, say).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Observe counts one committed audit record.
func (m *Metrics) Observe(r audit.Record) {
	m.records.WithLabelValues(bounded(r.Event, eventNames)).Inc()
	server := m.server(r.Server)
	switch r.Event {
	case audit.EventCall:
		tool := m.tool(r.Server, r.Tool)
		m.calls.WithLabelValues(server, tool, decision(r.Decision), bounded(r.Outcome, audit.Outcomes)).Inc()
		m.callDuration.WithLabelValues(server, tool).Observe(r.Duration.Seconds())
	case audit.EventApproval:
		m.approvals.WithLabelValues(server, decision(r.Decision)).Inc()
		if r.Duration > 0 { // a decision on a request (not a revocation)
			m.approvalWait.WithLabelValues(server, decision(r.Decision)).Observe(r.Duration.Seconds())
		}
	case audit.EventEgress:
		for _, d := range r.Domains {
			dec := decision(cmpOr(d.Decision, r.Decision))
			m.egress.WithLabelValues(server, dec).Inc()
			m.egressBytes.WithLabelValues(server, dec, "up").Add(float64(max(d.BytesUp, 0)))
			m.egressBytes.WithLabelValues(server, dec, "down").Add(float64(max(d.BytesDown, 0)))
		}
	case audit.EventPin, audit.EventTrust:
		dec := r.Decision
		if r.Event == audit.EventTrust {
			dec = "trusted"
		}
		m.pins.WithLabelValues(server, decision(dec)).Inc()
	case audit.EventRestart:
		m.restarts.WithLabelValues(server, decision(r.Decision)).Inc()
	case audit.EventSandboxStart, audit.EventSandboxStop, audit.EventSandboxCrash,
		audit.EventSandboxPause, audit.EventSandboxResume:
		m.sandboxes.WithLabelValues(server, r.Event).Inc()
		if r.Event == audit.EventSandboxStart && r.Duration > 0 {
			m.sandboxStart.WithLabelValues(server).Observe(r.Duration.Seconds())
		}
	}
}

// eventNames bounds the event label.
var eventNames = []string{
	audit.EventCall, audit.EventSessionStart, audit.EventSessionEnd, audit.EventSandboxStart,
	audit.EventSandboxStop, audit.EventSandboxCrash, audit.EventSandboxPause, audit.EventSandboxResume,
	audit.EventSnapshot, audit.EventEgress, audit.EventApproval, audit.EventPolicyReload, audit.EventPin,
	audit.EventTrust, audit.EventScan, audit.EventRestart, audit.EventRetention, audit.EventIntegrity,
}

func (m *Metrics) server(s string) string { return bounded(s, m.opts.Servers) }

func (m *Metrics) tool(server, tool string) string {
	if tool == "" || m.opts.KnownTool == nil || !slices.Contains(m.opts.Servers, server) || !m.opts.KnownTool(server, tool) {
		return other
	}
	return tool
}

func decision(d string) string { return bounded(d, decisions) }

// bounded is v if it is one of set, else "other" ("" stays "").
func bounded(v string, set []string) string {
	if v == "" || slices.Contains(set, v) {
		return v
	}
	return other
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
