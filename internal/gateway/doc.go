// Package gateway is the MCP gateway: it owns the downstream transports
// (stdio and Streamable HTTP, through the go-sdk's server machinery), runs
// one upstream connection per server and scope (a sandboxed stdio server or
// a remote HTTP server), aggregates their tools, prompts and resources under
// per-server prefixes, and routes every request, notification and
// server→client request to the right peer.
//
// Upstream traffic is handled as raw JSON-RPC (see peer): results and
// notifications pass through byte for byte, so fields this code does not
// know (new spec fields, _meta, annotations, icons) reach the client
// unchanged. The go-sdk server only frames and negotiates the downstream
// side; a receiving middleware answers every feature method from the
// upstreams, and a sending middleware lets raw notifications out.
//
// A client session owns a context that every one of its requests is bound
// to. Ending the session (an HTTP DELETE, SessionIdle, a stdio hang-up,
// Close) cancels that context first, with a cause (ErrSessionEnded,
// ErrSessionIdle, ErrShutdown): its calls' servers get
// notifications/cancelled and calls waiting for approval are withdrawn,
// and only then is the protocol session closed, which waits for its
// handlers. A session's slot under Options.MaxSessions is reserved before
// any server starts for it.
//
// A server may send as much as it likes; what it sends must not multiply
// on the way: list_changed notifications are coalesced per client and
// kind, the warnings it can cause are rate-limited (flood.go), a response
// that does not decode still ends its call (malformed.go), and every
// request to it is bounded by a call timeout.
//
// A server whose process ends is started again per Server.Restart
// (restart.go): a request in flight then, or one that comes during a long
// restart delay, gets a RestartError naming the server, how it ended and
// the restart; Hooks.Restart hears every decision.
//
// Policy, redaction and audit plug in through Hooks: every tool call passes
// Hooks.Call, and every payload that leaves an upstream passes
// Hooks.Filter before any client sees it.
package gateway
