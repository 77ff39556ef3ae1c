// Package metrics is the Prometheus side of a running `mcpbox serve`: the
// counters and histograms fed from the audit records as they are
// committed (Observe), the gauges read at scrape time from a callback
// (approvals pending, sandboxes by state, their memory and pids), and the
// /metrics, /healthz and /readyz handlers.
//
// Label sets are bounded: a server label is a configured server or
// "other", a tool label a tool the gateway lists for that server (the
// KnownTool callback) or "other", an outcome one of audit.Outcomes or
// "other", a decision one of a fixed list or "other". No argument value,
// client name, session, sandbox id or host ever becomes a label: a client
// or a server could otherwise mint series without end (a memory
// exhaustion of the gateway and of the scraper) or smuggle data into a
// monitoring system that is not meant to hold it.
//
// It must not import anything above internal/audit, decide anything or
// write the audit: it only counts. The handlers do no authentication;
// the caller mounts /metrics behind its own (the gateway's credentials),
// or on a separate loopback listener.
package metrics
