//go:build linux

// Package load drives a running `mcpbox serve --http` with many concurrent
// MCP clients and measures what it does under that load: throughput,
// per-call latency (p50, p99, p99.9) against an idle baseline, failed calls
// by kind, and the gateway's resident memory, file descriptors, threads,
// goroutines, sandboxes, sandbox cgroups and mounts over time. Afterwards it
// checks the audit: every call it made has exactly one call record, and the
// hash chain verifies (`mcpbox logs verify`).
//
// Two scenarios: "calls" (sessions spread over client identities, each
// making a fixed number of tool calls against the built-in workspace
// server, an npm server, or both) and "churn" (sessions opened, used once
// and closed in a loop, with the gateway's resources compared before and
// after a settle period: the leak check).
//
// [Run] starts the gateway itself from a config it writes to a temp dir
// (or uses one given by URL), so cmd/mcpbox-load and the package's test
// share one code path. It reads the gateway's goroutine count and sandbox
// list over the gateway's admin socket, and its memory, descriptors and
// mounts from /proc; it is Linux only, like serve.
package load
