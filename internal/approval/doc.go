// Package approval is the human approval broker. A tool call that policy
// sends to review (or a changed tool definition to trust) is held by
// Broker.Ask until a human decides, a remembered decision answers, or the
// timeout denies it.
//
// # Channels
//
// Three channels may answer, and the first decision wins:
//
//   - MCP elicitation to the calling client: the gateway passes an
//     Elicitor to Ask, which is offered "once", "session" and "deny".
//     "always" is not offered there: the calling client is the party under
//     review, so only the operator's channels can persist a decision.
//   - The CLI (mcpbox approvals, approve, deny), through the gateway's
//     admin socket, to Broker.Pending and Broker.Decide.
//   - A JSON HTTP endpoint, Broker.Handler, for a dashboard; the caller
//     mounts it behind its own authentication.
//
// No answer within Options.Timeout (2 minutes by default) is a deny, as is
// the call's context ending or the broker closing. A request whose call's
// context ended (the client cancelled it or ended its session, the gateway
// shut down; the reason comes from context.Cause) is stored as cancelled,
// and a later Decide fails with ErrCancelled: an approval cannot outlive
// its request and run a call for nobody. Options.OnDecision is
// called exactly once for every decided request, remembered answers and
// timeouts included, with who decided (Decision.By): this is the audit
// hook.
//
// # Remembering
//
// An allow is scoped: once (this request), session (the same client,
// session, server and tool, until EndSession or Revoke; held in memory) or
// always (the same client, server and tool, in the approval_remembered
// table until Revoke, surviving restarts). A deny is never remembered: the
// next call asks again. Keeping denies out keeps revocation one-sided and
// simple; a human who wants a call never to happen changes the policy.
// Trust requests are never remembered either: each changed definition is
// reviewed.
//
// # Storage
//
// The broker shares the caller's *sql.DB (the audit store's SQLite file;
// this package registers the pure-Go "sqlite" driver) and creates its
// tables if missing (and adds the columns a database of an earlier
// version lacks). Every request is recorded in approval_requests with its
// redacted Summary and Arguments, status and who decided. On New, requests an
// earlier process left pending are marked expired, since the calls that
// waited on them are gone; so two live brokers must not share a database.
// If a decision cannot be recorded, the call is denied: fail closed.
// Answers from remembered decisions are not stored as requests; the audit
// hook records them, By "remembered:ID" naming the request that made the
// decision.
//
// # What the approver sees
//
// Every argument, because approving a call without seeing which
// repository or path it touches is no review, and a summary cut short
// hides whatever comes after the cut. The caller passes the whole
// arguments, redacted, as Request.Arguments; they are stored in
// approval_requests, returned whole by Pending and Handler, and Message
// (the elicitation) lists every one of them with Show: one line per
// argument, keys and strings quoted in Go syntax (so a key holding a
// newline cannot pose as a line of the prompt), strings over 200
// characters folded. Arguments over MaxArguments bytes are refused, not
// shown in part. Summary is a one-line overview for tables (keys quoted,
// values cut to 40 characters). Both are for the approver only and must
// not go to places argument values may not reach. Text fields of a
// request are cleaned of control and bidirectional-override characters
// so they cannot rewrite the approver's terminal line.
package approval
