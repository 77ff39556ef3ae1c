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
// any server starts for it. A session waits for its servers' starts at
// most sessionStartWait once one of them runs; one still starting then
// joins the session when it runs, announced by list_changed
// (sessionstart.go).
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
//
// Both protocol eras are served downstream (modern.go). A session-based
// client (up to 2025-11-25) begins with initialize, as it always has. A
// client of the sessionless revision (2026-07-28) sends its protocol
// version, client info and capabilities in every request's _meta; over
// HTTP its requests (MCP-Protocol-Version 2026-07-28, no Mcp-Session-Id)
// go to the SDK's stateless handler, which checks Mcp-Method and Mcp-Name
// against the body, while the gateway checks Mcp-Param-* against the
// upstream tool's x-mcp-header annotations (headers.go: early on the raw
// body, for a 400, and again on the dispatcher's own decode, failing
// closed on what it cannot check). With no protocol session, the
// gateway session is the credential's: one per client identity over HTTP
// (idle-closed like a session), the connection over stdio; its first
// request binds it to its servers as initialize does. server/discover
// answers with what those servers offer; list and read results carry
// ttlMs 0 and cacheScope "private" (what a client sees is filtered for it,
// and may change with any pin or policy change); lists are in a
// deterministic order; trace context in _meta reaches the servers and
// Call.Trace.
//
// Upstream, a server is spoken to in the revision of the clients an
// instance serves: 2026 clients get instances opened with server/discover
// (and a subscriptions/listen stream for list changes) when the server
// supports it, else initialized ones; legacy clients get initialized
// instances, except for a server that refuses initialize but answers
// server/discover (asked only then): it serves them in the new revision
// too, and its input_required rounds are answered for them
// (mrtr2025.go): elicitation and sampling as server→client requests to
// the client, roots with the sandbox's mounts, until a final result. A
// 2026 request never reaches a session-based server with the
// new revision's _meta, and a 2026 client is never sent a request: what an
// initialized server asks (elicitation, sampling) while it works on a
// 2026 call, and a Call hook's approval form, become input_required
// results (mrtr.go). The call is parked in the gateway, and the
// requestState is the gateway's: HMAC-SHA256 under a per-gateway random
// key, bound to the client identity, method, name and exact arguments,
// valid for one retry and for a limited time; anything else is refused
// without touching the parked call. A 2026 server's roots/list input
// requests are answered with the sandbox's mounts, as a session-based
// server's roots/list is (roots2026.go): the client's roots never reach a
// server.
package gateway
