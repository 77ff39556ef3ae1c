package guard

// The Call hook of the guard: a pipeline of small stages around the call
// itself, composed like go-sdk's method middleware (mcp/shared.go). Each
// stage may refuse the call (answer without calling next) or look at and
// replace what next returns; every stage writes what it decided into the
// one audit record of the call.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.opentelemetry.io/otel/attribute"

	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/integrity"
	"mcpbox/internal/policy"
	"mcpbox/internal/track"
)

// payloadLimit caps what include_payloads stores of one call.
const payloadLimit = 64 << 10

// callState is one call on its way through the stages.
type callState struct {
	c    *gateway.Call
	gs   *guardServer
	ann  map[string]any // the tool's annotations (untrusted)
	rec  *audit.Record  // the call's audit record, filled in by each stage
	t    *track.Sandbox // the sandbox that runs it, if known
	run  *runningCall   // it in the set of calls in hand
	next func(context.Context) (json.RawMessage, error)
}

// handler runs the rest of a call's pipeline.
type handler func(ctx context.Context, st *callState) (json.RawMessage, error)

// stage wraps the rest of the pipeline.
type stage func(next handler) handler

// chain composes stages around h, the first outermost.
func chain(h handler, stages ...stage) handler {
	for i := len(stages) - 1; i >= 0; i-- {
		h = stages[i](h)
	}
	return h
}

// forward is the innermost handler: the call itself, upstream.
func forward(ctx context.Context, st *callState) (json.RawMessage, error) { return st.next(ctx) }

// pipeline is the guard's call pipeline, outermost first: the audit
// record is committed last of all; the checks that may refuse a call run
// before it is forwarded; the result checks see the result in the order
// scan, credentials (the payload keeps what the client gets).
func (g *Guard) pipeline() handler {
	return chain(forward,
		g.audited,          // one record, committed before the result goes out
		g.traced,           // OpenTelemetry: the call's span, the upstream call's
		g.checkArgKeys,     // duplicate and case-variant keys
		g.rateLimited,      // policy rate limits
		g.decided,          // the policy: allow, deny or ask a human
		g.payload,          // include_payloads: the result
		credentials(g.log), // credentials: flag, redact or block
		g.resultScanned,    // results_scan
		g.classified,       // ok, is_error, error
		tracked,            // files and connections of its sandbox
	)
}

// call is the Call hook: the record and state of one call, through the
// pipeline.
func (g *Guard) call(ctx context.Context, c *gateway.Call, next func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	gs := g.servers[c.Server]
	st := &callState{c: c, gs: gs, ann: annotations(c.Definition), next: next}
	st.rec = &audit.Record{
		Time: time.Now(), Event: audit.EventCall, Client: c.Agent, Session: cmpOr(c.MCPSession, c.Session),
		Server: c.Server, Tool: c.Tool, Name: cmpOr(c.Name, gs.prefix+c.Tool), ArgShape: audit.Shape(c.Arguments),
		Category: category(gs, c.Tool, st.ann), Argv: g.commandArgv(gs, c),
	}
	if c.Trace != "" {
		// The client's W3C trace context, so that the record joins its
		// trace (the gateway passes it on to the server too).
		st.rec.Detail = map[string]string{audit.DetailTraceparent: g.book.String(c.Trace)}
	}
	st.t = g.tracks.Get(gs.launcher, c.Scope)
	if st.t != nil {
		st.rec.Sandbox, st.rec.Workspace = st.t.ID, st.t.Workspace
	}
	st.run = &runningCall{launcher: gs.launcher, scope: c.Scope, tool: c.Tool, started: st.rec.Time}
	defer g.running.add(st.run)()
	return g.handle(ctx, st)
}

// maxUnknownName bounds the name of an unknown tool in its record: the
// client chose it, and it may be anything up to a request's size.
const maxUnknownName = 200

// clientName is a name a client chose, redacted and cut for the audit.
func (g *Guard) clientName(s string) string {
	s = g.book.String(s)
	if r := []rune(s); len(r) > maxUnknownName {
		s = string(r[:maxUnknownName-1]) + "…"
	}
	return s
}

// unknown is the Unknown hook: a call refused as an unknown tool (hidden
// by the config or a pin, or not offered at all) gets a denied record,
// so that an agent probing for hidden tools shows in the audit; one that
// ended before its tool was looked up gets a record of what became of it
// (cancelled, or an error: its server's tools could not be listed, its
// session could not be opened); one refused for its Mcp-* headers, its
// _meta, its requestState, its arguments or too many calls waiting is
// denied.
func (g *Guard) unknown(c *gateway.Call, why string) {
	if why == gateway.UnknownUnlisted && g.servers[c.Server] != nil && !g.engine.Visible(policyClient(c.Agent), c.Server, c.Tool) {
		why = "the policy hides it from this client (tools.allow/deny, clients[].tools)"
	}
	rec := audit.Record{Event: audit.EventCall, Client: c.Agent, Session: cmpOr(c.MCPSession, c.Session), Server: c.Server,
		Tool: g.clientName(c.Tool), Name: g.clientName(c.Name), ArgShape: audit.Shape(c.Arguments), Decision: "deny", Outcome: audit.OutcomeDenied, Rule: "unknown tool: " + why}
	switch why {
	case gateway.UnknownCancelled:
		rec.Decision, rec.Outcome, rec.Rule = "cancelled", audit.OutcomeCancelled, "not run: "+why
	case gateway.UnknownUnlistable, gateway.UnknownNotStarted, gateway.UnknownNoSession:
		rec.Decision, rec.Outcome, rec.Rule = "deny", audit.OutcomeError, "not run: "+why
	case gateway.UnknownHeaderMismatch, gateway.UnknownStateRefused, gateway.UnknownTooManyWaiting, gateway.UnknownProtocolRefused,
		gateway.UnknownBadArguments:
		rec.Rule = "refused: " + why
	}
	if c.Trace != "" {
		rec.Detail = map[string]string{audit.DetailTraceparent: g.book.String(c.Trace)}
	}
	if g.payloads {
		rec.Payload = capPayload(g.book.JSON(c.Arguments))
	}
	g.Record(rec)
}

// audited commits the call's record and passes the outcome on only once
// it is durable (see commit); a call does not start while the store
// cannot write (auditFailing).
func (g *Guard) audited(next handler) handler {
	return func(ctx context.Context, st *callState) (res json.RawMessage, err error) {
		defer func() {
			st.rec.Duration = time.Since(st.rec.Time)
			res, err = g.commit(ctx, *st.rec, res, err)
		}()
		if res, ok := g.auditFailing(st.rec.Name, st.rec); ok {
			return res, nil
		}
		if g.payloads {
			st.rec.Payload = capPayload(g.book.JSON(st.c.Arguments))
		}
		return next(ctx, st)
	}
}

// checkArgKeys refuses arguments that hold more than audit.MaxValues
// values (before anything decodes them), or that repeat a key, nest too
// deep or are not JSON (see argKeys).
func (g *Guard) checkArgKeys(next handler) handler {
	return func(ctx context.Context, st *callState) (json.RawMessage, error) {
		// The rule is fixed text: why may quote a key the client chose.
		var why, rule, fix string
		if n := audit.Values(st.c.Arguments); n > audit.MaxValues {
			why, rule, fix = fmt.Sprintf("hold %d values, more than %d", n, audit.MaxValues), "arguments hold too many values", "send fewer"
		} else if why = argKeys(st.c.Arguments); why != "" {
			rule, fix = "arguments repeat a key", "send each key once, in one spelling"
			switch {
			case strings.HasPrefix(why, "nest deeper"):
				rule, fix = "arguments nest too deep", "send flatter arguments"
			case strings.HasPrefix(why, "are not valid JSON"):
				rule, fix = "arguments are not valid JSON", "send a JSON object"
			}
		}
		if why != "" {
			st.rec.Decision, st.rec.Outcome, st.rec.Rule = "deny", audit.OutcomeDenied, rule
			return refusal(g.book.String(fmt.Sprintf("mcpbox: the arguments of %s %s; %s", st.rec.Name, why, fix)), nil)
		}
		return next(ctx, st)
	}
}

// rateLimited refuses a call over a rate limit, saying when to retry.
func (g *Guard) rateLimited(next handler) handler {
	return func(ctx context.Context, st *callState) (json.RawMessage, error) {
		c, rec := st.c, st.rec
		if ok, retry, limit := g.limiter.Allow(policyClient(c.Agent), c.Server, c.Tool); !ok {
			rec.Decision, rec.Outcome, rec.Rule = "rate_limited", audit.OutcomeRateLimited, limit
			secs := int(math.Ceil(retry.Seconds()))
			return refusal(fmt.Sprintf("mcpbox: rate limit reached for %s (%s); retry after %d s", rec.Name, limit, secs),
				map[string]any{"mcpbox/retryAfterSeconds": secs})
		}
		return next(ctx, st)
	}
}

// decided applies the policy: allow, deny, or ask for approval.
func (g *Guard) decided(next handler) handler {
	return func(ctx context.Context, st *callState) (json.RawMessage, error) {
		c, rec := st.c, st.rec
		_, spanEnd := g.span(ctx, SpanPolicy)
		d := g.engine.Decide(policy.Input{Client: policyClient(c.Agent), Server: c.Server, Tool: c.Tool,
			Args: decodeArgs(c.Arguments), Annotations: st.ann})
		spanEnd(attribute.String(AttrDecision, d.Action))
		rec.Decision, rec.Rule = d.Action, d.Rule
		switch d.Action {
		case config.ActionApprove:
			if why := schemaMismatch(c.Definition, c.Arguments); why != "" {
				rec.Decision, rec.Outcome, rec.Rule = "deny", audit.OutcomeDenied, "arguments do not match the input schema"
				return refusal(g.book.String(schemaRefusal(rec.Name, why)), nil)
			}
			if res, refused := g.approved(ctx, st, d); refused {
				return res, nil
			}
		case config.ActionAllow:
		default:
			rec.Outcome = audit.OutcomeDenied
			// Reason never holds an argument value (internal/policy).
			return refusal(fmt.Sprintf("mcpbox: the policy denies %s (%s: %s)", rec.Name, policy.RuleName(d.Rule), d.Reason), nil)
		}
		return next(ctx, st)
	}
}

// approved asks for approval of a call the policy holds for it; refused
// is true, with the refusal, when it was not given.
func (g *Guard) approved(ctx context.Context, st *callState, d policy.Decision) (res json.RawMessage, refused bool) {
	rec := st.rec
	actx, spanEnd := g.span(ctx, SpanApproval)
	if st.c.Leaving != nil {
		// A client that is leaving reads its answers but will not see
		// this one run: withdrawn, rather than approved for nobody.
		var cancel context.CancelCauseFunc
		actx, cancel = context.WithCancelCause(actx)
		defer cancel(nil) // ends the watch below
		go func() {
			select {
			case <-st.c.Leaving:
				cancel(gateway.ErrInputEnded)
			case <-actx.Done():
			}
		}()
	}
	g.running.wait(st.run, "approval")
	dec, err := g.approve(actx, st.c, d, rec.Sandbox)
	g.running.wait(st.run, "")
	defer func() { spanEnd(attribute.String(AttrDecision, rec.Decision)) }()
	rec.Approver = dec.By
	if err == nil && dec.By == approval.ByCancelled {
		// Its client gave up, its session ended or the gateway is
		// stopping: withdrawn, not refused by anyone.
		rec.Decision, rec.Outcome, rec.Error = "cancelled", audit.OutcomeCancelled, dec.Reason
		res, _ = refusal(fmt.Sprintf("mcpbox: %s was cancelled while waiting for approval (%s)", rec.Name, dec.Reason), nil)
		return res, true
	}
	if err != nil || !dec.Allow {
		rec.Decision, rec.Outcome = "denied", audit.OutcomeDenied
		how := ""
		if err == nil && dec.By == "timeout" {
			how = g.approvalHowTo()
		}
		res, _ = refusal(fmt.Sprintf("mcpbox: %s needs approval and was not approved (%s)%s", rec.Name, approvalWhy(dec, err), how), nil)
		return res, true
	}
	rec.Decision = "approved"
	return nil, false
}

// approve asks the broker; the calling client is asked through
// elicitation when it can be and that channel is on.
func (g *Guard) approve(ctx context.Context, c *gateway.Call, d policy.Decision, sandbox string) (approval.Decision, error) {
	rule := d.Rule
	if strings.HasPrefix(d.Reason, "when failed") {
		// A rule that could not be evaluated asks all the same (fail
		// closed): the reviewer sees why, not only which rule.
		rule += " (" + d.Reason + ")"
	}
	req := approval.Request{
		Kind: "call", Client: c.Agent, Session: cmpOr(c.MCPSession, c.Session), Server: c.Server, Tool: c.Tool,
		Name:    cmpOr(c.Name, g.ItemName(c.Server, integrity.KindTool, c.Tool)),
		Sandbox: sandbox, Rule: rule, Conditional: d.Conditional, Summary: approval.Summary(c.Arguments, g.book.String),
		Arguments: g.book.JSON(c.Arguments),
	}
	var ask approval.Elicitor
	if g.channels[config.ChannelElicitation] && c.Elicit != nil {
		ask = approval.Elicitor(c.Elicit)
	}
	if c.Progress != nil {
		ctx = context.WithValue(ctx, progressKey{}, c.Progress)
	}
	return g.broker.Ask(ctx, req, ask)
}

// SetDashboard tells the guard the dashboard's URL once it listens: the
// approval hints name it. The URL carries no login secret.
func (g *Guard) SetDashboard(url string) { g.dashboard.Store(&url) }

// progressKey carries a call's gateway.Call.Progress through the
// broker's Ask, which knows no call, to approvalWaiting.
type progressKey struct{}

// approvalWaiting tells the operator, as soon as a call starts waiting,
// which approval it is and how to decide it: a client without
// elicitation otherwise just waits, silently, until the timeout. The
// hints name the state dir and the dashboard's URL, never a token. A
// client that is not asked but sent a progressToken is told that the
// call waits for a person: naming no command, ID or log, since the
// agent under review reads it while the call can still be approved.
func (g *Guard) approvalWaiting(ctx context.Context, req approval.Request, elicited bool) {
	if req.Kind != approval.KindCall {
		return
	}
	args := []any{"id", req.ID, "server", req.Server, "tool", cmpOr(req.Name, req.Tool), "client", req.Client, "rule", req.Rule,
		"timeout", g.c.Approvals.EffectiveTimeout().String()}
	if g.channels[config.ChannelCLI] {
		dir := config.ShellQuote(g.dir)
		args = append(args, "approve", "mcpbox approve "+req.ID+" --state-dir "+dir,
			"deny", "mcpbox deny "+req.ID+" --state-dir "+dir)
	}
	if u := g.dashboard.Load(); u != nil && g.channels[config.ChannelWeb] {
		args = append(args, "dashboard", *u)
	}
	msg := "a call waits for approval (mcpbox approvals lists it)"
	if elicited {
		msg = "a call waits for approval; its client is asked too"
		g.log.Info(msg, args...)
		return
	}
	g.log.Warn(msg, args...)
	if progress, _ := ctx.Value(progressKey{}).(func(string)); progress != nil && ctx.Err() == nil {
		progress(fmt.Sprintf("waiting for approval: a person, not the agent, must decide this call within %v; tell the user that it waits",
			g.c.Approvals.EffectiveTimeout()))
	}
}

// approvalHowTo tells the client, and through it the person behind the
// agent, that a person must decide such a call. Its reader is the agent
// under review, which may have a shell as the same user: it names no
// command ("mcpbox approve ID" would invite the agent to approve itself)
// and does not point to serve's log, which gives the operator those
// commands (the retry's wait could be approved from it).
func (g *Guard) approvalHowTo() string {
	if !g.channels[config.ChannelCLI] && !g.channels[config.ChannelWeb] {
		return ""
	}
	return fmt.Sprintf("; a person, not the agent, must approve it within %v: ask the user to decide it where mcpbox shows waiting calls, then retry",
		g.c.Approvals.EffectiveTimeout())
}

func approvalWhy(d approval.Decision, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case d.By == "timeout":
		return "no answer in time"
	case d.By == approval.ByNoChannel, d.Reason == approval.NoAnswer:
		return d.Reason
	case d.By != "":
		return "denied by " + d.By
	}
	return "denied"
}

// payload keeps the result in the record's payload (include_payloads),
// as the client gets it.
func (g *Guard) payload(next handler) handler {
	return func(ctx context.Context, st *callState) (json.RawMessage, error) {
		raw, err := next(ctx, st)
		if err == nil && g.payloads {
			st.rec.Payload = capPayload(mustJSON(map[string]json.RawMessage{"arguments": st.rec.Payload, "result": raw}))
		}
		return raw, err
	}
}

// credentials applies the server's credentials policy to a result and
// records what it found. `mcpbox run` uses it too (CredentialCheck).
func credentials(log *slog.Logger) stage {
	return func(next handler) handler {
		return func(ctx context.Context, st *callState) (json.RawMessage, error) {
			raw, err := next(ctx, st)
			if err != nil {
				return raw, err
			}
			var own []string
			if st.t != nil {
				own = st.t.Placeholders()
			}
			out, rules, blocked := applyCredentials(log, st.gs.credentials, st.c, raw, own)
			for _, r := range rules {
				st.rec.Findings = append(st.rec.Findings, "credential:"+r)
			}
			if blocked {
				st.rec.Outcome = audit.OutcomeBlocked
			}
			return out, nil
		}
	}
}

// resultScanned applies results_scan.
func (g *Guard) resultScanned(next handler) handler {
	return func(ctx context.Context, st *callState) (json.RawMessage, error) {
		raw, err := next(ctx, st)
		if err != nil || st.gs.results == config.ResultsScanOff {
			return raw, err
		}
		return g.scanResult(st, raw), nil
	}
}

// scanResult looks for instructions aimed at the model in a result.
func (g *Guard) scanResult(st *callState, raw json.RawMessage) json.RawMessage {
	found := integrity.ScanResult(raw)
	if len(found) == 0 {
		return raw
	}
	rec := st.rec
	var rules []string
	for _, f := range found {
		if r := f.Rule + "@" + f.Where; !slices.Contains(rules, r) {
			rules = append(rules, r)
		}
	}
	rec.Findings = append(rec.Findings, rules...)
	action := cmpOr(st.gs.results, config.ResultsScanFlag)
	g.log.Warn("injection-like content in a tool result", "server", st.c.Server, "tool", rec.Name, "client", st.c.Agent,
		"findings", strings.Join(rules, ","), "action", action)
	if action == config.ResultsScanBlock {
		rec.Outcome = audit.OutcomeBlocked
		res, _ := refusal(fmt.Sprintf("mcpbox: the result of %s was blocked: it holds instructions aimed at the model (%s)", rec.Name, strings.Join(rules, ", ")), nil)
		return res
	}
	return raw
}

// classified records what became of the call: its outcome and error, or
// its result's size; a refusal of the built-in server's command policy
// is recorded as a denial.
func (g *Guard) classified(next handler) handler {
	return func(ctx context.Context, st *callState) (json.RawMessage, error) {
		raw, err := next(ctx, st)
		rec := st.rec
		defer g.notedNetwork(st)
		if err != nil {
			rec.Outcome = outcomeOf(err)
			rec.Error = g.book.String(err.Error())
			if ole := (*gateway.OutputLimitError)(nil); errors.As(err, &ole) {
				rec.ResultSize = ole.Size
			}
			return raw, err
		}
		rec.ResultSize = int64(len(raw))
		rec.Outcome = audit.OutcomeOK
		if isErrorResult(raw) {
			rec.Outcome = audit.OutcomeIsError
			builtinRefusal(st.gs, raw, rec)
		}
		return raw, nil
	}
}

// notedNetwork adds to the record of a call its sandbox failed (an error
// or an isError result) what the sandbox tried of a network it does not
// have since it started or the last such call, and warns: a server's own
// error ("fetch failed") rarely says why.
func (g *Guard) notedNetwork(st *callState) {
	rec := st.rec
	if st.t == nil || rec.Sandbox == "" || rec.Outcome == audit.OutcomeOK {
		return // no sandbox ran it, or it did not fail
	}
	what := st.t.TriedNetwork()
	if what == "" {
		return
	}
	if rec.Detail == nil {
		rec.Detail = map[string]string{}
	}
	note := "tried the network (" + what + ") since it started or its last failed call, but has none"
	rec.Detail[audit.DetailNetwork] = "the sandbox " + note
	g.log.Warn("a failed call's sandbox "+note, "server", rec.Server, "tool", rec.Tool, "sandbox", rec.Sandbox,
		"hint", "to allow a host: network.egress in the server's config")
}

// tracked joins the call with what its sandbox did while it ran.
func tracked(next handler) handler {
	return func(ctx context.Context, st *callState) (json.RawMessage, error) {
		if st.t == nil {
			return next(ctx, st)
		}
		mark := st.t.Begin()
		raw, err := next(ctx, st)
		st.t.Finish(mark, st.rec)
		return raw, err
	}
}

// refusal is gateway.Refusal as a handler's answer.
func refusal(msg string, meta map[string]any) (json.RawMessage, error) {
	return gateway.Refusal(msg, meta), nil
}

// outcomeOf classifies a failed call for the audit.
func outcomeOf(err error) string {
	var werr *jsonrpc.Error
	var ole *gateway.OutputLimitError
	switch {
	case errors.As(err, &ole):
		return audit.OutcomeBlocked // withheld: over limits.output
	case errors.Is(err, gateway.ErrCallTimeout):
		return audit.OutcomeTimeout
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return audit.OutcomeCancelled
	case errors.As(err, &werr):
		return audit.OutcomeProtocolError
	}
	return audit.OutcomeError
}

func isErrorResult(raw json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(raw, &r) == nil && r.IsError
}

// category is a coarse kind of a call: from the built-in server's own
// tool names, else from the tool's (untrusted) annotations.
func category(gs *guardServer, tool string, ann map[string]any) string {
	if gs != nil && gs.builtin {
		switch {
		case strings.HasPrefix(tool, "read_"), strings.HasPrefix(tool, "list_"), strings.HasPrefix(tool, "search_"), tool == "stat":
			return "read"
		case strings.HasPrefix(tool, "write_"), strings.HasPrefix(tool, "edit_"), strings.HasPrefix(tool, "delete_"), strings.HasPrefix(tool, "move_"):
			return "write"
		case strings.Contains(tool, "command"), strings.Contains(tool, "job"):
			return "exec"
		}
	}
	// With MCP's defaults, as the policy reads them.
	destructive, _ := policy.Annotation(ann, config.AnnotationDestructive)
	openWorld, _ := policy.Annotation(ann, config.AnnotationOpenWorld)
	readOnly, _ := ann["readOnlyHint"].(bool)
	switch {
	case destructive:
		return "destructive"
	case openWorld:
		return "open-world"
	case readOnly:
		return "read-only"
	}
	return ""
}

func capPayload(raw []byte) json.RawMessage {
	if len(raw) <= payloadLimit {
		return raw
	}
	return mustJSON(map[string]any{"truncated": true, "bytes": len(raw)})
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
