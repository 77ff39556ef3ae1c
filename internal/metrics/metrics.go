package metrics

import (
	"net/http"
	"slices"
	"time"

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

// Metrics holds the metrics of one serve (not process-wide, so two
// gateways in one test process do not collide). Observe and the handler
// are safe for concurrent use.
type Metrics struct {
	opts Options

	calls        *vec
	callDuration *vec
	approvals    *vec
	egress       *vec
	egressBytes  *vec
	pins         *vec
	restarts     *vec
	sandboxes    *vec
	records      *vec
	approvalWait *vec // the approval records' Duration
	sandboxStart *vec // the sandbox start records' Duration
}

// New makes the metrics of one serve; its handler also serves the Go
// runtime's and the process's.
func New(o Options) *Metrics {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Metrics{
		opts: o,
		calls: newCounterVec("mcpbox_calls_total", "Tool calls by server, tool, decision and outcome.",
			"server", "tool", "decision", "outcome"),
		callDuration: newHistogramVec("mcpbox_call_duration_seconds", "Tool call latency, approval wait included.",
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}, "server", "tool"),
		approvals: newCounterVec("mcpbox_approvals_total", "Approval requests decided, by server and decision.",
			"server", "decision"),
		egress: newCounterVec("mcpbox_egress_connections_total", "Egress connections by server and decision.",
			"server", "decision"),
		egressBytes: newCounterVec("mcpbox_egress_bytes_total", "Egress bytes by server, decision and direction (up, down).",
			"server", "decision", "direction"),
		pins: newCounterVec("mcpbox_pin_changes_total", "Pin events (new, changed, removed definitions) and trusts, by server.",
			"server", "decision"),
		restarts: newCounterVec("mcpbox_restarts_total", "Restart policy decisions after a server ended (restart, give_up).",
			"server", "decision"),
		sandboxes: newCounterVec("mcpbox_sandbox_events_total", "Sandbox starts, stops, crashes, pauses and resumes, by server.",
			"server", "event"),
		records: newCounterVec("mcpbox_audit_records_total", "Audit records committed, by event.", "event"),
		approvalWait: newHistogramVec("mcpbox_approval_wait_seconds", "How long approval requests waited for their decision, by server and decision.",
			[]float64{.1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}, "server", "decision"),
		sandboxStart: newHistogramVec("mcpbox_sandbox_start_seconds", "Sandbox start latency (until the server runs), by server.",
			[]float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}, "server"),
	}
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, m.families())
	})
}

// families snapshots every metric for one scrape.
func (m *Metrics) families() []*family {
	var fams []*family
	for _, v := range []*vec{m.calls, m.callDuration, m.approvals, m.egress, m.egressBytes, m.pins,
		m.restarts, m.sandboxes, m.records, m.approvalWait, m.sandboxStart} {
		if f := v.family(); f != nil {
			fams = append(fams, f)
		}
	}
	if m.opts.Gauges != nil {
		fams = append(fams, m.gauges()...)
	}
	if m.opts.Redactions != nil {
		f := gauge("mcpbox_redactions_total", "Secrets redacted from what crossed the gateway.", m.opts.Redactions())
		f.typ = typeCounter
		fams = append(fams, f)
	}
	fams = append(fams, goFamilies()...)
	return append(fams, processFamilies()...)
}

// Observe counts one committed audit record.
func (m *Metrics) Observe(r audit.Record) {
	m.records.inc(bounded(r.Event, eventNames))
	server := m.server(r.Server)
	switch r.Event {
	case audit.EventCall:
		tool := m.tool(r.Server, r.Tool)
		m.calls.inc(server, tool, decision(r.Decision), bounded(r.Outcome, audit.Outcomes))
		m.callDuration.observe(r.Duration.Seconds(), server, tool)
	case audit.EventApproval:
		m.approvals.inc(server, decision(r.Decision))
		if r.Duration > 0 { // a decision on a request (not a revocation)
			m.approvalWait.observe(r.Duration.Seconds(), server, decision(r.Decision))
		}
	case audit.EventEgress:
		for _, d := range r.Domains {
			dec := decision(cmpOr(d.Decision, r.Decision))
			m.egress.inc(server, dec)
			m.egressBytes.add(float64(max(d.BytesUp, 0)), server, dec, "up")
			m.egressBytes.add(float64(max(d.BytesDown, 0)), server, dec, "down")
		}
	case audit.EventPin, audit.EventTrust:
		dec := r.Decision
		if r.Event == audit.EventTrust {
			dec = "trusted"
		}
		m.pins.inc(server, decision(dec))
	case audit.EventRestart:
		m.restarts.inc(server, decision(r.Decision))
	case audit.EventSandboxStart, audit.EventSandboxStop, audit.EventSandboxCrash,
		audit.EventSandboxPause, audit.EventSandboxResume:
		m.sandboxes.inc(server, r.Event)
		if r.Event == audit.EventSandboxStart && r.Duration > 0 {
			m.sandboxStart.observe(r.Duration.Seconds(), server)
		}
	}
}

// eventNames bounds the event label.
var eventNames = []string{
	audit.EventCall, audit.EventSessionStart, audit.EventSessionEnd, audit.EventSandboxStart,
	audit.EventSandboxStop, audit.EventSandboxCrash, audit.EventSandboxPause, audit.EventSandboxResume,
	audit.EventSnapshot, audit.EventEgress, audit.EventApproval, audit.EventPolicyReload, audit.EventPin,
	audit.EventTrust, audit.EventScan, audit.EventRestart, audit.EventRetention, audit.EventIntegrity,
	audit.EventServerUnavailable, audit.EventGatewayCrash, audit.EventOAuthReauthorized,
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
