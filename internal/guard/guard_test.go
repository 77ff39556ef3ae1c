package guard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/integrity"
	"mcpbox/internal/redact"
)

// The approval timeout is far beyond what a loaded host's scheduling
// delays: a test that decides a request (or checks a decline is not the
// timeout) must not race it.
const guardTestConfig = `version: 1
approvals: {timeout: 30s}
servers:
  echo:
    command: [echo-server]
    tools:
      rules:
        - {tool: echo, when: 'args.text.startsWith("forbidden")', action: deny}
        - {tool: echo, when: 'args.text == "review"', action: approve}
      allow: [echo]
      rate_limit: {per_client_tool: 3, burst: 3}
`

// guardRig is a gateway with the guard around an in-process echo server.
type guardRig struct {
	g    *Guard
	sess *mcp.ClientSession
	dir  string
}

func newGuardRig(t *testing.T, opts *mcp.ClientOptions) *guardRig {
	t.Helper()
	return newGuardRigWith(t, guardTestConfig, opts)
}

func newGuardRigWith(t *testing.T, conf string, opts *mcp.ClientOptions) *guardRig {
	t.Helper()
	return newGuardRigServer(t, conf, opts, &gateway.Server{Name: "echo", Scope: gateway.ScopeAgent, Allow: []string{"*"}, Launch: echoLauncher})
}

// newGuardRigServer is newGuardRigWith with the gateway's server given.
func newGuardRigServer(t *testing.T, conf string, opts *mcp.ClientOptions, srv *gateway.Server) *guardRig {
	t.Helper()
	c, err := config.Load("guard.yaml", []byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	book := &redact.Book{}
	g, err := New(c, Options{StateDir: dir, LockPath: filepath.Join(dir, "mcpbox.lock")}, log, book)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New([]*gateway.Server{srv},
		gateway.Options{Logger: log, Hooks: g.Hooks()})
	if err != nil {
		t.Fatal(err)
	}
	g.Attach(gw)
	cr, gwW := io.Pipe()
	gwR, cw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { gw.ServeStdio(ctx, gateway.LocalAgent, gwR, gwW); close(done) }()
	sess, err := mcp.NewClient(&mcp.Implementation{Name: "guard-test", Version: "1"}, opts).Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sess.Close()
		cancel()
		cw.Close()
		<-done
		gw.Close()
		g.Close()
	})
	return &guardRig{g: g, sess: sess, dir: dir}
}

func (r *guardRig) call(t *testing.T, text string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := r.sess.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		t.Fatalf("call %q: %v", text, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// waitingID waits up to 10 s for one call to wait for approval and
// returns its approval ID.
func (r *guardRig) waitingID(t *testing.T) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if p, _ := r.g.Approvals(); len(p) == 1 {
			return p[0].ID
		} else if time.Now().After(deadline) {
			t.Fatal("no call waits for approval")
		}
	}
}

// records flushes the store and returns its call records.
func (r *guardRig) records(t *testing.T) []audit.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.g.store.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := r.g.store.Query(ctx, audit.Filter{Event: audit.EventCall})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestGuardPolicyAndAudit: a rule denies by argument (the server never
// answers), a rate limit refuses with a retry-after, and every call gets
// one audit record with the decision and the argument's shape only.
func TestGuardPolicyAndAudit(t *testing.T) {
	r := newGuardRig(t, nil)
	if out, isErr := r.call(t, "hello"); isErr || out != "hello" {
		t.Fatalf("allowed call: %q %v", out, isErr)
	}
	if out, isErr := r.call(t, "forbidden-zone"); !isErr || !strings.Contains(out, "policy denies echo") {
		t.Fatalf("denied call: %q %v", out, isErr)
	}
	r.call(t, "third")
	if out, isErr := r.call(t, "fourth"); !isErr || !strings.Contains(out, "retry after") {
		t.Fatalf("rate-limited call: %q %v", out, isErr)
	}
	recs := r.records(t)
	want := []struct{ decision, outcome string }{{"allow", "ok"}, {"deny", "denied"}, {"allow", "ok"}, {"rate_limited", "rate_limited"}}
	if len(recs) != len(want) {
		t.Fatalf("%d call records, want %d: %+v", len(recs), len(want), recs)
	}
	for i, w := range want {
		got := recs[i]
		if got.Decision != w.decision || got.Outcome != w.outcome || got.Server != "echo" || got.Tool != "echo" || got.Client != gateway.LocalAgent {
			t.Errorf("record %d: %+v, want decision %s outcome %s", i, got, w.decision, w.outcome)
		}
		if raw, _ := json.Marshal(got); strings.Contains(string(raw), "forbidden-zone") || strings.Contains(string(raw), "hello") {
			t.Errorf("record %d holds an argument value: %s", i, raw)
		}
	}
	if !strings.Contains(recs[1].Rule, "rules[0]") || !strings.Contains(string(recs[0].ArgShape), "text") {
		t.Errorf("rule %q, shape %s", recs[1].Rule, recs[0].ArgShape)
	}
}

// TestGuardApprovalByElicitation: a call a rule sends to review asks the
// calling client through elicitation; its answer decides.
func TestGuardApprovalByElicitation(t *testing.T) {
	answer := make(chan string, 3)
	answer <- "once"
	answer <- "deny"
	answer <- "" // the user declines the form itself
	r := newGuardRig(t, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			a := <-answer
			if !strings.Contains(req.Params.Message, "echo") || a == "" {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": a}}, nil
		},
	})
	if out, isErr := r.call(t, "review"); isErr || out != "review" {
		t.Fatalf("approved call: %q %v", out, isErr)
	}
	if out, isErr := r.call(t, "review"); !isErr || !strings.Contains(out, "not approved") {
		t.Fatalf("denied call: %q %v", out, isErr)
	}
	// Declined: denied at once, not after the 30 s approval timeout.
	start := time.Now()
	if out, isErr := r.call(t, "review"); !isErr || !strings.Contains(out, "not approved") || time.Since(start) > 15*time.Second {
		t.Fatalf("declined call: %q %v after %s", out, isErr, time.Since(start))
	}
	recs := r.records(t)
	if len(recs) != 3 || recs[0].Decision != "approved" || !strings.HasPrefix(recs[0].Approver, "elicitation") ||
		recs[1].Decision != "denied" || !strings.HasPrefix(recs[2].Approver, "elicitation") {
		t.Fatalf("records: %+v", recs)
	}
}

// TestGuardElicitationOnly: with elicitation the only channel, a client
// that cannot be asked, or dismisses the question, is refused at once
// and told why, not after the 30 s approval timeout.
func TestGuardElicitationOnly(t *testing.T) {
	conf := strings.Replace(guardTestConfig, "approvals: {timeout: 30s}", "approvals: {timeout: 30s, channels: [elicitation]}", 1)
	dismiss := &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "cancel"}, nil
	}}
	for name, tc := range map[string]struct {
		opts    *mcp.ClientOptions
		why, by string
	}{
		"no elicitation": {nil, "no approval channel reaches a person", approval.ByNoChannel},
		"dismissed":      {dismiss, approval.NoAnswer, "elicitation:"},
	} {
		t.Run(name, func(t *testing.T) {
			r := newGuardRigWith(t, conf, tc.opts)
			start := time.Now()
			out, isErr := r.call(t, "review")
			if !isErr || !strings.Contains(out, "not approved ("+tc.why) || time.Since(start) > 15*time.Second {
				t.Fatalf("call: %q %v after %s", out, isErr, time.Since(start))
			}
			recs := r.records(t)
			if len(recs) != 1 || recs[0].Decision != "denied" || !strings.HasPrefix(recs[0].Approver, tc.by) {
				t.Fatalf("records: %+v", recs)
			}
		})
	}
}

// TestTrustOfferedOnlyToPeople: a changed definition is offered for
// approval where the CLI or web channel can answer, and not otherwise.
func TestTrustOfferedOnlyToPeople(t *testing.T) {
	ch := integrity.Change{Server: "echo", Kind: integrity.KindTool, Key: "echo", Status: integrity.StatusNew, NewHash: "h1"}
	for conf, want := range map[string]int{
		guardTestConfig: 1,
		strings.Replace(guardTestConfig, "{timeout: 30s}", "{timeout: 30s, channels: [elicitation]}", 1): 0,
	} {
		r := newGuardRigWith(t, conf, nil)
		r.g.offerTrust([]integrity.Change{ch})
		wait := 2 * time.Second
		if want == 0 {
			wait = 300 * time.Millisecond // long enough to see one appear
		}
		deadline := time.Now().Add(wait)
		for len(r.g.broker.Pending()) == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if got := len(r.g.broker.Pending()); got != want {
			t.Errorf("channels %v: %d trust requests pending, want %d", r.g.channels, got, want)
		}
		if want == 0 {
			// Not asked, so not denied either: no approval record.
			if err := r.g.store.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if recs, err := r.g.store.Query(context.Background(), audit.Filter{Event: audit.EventApproval}); err != nil || len(recs) != 0 {
				t.Errorf("approval records %+v, %v; want none", recs, err)
			}
		}
	}
}

// TestGuardApprovalByCLI: without elicitation, the call waits until the
// broker is told (as `mcpbox approve` does through the admin socket).
func TestGuardApprovalByCLI(t *testing.T) {
	r := newGuardRig(t, nil)
	go func() {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if p := r.g.broker.Pending(); len(p) == 1 {
				r.g.broker.Decide(p[0].ID, approval.Decision{Allow: true, Scope: approval.ScopeSession, By: "cli:uid=0"})
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	if out, isErr := r.call(t, "review"); isErr || out != "review" {
		t.Fatalf("approved call: %q %v", out, isErr)
	}
	// Remembered for the session: no second question.
	if out, isErr := r.call(t, "review"); isErr || out != "review" {
		t.Fatalf("second call: %q %v", out, isErr)
	}
	recs := r.records(t)
	if len(recs) != 2 || recs[0].Approver != "cli:uid=0" || !strings.HasPrefix(recs[1].Approver, "remembered") {
		t.Fatalf("records: %+v", recs)
	}
}

// TestArgKeys: a call whose arguments repeat a key, or hold two keys
// equal under Unicode case folding, anywhere, is refused (the approver,
// the policy and the server could read different values).
func TestArgKeys(t *testing.T) {
	for raw, want := range map[string]string{
		``:   "",
		`{}`: "",
		`{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}`: "",
		`{"ab":1,"ba":1,"a_b":1,"aß":1,"ass":1}`:    "", // not case variants
		`{"a":1,"a":2}`:                                     `repeat the key "a"`,
		`{"p":"x","n":"y","p":"/etc"}`:                      `repeat the key "p"`,
		`{"o":{"k":[1,{"x":1,"x":2}]}}`:                     `repeat the key "x"`,
		`{"a":"\u0061","b":1}`:                              "",
		`{"a":"x","A":1}`:                                   `hold the keys "a" and "A", which differ only in case`,
		`{"repoOwner":"org","repoowner":"victim"}`:          `hold the keys "repoOwner" and "repoowner", which differ only in case`,
		`{"o":[{"Path":"/ok"},{"path":"/a","PATH":"/b"}]}`:  `hold the keys "path" and "PATH", which differ only in case`,
		`{"kind":1,"\u212aind":2}`:                          "hold the keys \"kind\" and \"\u212aind\", which differ only in case", // Kelvin sign
		`{"sha":1,"\u017fha":2}`:                            `hold the keys "sha" and "ſha", which differ only in case`,            // long s
		`{"Σx":1,"σx":2}`:                                   `hold the keys "Σx" and "σx", which differ only in case`,
		`{"a":1`:                                            "are not valid JSON",
		strings.Repeat("[", 100) + strings.Repeat("]", 100): "nest deeper than 64 levels",
	} {
		if got := argKeys(json.RawMessage(raw)); got != want {
			t.Errorf("argKeys(%s) = %q, want %q", raw, got, want)
		}
	}
}

// TestGuardRefusesCaseVariantKeys: a rule allows only calls whose text
// is "hello"; a second key "TEXT", which a case-insensitive server would
// bind instead, gets the call refused before the policy or the server,
// and so do arguments nested too deep to check, each with its own rule.
func TestGuardRefusesCaseVariantKeys(t *testing.T) {
	r := newGuardRig(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cases := []struct{ args, says, rule string }{
		{`{"text":"hello","TEXT":"forbidden-zone"}`, "differ only in case", "arguments repeat a key"},
		{`{"text":"hello","n":1,"Text":"forbidden-zone"}`, "differ only in case", "arguments repeat a key"},
		{`{"text":"hello","n":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`, "nest deeper", "arguments nest too deep"},
		{`{"text":"hello","m":{` + strings.Repeat(`"k":1,`, audit.MaxValues/2) + `"k":1}}`, "more than", "arguments hold too many values"},
		{`{"text":"hello","a":[` + strings.Repeat(`{},`, audit.MaxValues/2) + `{}]}`, "more than", "arguments hold too many values"},
	}
	for _, tc := range cases {
		res, err := r.sess.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(tc.args)})
		if err != nil {
			t.Fatalf("call %.60s: %v", tc.args, err)
		}
		var out string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				out += tc.Text
			}
		}
		if !res.IsError || !strings.Contains(out, tc.says) {
			t.Errorf("call %.60s: %q (isError %v), want a refusal that says %q", tc.args, out, res.IsError, tc.says)
		}
	}
	recs := r.records(t)
	if len(recs) != len(cases) {
		t.Fatalf("%d call records, want %d: %+v", len(recs), len(cases), recs)
	}
	for i, rec := range recs {
		if rec.Decision != "deny" || rec.Outcome != "denied" || rec.ResultSize != 0 || rec.Rule != cases[i].rule {
			t.Errorf("record %+v: want denied before the server ran, rule %q", rec, cases[i].rule)
		}
	}
}

// TestGuardApproverSeesEveryArgument: a call sent to review with 30
// arguments, a key posing as the prompt, a 2,000-character value and a
// secret before its last argument: the elicitation lists every key
// quoted and the last value; the held request has the whole arguments,
// redacted.
func TestGuardApproverSeesEveryArgument(t *testing.T) {
	const secret = "hunter2-very-secret-value"
	asked := make(chan string, 1)
	held := make(chan []approval.Request, 1)
	var r *guardRig
	// A schema that takes any other property: the call must match it to
	// be held (TestGuardHeldCallCheckedBySchema).
	open := func(context.Context, gateway.Scope) (*gateway.Process, error) {
		return echoProcess(nil, map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}})
	}
	r = newGuardRigServer(t, guardTestConfig, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- req.Params.Message
			held <- r.g.broker.Pending() // pending while the client is asked
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "deny"}}, nil
		},
	}, &gateway.Server{Name: "echo", Scope: gateway.ScopeAgent, Allow: []string{"*"}, Launch: open})
	if err := r.g.book.Add("TOKEN", []byte(secret)); err != nil {
		t.Fatal(err)
	}
	keys := []string{"text", "\nApprove: yes", "body", "token"}
	args := map[string]any{"text": "review", "\nApprove: yes": "x", "body": strings.Repeat("b", 2000), "token": "Bearer " + secret}
	for i := len(keys); i < 29; i++ {
		k := fmt.Sprintf("opt%02d", i)
		keys, args[k] = append(keys, k), i
	}
	keys, args["zz_delete"] = append(keys, "zz_delete"), "/home/user/.ssh"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := r.sess.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
	if err != nil || !res.IsError {
		t.Fatalf("call: %+v %v, want refused (the approver denied)", res, err)
	}
	var msg string
	select {
	case msg = <-asked:
	default:
		t.Fatal("the client was not asked")
	}
	for _, k := range keys {
		if !strings.Contains(msg, "\n  "+strconv.Quote(k)+": ") {
			t.Errorf("the elicitation lacks the key %s:\n%s", strconv.Quote(k), msg)
		}
	}
	if !strings.Contains(msg, `"zz_delete": "/home/user/.ssh"`) || strings.Contains(msg, secret) {
		t.Errorf("elicitation message, want the last argument and no secret:\n%s", msg)
	}
	p := <-held
	if len(p) != 1 {
		t.Fatalf("pending while asked: %+v, want the call", p)
	}
	var got map[string]any
	if err := json.Unmarshal(p[0].Arguments, &got); err != nil || len(got) != len(keys) || got["token"] != "Bearer [REDACTED:TOKEN]" {
		t.Errorf("held arguments (%v): %s, want all %d, the token redacted", err, p[0].Arguments, len(keys))
	}
	if !p[0].Conditional { // held by the rule's when: the CLI says what a wider grant covers
		t.Errorf("held by %s, a rule with a when: Conditional false, want true", p[0].Rule)
	}
}

// TestGuardAuditsOutputLimit: a result over limits.output is withheld
// from the client, and the audit says so (blocked, with the size of what
// was withheld) instead of recording the call as answered.
func TestGuardAuditsOutputLimit(t *testing.T) {
	r := newGuardRigServer(t, guardTestConfig, nil, &gateway.Server{Name: "echo", Scope: gateway.ScopeAgent, Allow: []string{"*"}, Launch: echoLauncher, MaxOutput: 200})
	if out, isErr := r.call(t, "short"); isErr || out != "short" {
		t.Fatalf("short call: %q %v", out, isErr)
	}
	long := strings.Repeat("x", 500)
	out, isErr := r.call(t, long)
	if !isErr || !strings.Contains(out, "exceeds the output limit of 200 bytes") || strings.Contains(out, long) {
		t.Fatalf("long call: %q %v", out, isErr)
	}
	recs := r.records(t)
	if len(recs) != 2 {
		t.Fatalf("%d records: %+v", len(recs), recs)
	}
	if recs[0].Outcome != audit.OutcomeOK {
		t.Errorf("short call recorded as %q", recs[0].Outcome)
	}
	if got := recs[1]; got.Outcome != audit.OutcomeBlocked || got.ResultSize <= 500 || !strings.Contains(got.Error, "output limit") {
		t.Errorf("long call recorded as outcome %q size %d error %q; want blocked, over 500, the limit named", got.Outcome, got.ResultSize, got.Error)
	}
}

// TestGuardRecordsTraceparent: the W3C trace context a client sends in
// _meta reaches the call's audit record; a call without one has none.
func TestGuardRecordsTraceparent(t *testing.T) {
	r := newGuardRig(t, nil)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "traced"}}
	params.SetMeta(map[string]any{"traceparent": tp})
	if _, err := r.sess.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	r.call(t, "untraced")
	recs := r.records(t)
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	if got := recs[0].Detail[audit.DetailTraceparent]; got != tp {
		t.Errorf("traced call's record: traceparent %q, want %q", got, tp)
	}
	if got, ok := recs[1].Detail[audit.DetailTraceparent]; ok {
		t.Errorf("untraced call's record has traceparent %q", got)
	}
}

// TestPassedOnDecisionNeedsItsChannel: a decision another instance's
// dashboard passes on (Via web) is taken only where the web channel is
// on too, not on the cli channel alone; the cli's own decision is.
func TestPassedOnDecisionNeedsItsChannel(t *testing.T) {
	conf := strings.Replace(guardTestConfig, "approvals: {timeout: 30s}", "approvals: {timeout: 30s, channels: [cli]}", 1)
	r := newGuardRigWith(t, conf, nil)
	type answer struct {
		out   string
		isErr bool
	}
	done := make(chan answer, 1)
	go func() { out, isErr := r.call(t, "review"); done <- answer{out, isErr} }()
	id := r.waitingID(t)
	b := r.g.Admin(nil)
	err := b.Decide(id, approval.Decision{Allow: true, By: "cli:uid=0 for web:admin", Via: config.ChannelWeb})
	if err == nil || !strings.Contains(err.Error(), "the web approval channel is off") {
		t.Fatalf("a decision passed on from a dashboard: %v, want a refusal (web is off here)", err)
	}
	if err := b.Decide(id, approval.Decision{Allow: true, By: "cli:uid=0"}); err != nil {
		t.Fatalf("the cli's own decision: %v", err)
	}
	if a := <-done; a.isErr {
		t.Errorf("the call after the cli's approval: %q", a.out)
	}
}

// TestApprovalWaitProgress: a client that cannot be asked (no
// elicitation) but sent a progressToken is told, while its call waits,
// that a person must decide it, in words that name no command, ID or log
// the agent could use to approve itself; one without a token is told
// nothing (its call goes first: a note of it would come before the
// second call's, on the one stream).
func TestApprovalWaitProgress(t *testing.T) {
	notes := make(chan *mcp.ProgressNotificationParams, 8)
	r := newGuardRig(t, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		notes <- req.Params
	}})
	for _, token := range []any{nil, "approve-me"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "review"}}
		if token != nil {
			params.SetProgressToken(token)
		}
		done := make(chan error, 1)
		go func() { _, err := r.sess.CallTool(ctx, params); done <- err }()
		id := r.waitingID(t)
		if token != nil {
			select {
			case n := <-notes:
				if n.ProgressToken != token || !strings.Contains(n.Message, "a person, not the agent, must decide this call within 30s") ||
					strings.Contains(n.Message, id) || strings.Contains(n.Message, "mcpbox") || strings.Contains(n.Message, "log") || strings.Contains(n.Message, r.dir) {
					t.Errorf("progress while the call waits: %+v", n)
				}
			case <-time.After(10 * time.Second):
				t.Error("no progress notification while the call waits")
			}
		}
		if err := r.g.Admin(nil).Decide(id, approval.Decision{Allow: true, By: "cli:uid=0"}); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("the approved call: %v", err)
		}
		cancel()
	}
	select {
	case n := <-notes:
		t.Errorf("a progress notification for a call that sent no token: %+v", n)
	default:
	}
}

// TestApprovalWaitProgressElicitation: a client asked through
// elicitation gets the question, not the note; with the elicitation
// channel off, the same client is not asked and gets the note.
func TestApprovalWaitProgressElicitation(t *testing.T) {
	for _, channels := range []string{"", "channels: [cli, web], "} {
		notes := make(chan *mcp.ProgressNotificationParams, 8)
		asked := make(chan struct{}, 1)
		conf := strings.Replace(guardTestConfig, "approvals: {timeout: 30s}", "approvals: {"+channels+"timeout: 30s}", 1)
		r := newGuardRigWith(t, conf, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { notes <- req.Params },
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked <- struct{}{}
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "once"}}, nil
			},
		})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "review"}}
		params.SetProgressToken("tok")
		done := make(chan error, 1)
		go func() { _, err := r.sess.CallTool(ctx, params); done <- err }()
		if channels == "" {
			if err := <-done; err != nil {
				t.Fatalf("the call its client approved: %v", err)
			}
			if len(asked) != 1 || len(notes) != 0 {
				t.Errorf("elicitation on: asked %d times, %d notes; want asked once and no note", len(asked), len(notes))
			}
		} else {
			select {
			case n := <-notes:
				if !strings.Contains(n.Message, "a person, not the agent") {
					t.Errorf("elicitation off: note %+v", n)
				}
			case <-time.After(10 * time.Second):
				t.Error("elicitation off: no note while the call waits")
			}
			if err := r.g.Admin(nil).Decide(r.waitingID(t), approval.Decision{Allow: true, By: "cli:uid=0"}); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil || len(asked) != 0 {
				t.Fatalf("the call approved with elicitation off: %v, asked %d times", err, len(asked))
			}
		}
		cancel()
	}
}

// TestApprovalSaysWhyFailClosed: an approve rule whose when cannot be
// evaluated for a call (a key the arguments lack) holds the call all the
// same, and the request says why, not only which rule.
func TestApprovalSaysWhyFailClosed(t *testing.T) {
	r := newGuardRigWith(t, `version: 1
approvals: {timeout: 30s}
servers:
  echo:
    command: [echo-server]
    tools:
      rules:
        - {tool: echo, when: 'args.path.startsWith("/etc")', action: approve}
      allow: [echo]
`, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r.sess.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "no path"}})
	}()
	id := r.waitingID(t)
	p, _ := r.g.Approvals()
	if len(p) != 1 || !strings.Contains(p[0].Rule, "when failed (") || !strings.Contains(p[0].Rule, "fail closed") {
		t.Errorf("the held request's rule %q, want why its when failed", p[0].Rule)
	}
	if err := r.g.broker.Decide(id, approval.Decision{Allow: false, By: "cli:uid=0"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the denied call did not return")
	}
}
