// Package policy decides tool calls: it compiles the tools policies of a
// [config.Config] into an [Engine] that answers allow, approve (allowed
// after human review) or deny for each call, and a [Limiter] that applies
// each server's rate limits. It is plain data: no files, network or
// system calls.
//
// # Server policy
//
// A call is evaluated for (client, server, tool, args, annotations), where
// tool is the server's own tool name (without the gateway's prefix).
//
//  1. tools.rules, in order; the first rule that matches decides. A rule
//     matches when its tool glob (path.Match) matches the tool name and its
//     when condition (CEL, below) evaluates to true; a rule without when
//     matches every call of its tools.
//  2. When a when condition fails to evaluate (a missing key such as
//     args.repo when the call has no repo argument, a type mismatch, the
//     cost or time limit), the policy fails closed: a rule whose action is
//     allow does not match, and a deny or approve rule matches (the call is
//     denied, or reviewed). Either way the failure is named in
//     Decision.Reason, without any argument value. A condition that may
//     legitimately meet a missing key should test for it:
//     has(args.repo) && ....
//  3. If no rule matched: a tools.deny glob that matches denies; else a
//     tools.approve glob that matches approves; else a tools.allow glob
//     that matches allows; else tools.default decides (empty: deny).
//  4. Annotation review: when the result is allow, and it was not decided
//     by an explicit rule with action allow, and an annotation listed in
//     tools.approve_annotations is true for the tool's current definition,
//     the call is approved instead (needs review). As MCP says of
//     destructiveHint and openWorldHint, an annotation the tool leaves out
//     (or gives a value that is not a boolean) counts as true; only false
//     lets the call run. Also as MCP says, destructiveHint means nothing
//     for a tool that sets readOnlyHint true: leaving it out does not hold
//     such a tool (setting it true still does); openWorldHint holds it
//     whatever readOnlyHint says. approve_annotations absent means both
//     destructiveHint and openWorldHint; an empty list means none.
//     Annotations come from the server: they never turn deny or approve
//     into allow, but a false is believed.
//
// # Client policy
//
// A client with a tools key in clients narrows what it may call, on top of
// the server policy; its globs match "SERVER/TOOL". A deny glob that matches
// denies; an approve glob that matches requires at least review; an allow
// glob that matches leaves the server's decision as it is; no match denies.
// The final action is the strictest of the server's and the client's
// decisions (deny > approve > allow); on a tie the server's decision is
// reported. A client without a tools key adds no restriction. The client
// "" is the local stdio agent and has no client policy. A client name that
// the config does not list, when it lists clients, is denied (fail closed);
// so is a server that the config does not list.
//
// # Conditions (CEL)
//
// A when condition is a CEL expression (https://cel.dev) over these
// variables:
//
//	tool         string               the server's own tool name
//	server       string               the server's name in the config
//	client       string               the client's name; "" for the stdio agent
//	args         map(string, dyn)     the call's arguments, as JSON
//	annotations  map(string, dyn)     the tool's annotations, as JSON
//
// The CEL standard library and the strings extension (ext.Strings:
// lowerAscii, split, replace, ...) are available. The expression must
// type-check to bool; an expression of type dyn such as args.dry_run is
// rejected, write args.dry_run == true. Each condition is compiled once by
// [Compile].
//
// JSON numbers are CEL doubles (a json.Number argument is converted to a
// double too). Comparisons between numbers of different types work, so
// args.count > 5 and args.count == 5 do what they say; arithmetic does not
// mix types, so write args.count * 2.0 or int(args.count) * 2. A missing
// key is an evaluation error (see above): use has(args.key) or
// "key" in args to test for it.
//
// Evaluation is bounded. A condition without a comprehension (all, exists,
// exists_one, map, filter) does work linear in its own length times the
// size of the call. A condition with one has a cost limit (CEL's runtime
// cost, [CostLimit]), and all such conditions of one decision share a time
// budget ([EvalBudget]) checked inside the loops, so a huge or hostile args
// value cannot make a decision slow; exceeding either is an evaluation
// error, handled as in step 2.
//
// # Visibility
//
// [Engine.Visible] tells whether a tool could be allowed or approved at all,
// ignoring when conditions and annotations, so the gateway can hide the
// others from tool lists. It reports false only when the client policy
// denies the tool, or when the first rule whose tool glob matches the name
// and that could match is an unconditional deny rule, or no rule matches the
// name and the globs and default deny it. A visible tool may still be
// denied by a condition.
//
// # Decision.Rule
//
// Rule names what decided, for humans and the audit log:
// "servers.github.tools.rules[0] (mcpbox.yaml:14:9)" (the file position
// where the rule starts, when known), "servers.github.tools.deny",
// "servers.github.tools.approve", "servers.github.tools.allow",
// "servers.github.tools.default", "annotation destructiveHint",
// "annotation destructiveHint (not set, so true)",
// "clients[1].tools.deny", "clients[1].tools.approve", "clients[1].tools"
// (no glob of the client matched), "servers" or "clients" (unknown name).
//
// # Rate limits
//
// [Limiter] applies tools.rate_limit with token buckets that refill
// continuously: per_minute is one bucket per server shared by all clients
// and tools; per_client_tool is one bucket per client, server and tool.
// Each bucket holds burst tokens (0: its per-minute figure). A call takes a
// token from every applicable bucket or from none. Per-client buckets are
// kept for at most 10,000 client and tool pairs per server; beyond that
// the least recently used one is dropped, which can only make a dropped
// pair's next call start with a full bucket.
//
// # Errors
//
// [Compile] reports every problem at once as an [*Errors], one
// "FILE:LINE:COL: message" line each. A CEL syntax or type error points
// into the when value: at the offending character when the value is on one
// line and either plain or (with [Options].Source) quoted without escapes
// before the error, else at the start of the value.
package policy
