package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

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

// call is the Call hook: rate limit, policy, approval, then the call
// itself, its result checks, and one audit record whatever happens; the
// result goes out only once that record is committed (see audited).
func (g *Guard) call(ctx context.Context, c *gateway.Call, next func(context.Context) (json.RawMessage, error)) (res json.RawMessage, err error) {
	gs := g.servers[c.Server]
	ann := annotations(c.Definition)
	rec := audit.Record{
		Time: time.Now(), Event: audit.EventCall, Client: c.Agent, Session: cmpOr(c.MCPSession, c.Session),
		Server: c.Server, Tool: c.Tool, Name: cmpOr(c.Name, gs.prefix+c.Tool), ArgShape: audit.Shape(c.Arguments),
		Category: category(gs, c.Tool, ann), Argv: g.commandArgv(gs, c),
	}
	t := g.tracks.Get(gs.launcher, c.Scope)
	if t != nil {
		rec.Sandbox, rec.Workspace = t.ID, t.Workspace
	}
	defer func() {
		rec.Duration = time.Since(rec.Time)
		res, err = g.audited(ctx, rec, res, err)
	}()
	if res, ok := g.auditFailing(rec.Name, &rec); ok {
		return res, nil
	}
	if g.payloads {
		rec.Payload = capPayload(g.book.JSON(c.Arguments))
	}

	if why := argKeys(c.Arguments); why != "" {
		rec.Decision, rec.Outcome, rec.Rule = "deny", "denied", "arguments repeat a key"
		return refusal(g.book.String(fmt.Sprintf("mcpbox: the arguments of %s %s; send each key once, in one spelling", rec.Name, why)), nil)
	}
	client := policyClient(c.Agent)
	if ok, retry, limit := g.limiter.Allow(client, c.Server, c.Tool); !ok {
		rec.Decision, rec.Outcome, rec.Rule = "rate_limited", "rate_limited", limit
		secs := int(math.Ceil(retry.Seconds()))
		return refusal(fmt.Sprintf("mcpbox: rate limit reached for %s (%s); retry after %d s", rec.Name, limit, secs),
			map[string]any{"mcpbox/retryAfterSeconds": secs})
	}
	d := g.engine.Decide(policy.Input{Client: client, Server: c.Server, Tool: c.Tool,
		Args: decodeArgs(c.Arguments), Annotations: ann})
	rec.Decision, rec.Rule = d.Action, d.Rule
	switch d.Action {
	case config.ActionApprove:
		dec, err := g.approve(ctx, c, d, rec.Sandbox)
		rec.Approver = dec.By
		if err == nil && dec.By == approval.ByCancelled {
			// Its client gave up, its session ended or the gateway is
			// stopping: withdrawn, not refused by anyone.
			rec.Decision, rec.Outcome, rec.Error = "cancelled", "cancelled", dec.Reason
			return refusal(fmt.Sprintf("mcpbox: %s was cancelled while waiting for approval (%s)", rec.Name, dec.Reason), nil)
		}
		if err != nil || !dec.Allow {
			rec.Decision, rec.Outcome = "denied", "denied"
			return refusal(fmt.Sprintf("mcpbox: %s needs approval and was not approved (%s)", rec.Name, approvalWhy(dec, err)), nil)
		}
		rec.Decision = "approved"
	case config.ActionAllow:
	default:
		rec.Outcome = "denied"
		return refusal(fmt.Sprintf("mcpbox: the policy denies %s (%s)", rec.Name, d.Rule), nil)
	}

	var mark *track.Call
	if t != nil {
		mark = t.Begin()
	}
	raw, err := next(ctx)
	if t != nil {
		t.Finish(mark, &rec)
	}
	if err != nil {
		rec.Outcome = outcomeOf(err)
		rec.Error = g.book.String(err.Error())
		return raw, err
	}
	rec.ResultSize = int64(len(raw))
	rec.Outcome = "ok"
	if isErrorResult(raw) {
		rec.Outcome = "is_error"
		builtinRefusal(gs, raw, &rec)
	}
	raw = g.scanResult(gs, c, raw, &rec)
	raw = g.checkCredentials(gs, c, raw, &rec)
	if g.payloads {
		rec.Payload = capPayload(mustJSON(map[string]json.RawMessage{"arguments": rec.Payload, "result": raw}))
	}
	return raw, nil
}

// approve asks the broker; the calling client is asked through
// elicitation when it can be and that channel is on.
func (g *Guard) approve(ctx context.Context, c *gateway.Call, d policy.Decision, sandbox string) (approval.Decision, error) {
	req := approval.Request{
		Kind: "call", Client: c.Agent, Session: cmpOr(c.MCPSession, c.Session), Server: c.Server, Tool: c.Tool,
		Name:    cmpOr(c.Name, g.ItemName(c.Server, integrity.KindTool, c.Tool)),
		Sandbox: sandbox, Rule: d.Rule, Summary: approval.Summary(c.Arguments, g.book.String),
		Arguments: g.book.JSON(c.Arguments),
	}
	var ask approval.Elicitor
	if g.channels[config.ChannelElicitation] && c.Elicit != nil {
		ask = approval.Elicitor(c.Elicit)
	}
	if ask == nil {
		g.log.Warn("a call waits for approval: see `mcpbox approvals`", "server", c.Server, "tool", req.Name, "client", c.Agent, "rule", d.Rule)
	}
	return g.broker.Ask(ctx, req, ask)
}

func approvalWhy(d approval.Decision, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case d.By == "timeout":
		return "no answer in time"
	case d.By != "":
		return "denied by " + d.By
	}
	return "denied"
}

// scanResult applies results_scan.
func (g *Guard) scanResult(gs *guardServer, c *gateway.Call, raw json.RawMessage, rec *audit.Record) json.RawMessage {
	if gs.results == config.ResultsScanOff {
		return raw
	}
	found := integrity.ScanResult(raw)
	if len(found) == 0 {
		return raw
	}
	var rules []string
	for _, f := range found {
		if r := f.Rule + "@" + f.Where; !slices.Contains(rules, r) {
			rules = append(rules, r)
		}
	}
	rec.Findings = append(rec.Findings, rules...)
	action := cmpOr(gs.results, config.ResultsScanFlag)
	g.log.Warn("injection-like content in a tool result", "server", c.Server, "tool", rec.Name, "client", c.Agent,
		"findings", strings.Join(rules, ","), "action", action)
	if action == config.ResultsScanBlock {
		rec.Outcome = "blocked"
		res, _ := refusal(fmt.Sprintf("mcpbox: the result of %s was blocked: it holds instructions aimed at the model (%s)", rec.Name, strings.Join(rules, ", ")), nil)
		return res
	}
	return raw
}

// checkCredentials applies the server's credentials policy and records
// what it found.
func (g *Guard) checkCredentials(gs *guardServer, c *gateway.Call, raw json.RawMessage, rec *audit.Record) json.RawMessage {
	out, rules, blocked := applyCredentials(g.log, gs.credentials, c, raw)
	for _, r := range rules {
		rec.Findings = append(rec.Findings, "credential:"+r)
	}
	if blocked {
		rec.Outcome = "blocked"
	}
	return out
}

// refusal is a tool result that tells the model why the call did not run.
func refusal(msg string, meta map[string]any) (json.RawMessage, error) {
	res := map[string]any{"content": []any{map[string]string{"type": "text", "text": msg}}, "isError": true}
	if meta != nil {
		res["_meta"] = meta
	}
	return json.Marshal(res)
}

// outcomeOf classifies a failed call for the audit.
func outcomeOf(err error) string {
	var werr *jsonrpc.Error
	switch {
	case errors.Is(err, gateway.ErrCallTimeout):
		return "timeout"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	case errors.As(err, &werr):
		return "protocol_error"
	}
	return "error"
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
	is := func(k string) bool { v, ok := ann[k].(bool); return ok && v }
	switch {
	case is("destructiveHint"):
		return "destructive"
	case is("openWorldHint"):
		return "open-world"
	case is("readOnlyHint"):
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

// maxArgDepth bounds the nesting argKeys walks; deeper arguments are
// refused like duplicates.
const maxArgDepth = 64

// argKeys says what is wrong with the keys of raw, a call's arguments, or
// "" if nothing is: an object that repeats a key, or holds two keys equal
// under Unicode case folding ("repoOwner" and "repoowner"), at any depth;
// nesting deeper than maxArgDepth; text that is not JSON. The approver's
// summary, the policy and the server could each read another of two such
// values (Go's encoding/json binds keys case-insensitively, the last
// match winning), so such a call is refused rather than guessed about.
func argKeys(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	type frame struct {
		obj     bool
		wantKey bool
		keys    map[string]string // folded key → the key as sent
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(stack) != 0 {
				return "are not valid JSON"
			}
			return ""
		}
		if err != nil {
			return "are not valid JSON"
		}
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if top != nil && top.obj && top.wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			k, _ := tok.(string)
			f := foldKey(k)
			if prev, ok := top.keys[f]; ok {
				if prev == k {
					return fmt.Sprintf("repeat the key %s", quoteKey(k))
				}
				return fmt.Sprintf("hold the keys %s and %s, which differ only in case", quoteKey(prev), quoteKey(k))
			}
			top.keys[f] = k
			top.wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= maxArgDepth {
				return fmt.Sprintf("nest deeper than %d levels", maxArgDepth)
			}
			if top != nil && top.obj {
				top.wantKey = true
			}
			stack = append(stack, frame{obj: tok == json.Delim('{'), wantKey: true, keys: map[string]string{}})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		default:
			if top != nil && top.obj {
				top.wantKey = true
			}
		}
	}
}

// foldKey maps every rune of k to the smallest rune of its Unicode
// simple case folding orbit, so that keys equal under case folding (also
// "K" and the Kelvin sign, "s" and "ſ", which encoding/json matches) map
// to the same string.
func foldKey(k string) string {
	var b strings.Builder
	b.Grow(len(k))
	for _, r := range k {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}

// quoteKey is a key as an error message shows it: quoted, cut.
func quoteKey(k string) string {
	if r := []rune(k); len(r) > 40 {
		k = string(r[:39]) + "…"
	}
	return strconv.Quote(k)
}
