package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/config"
)

const policyYAML = `version: 1
clients:
  - {name: alice, token: {from: env:A}}
  - {name: bob, token: {from: env:B}, tools: {allow: ["gh/*", "open/read_*"], approve: ["gh/create_*", "open/read_secret"], deny: ["gh/delete_*"]}}
  - {name: carol, token: {from: env:C}, tools: {}}
servers:
  gh:
    command: [gh]
    tools:
      rules:
        - {tool: create_issue, when: "args.repo == 'locked'", action: deny}
        - {tool: "create_*", when: "args.repo.startsWith('pub-')", action: allow}
        - {tool: "create_*", action: approve}
        - {tool: search, when: "client == 'alice' && server == 'gh' && tool == 'search'", action: allow}
        - {tool: merge, when: "args.count > 5", action: deny}
        - {tool: merge, when: "annotations.readOnlyHint == true", action: allow}
        - {tool: edit, when: "args.path.lowerAscii().endsWith('.md')", action: allow}
      deny: ["drop_*"]
      approve: ["push*"]
      allow: ["list_*", "drop_safe", "search", "merge", "push_tag", "delete_x"]
  open:
    command: [open]
    tools: {default: allow}
  noann:
    command: [noann]
    tools: {default: allow, approve_annotations: []}
  destonly:
    command: [destonly]
    tools: {default: allow, approve_annotations: [destructiveHint]}
  ruled:
    command: [ruled]
    tools:
      rules:
        - {tool: safe, action: allow}
        - {tool: "secret_*", action: deny}
        - {tool: "secret_*", action: allow}
        - {tool: maybe, when: "args.x == 1", action: deny}
      approve: [reviewed]
      allow: [globbed, "secret_*"]
      default: allow
`

func mustEngine(t testing.TB, yaml string) *Engine {
	t.Helper()
	c, err := config.Load("p.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("loading config: %v", err)
	}
	e, err := Compile(c)
	if err != nil {
		t.Fatalf("compiling: %v", err)
	}
	return e
}

// ruleAt is the locator of the rule written on the line of yaml that
// contains marker: the rule's mapping starts at its "{".
func ruleAt(t *testing.T, yaml, server string, i int, marker string) string {
	t.Helper()
	for n, line := range strings.Split(yaml, "\n") {
		if strings.Contains(line, marker) {
			return fmt.Sprintf("servers.%s.tools.rules[%d] (p.yaml:%d:%d)", server, i, n+1, strings.Index(line, "{")+1)
		}
	}
	t.Fatalf("no line with %q", marker)
	return ""
}

// quiet are the annotations of a tool that neither writes nor reaches out:
// no annotation holds its calls for review.
var quiet = map[string]any{"destructiveHint": false, "openWorldHint": false}

func TestDecide(t *testing.T) {
	e := mustEngine(t, policyYAML)
	r := func(server string, i int, marker string) string { return ruleAt(t, policyYAML, server, i, marker) }
	args := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name   string
		in     Input
		action string
		rule   string
		reason string // a substring of Reason, if set
	}{
		// Rules: order, first match wins, CEL over args, client, server, tool.
		{"deny rule first", Input{Server: "gh", Tool: "create_issue", Args: args("repo", "locked")}, config.ActionDeny, r("gh", 0, "'locked'"), "rule matched"},
		{"allow rule second", Input{Server: "gh", Tool: "create_issue", Args: args("repo", "pub-x")}, config.ActionAllow, r("gh", 1, "pub-"), ""},
		{"unconditional approve", Input{Server: "gh", Tool: "create_issue", Args: args("repo", "other")}, config.ActionApprove, r("gh", 2, "action: approve}"), ""},
		{"glob in rule", Input{Server: "gh", Tool: "create_pr", Args: args("repo", "pub-y")}, config.ActionAllow, r("gh", 1, "pub-"), ""},
		{"client var true", Input{Client: "alice", Server: "gh", Tool: "search"}, config.ActionAllow, r("gh", 3, "client =="), ""},
		{"client var false falls to glob", Input{Server: "gh", Tool: "search"}, config.ActionAllow, "servers.gh.tools.allow", `"search"`},
		{"number compare", Input{Server: "gh", Tool: "merge", Args: args("count", 6.0)}, config.ActionDeny, r("gh", 4, "count > 5"), ""},
		{"number compare false", Input{Server: "gh", Tool: "merge", Args: args("count", 5.0), Annotations: args("readOnlyHint", true)}, config.ActionAllow, r("gh", 5, "readOnlyHint"), ""},
		{"json.Number", Input{Server: "gh", Tool: "merge", Args: args("count", json.Number("7"))}, config.ActionDeny, r("gh", 4, "count > 5"), ""},
		{"nested json.Number", Input{Server: "gh", Tool: "merge", Args: args("count", json.Number("1"), "deep", []any{map[string]any{"n": json.Number("2.5")}})}, config.ActionAllow, "servers.gh.tools.allow", "skipped"},
		{"strings extension", Input{Server: "gh", Tool: "edit", Args: args("path", "docs/README.MD")}, config.ActionAllow, r("gh", 6, "lowerAscii"), ""},
		{"strings extension false", Input{Server: "gh", Tool: "edit", Args: args("path", "main.go")}, config.ActionDeny, "servers.gh.tools.default",
			"; the when of " + RuleName(r("gh", 6, "lowerAscii")) + " does not hold for these arguments"},

		// Evaluation errors: a deny rule matches, others are skipped.
		{"eval error on deny rule", Input{Server: "gh", Tool: "create_issue"}, config.ActionDeny, r("gh", 0, "'locked'"), "missing key"},
		{"eval error on allow rule skipped", Input{Server: "gh", Tool: "create_pr"}, config.ActionApprove, r("gh", 2, "action: approve}"), "skipped " + RuleName(r("gh", 1, "pub-")) + ": when failed"},
		{"type error on deny rule", Input{Server: "gh", Tool: "merge", Args: args("count", "many")}, config.ActionDeny, r("gh", 4, "count > 5"), "type mismatch"},
		{"eval error skips to glob", Input{Server: "gh", Tool: "merge", Args: args("count", 1.0)}, config.ActionAllow, "servers.gh.tools.allow", "missing key"},

		// Globs and default.
		{"deny glob", Input{Server: "gh", Tool: "drop_table"}, config.ActionDeny, "servers.gh.tools.deny", `"drop_*"`},
		{"deny glob beats allow glob", Input{Server: "gh", Tool: "drop_safe"}, config.ActionDeny, "servers.gh.tools.deny", ""},
		{"approve glob beats allow glob", Input{Server: "gh", Tool: "push_tag"}, config.ActionApprove, "servers.gh.tools.approve", ""},
		{"allow glob", Input{Server: "gh", Tool: "list_repos"}, config.ActionAllow, "servers.gh.tools.allow", ""},
		{"empty default is deny", Input{Server: "gh", Tool: "other"}, config.ActionDeny, "servers.gh.tools.default", ""},
		{"default allow", Input{Server: "open", Tool: "x"}, config.ActionAllow, "servers.open.tools.default", ""},
		{"unknown server", Input{Server: "nope", Tool: "x"}, config.ActionDeny, "servers", "unknown server"},
		{"unknown client", Input{Client: "mallory", Server: "open", Tool: "x"}, config.ActionDeny, "clients", "unknown client"},
		{"issuer-vouched client", Input{Client: "oidc.mallory", Server: "open", Tool: "x"}, config.ActionAllow, "servers.open.tools.default", ""},

		// Annotation review.
		{"destructive adds review", Input{Server: "open", Tool: "x", Annotations: args("destructiveHint", true)}, config.ActionApprove, "annotation destructiveHint", "servers.open.tools.default"},
		{"open world adds review", Input{Server: "open", Tool: "x", Annotations: args("openWorldHint", true)}, config.ActionApprove, "annotation openWorldHint", ""},
		{"string is no statement", Input{Server: "open", Tool: "x", Annotations: args("destructiveHint", "false", "openWorldHint", false)}, config.ActionApprove, "annotation destructiveHint (not a boolean, so true)", "gives destructiveHint a value that is not a boolean"},
		{"false hints", Input{Server: "open", Tool: "x", Annotations: args("destructiveHint", false, "openWorldHint", false)}, config.ActionAllow, "servers.open.tools.default", ""},
		{"no annotations: MCP defaults", Input{Server: "open", Tool: "x", Annotations: args()}, config.ActionApprove, "annotation destructiveHint (not set, so true)", "does not set destructiveHint, which MCP then takes as true; review required (servers.open.tools.default)"},
		{"open world left out", Input{Server: "open", Tool: "x", Annotations: args("destructiveHint", false)}, config.ActionApprove, "annotation openWorldHint (not set, so true)", "does not set openWorldHint"},
		{"set true before left out", Input{Server: "open", Tool: "x", Annotations: args("openWorldHint", true)}, config.ActionApprove, "annotation openWorldHint", "the tool sets openWorldHint"},
		{"read-only: destructive left out is not held", Input{Server: "open", Tool: "x", Annotations: args("readOnlyHint", true, "idempotentHint", true, "openWorldHint", false)}, config.ActionAllow, "servers.open.tools.default", ""},
		{"read-only: open world left out holds", Input{Server: "open", Tool: "x", Annotations: args("readOnlyHint", true)}, config.ActionApprove, "annotation openWorldHint (not set, so true)", "does not set openWorldHint"},
		{"read-only: set true holds", Input{Server: "open", Tool: "x", Annotations: args("readOnlyHint", true, "openWorldHint", true)}, config.ActionApprove, "annotation openWorldHint", "sets openWorldHint"},
		{"read-only false is not read-only", Input{Server: "open", Tool: "x", Annotations: args("readOnlyHint", false, "openWorldHint", false)}, config.ActionApprove, "annotation destructiveHint (not set, so true)", ""},
		{"read-only as a string is not", Input{Server: "open", Tool: "x", Annotations: args("readOnlyHint", "true", "destructiveHint", false)}, config.ActionApprove, "annotation openWorldHint (not set, so true)", ""},
		{"empty list: none, even absent", Input{Server: "noann", Tool: "x", Annotations: args()}, config.ActionAllow, "servers.noann.tools.default", ""},
		{"empty list: none", Input{Server: "noann", Tool: "x", Annotations: args("destructiveHint", true, "openWorldHint", true)}, config.ActionAllow, "servers.noann.tools.default", ""},
		{"listed annotation", Input{Server: "destonly", Tool: "x", Annotations: args("destructiveHint", true)}, config.ActionApprove, "annotation destructiveHint", ""},
		{"unlisted annotation", Input{Server: "destonly", Tool: "x", Annotations: args("openWorldHint", true, "destructiveHint", false)}, config.ActionAllow, "servers.destonly.tools.default", ""},
		{"listed annotation left out", Input{Server: "destonly", Tool: "x", Annotations: args("openWorldHint", true)}, config.ActionApprove, "annotation destructiveHint (not set, so true)", "does not set"},
		{"explicit allow rule wins over absent", Input{Server: "ruled", Tool: "safe", Annotations: args()}, config.ActionAllow, r("ruled", 0, "tool: safe"), ""},
		{"explicit allow rule wins", Input{Server: "ruled", Tool: "safe", Annotations: args("destructiveHint", true)}, config.ActionAllow, r("ruled", 0, "tool: safe"), ""},
		{"allow glob reviewed", Input{Server: "ruled", Tool: "globbed", Annotations: args("destructiveHint", true)}, config.ActionApprove, "annotation destructiveHint", "servers.ruled.tools.allow"},
		{"approve stays approve", Input{Server: "ruled", Tool: "reviewed", Annotations: args("destructiveHint", true)}, config.ActionApprove, "servers.ruled.tools.approve", ""},
		{"deny stays deny", Input{Server: "gh", Tool: "other", Annotations: args("destructiveHint", true)}, config.ActionDeny, "servers.gh.tools.default", ""},

		// Client policy: strictest wins.
		{"client allow keeps server allow", Input{Client: "bob", Server: "gh", Tool: "list_repos"}, config.ActionAllow, "servers.gh.tools.allow", ""},
		{"client approve raises allow", Input{Client: "bob", Server: "gh", Tool: "create_pr", Args: args("repo", "pub-1")}, config.ActionApprove, "clients[1].tools.approve", `"gh/create_pr"`},
		{"client deny beats server allow", Input{Client: "bob", Server: "gh", Tool: "delete_x"}, config.ActionDeny, "clients[1].tools.deny", ""},
		{"client no match denies", Input{Client: "bob", Server: "open", Tool: "write"}, config.ActionDeny, "clients[1].tools", "no allow or approve glob"},
		{"client allow glob on other server", Input{Client: "bob", Server: "open", Tool: "read_file"}, config.ActionAllow, "servers.open.tools.default", ""},
		{"client approve glob over allow glob", Input{Client: "bob", Server: "open", Tool: "read_secret"}, config.ActionApprove, "clients[1].tools.approve", ""},
		{"server deny wins tie", Input{Client: "bob", Server: "gh", Tool: "drop_table"}, config.ActionDeny, "servers.gh.tools.deny", ""},
		{"server approve wins tie", Input{Client: "bob", Server: "gh", Tool: "create_issue", Args: args("repo", "x")}, config.ActionApprove, r("gh", 2, "action: approve}"), ""},
		{"empty tools key denies all", Input{Client: "carol", Server: "open", Tool: "x"}, config.ActionDeny, "clients[2].tools", ""},
		{"no tools key: no restriction", Input{Client: "alice", Server: "open", Tool: "x"}, config.ActionAllow, "servers.open.tools.default", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.in.Annotations == nil {
				// A tool that says it neither writes nor reaches out, so
				// that the cases above the annotation review see their
				// rule's decision; the review's cases set their own.
				tt.in.Annotations = quiet
			}
			d := e.Decide(tt.in)
			if d.Action != tt.action || d.Rule != tt.rule {
				t.Errorf("Decide = %+v, want action %s, rule %s", d, tt.action, tt.rule)
			}
			if !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("Reason = %q, want it to contain %q", d.Reason, tt.reason)
			}
			// A client reads Reason and RuleName(Rule): not the
			// operator's config path.
			if strings.Contains(d.Reason+RuleName(d.Rule), "p.yaml") {
				t.Errorf("Reason %q or RuleName %q names the config file", d.Reason, RuleName(d.Rule))
			}
		})
	}
}

// TestDecideNilAnnotations: a definition without annotations gives the
// policy a nil map, which holds the call as MCP's defaults say.
func TestDecideNilAnnotations(t *testing.T) {
	e := mustEngine(t, policyYAML)
	d := e.Decide(Input{Server: "open", Tool: "x", Annotations: nil})
	if d.Action != config.ActionApprove || d.Rule != "annotation destructiveHint (not set, so true)" {
		t.Errorf("Decide with nil annotations = %+v, want review for destructiveHint not set", d)
	}
}

// TestDecideConditional: a decision by a rule with a when: says so (a
// decision remembered for the tool would pass over the condition); one by
// a rule without, a glob or the default does not.
func TestDecideConditional(t *testing.T) {
	e := mustEngine(t, policyYAML)
	for _, tc := range []struct {
		in   Input
		want bool
	}{
		{Input{Server: "gh", Tool: "create_issue", Args: map[string]any{"repo": "locked"}}, true}, // when held
		{Input{Server: "gh", Tool: "create_issue"}, true},                                         // when failed, fail closed
		{Input{Server: "gh", Tool: "create_issue", Args: map[string]any{"repo": "other"}}, false}, // the rule without when
		{Input{Server: "gh", Tool: "push_tag"}, false},                                            // approve glob
		{Input{Server: "gh", Tool: "other"}, false},                                               // default
	} {
		if d := e.Decide(tc.in); d.Conditional != tc.want {
			t.Errorf("Decide(%+v) = %+v, want Conditional %v", tc.in, d, tc.want)
		}
	}
}

func TestLocalRunMode(t *testing.T) {
	e := mustEngine(t, "version: 1\nservers:\n  s:\n    command: [s]\n    tools: {allow: [a]}\n")
	if d := e.Decide(Input{Server: "s", Tool: "a", Annotations: quiet}); d.Action != config.ActionAllow {
		t.Errorf("stdio agent: %+v, want allow", d)
	}
	// Without a clients list, a client name cannot be checked against one.
	if d := e.Decide(Input{Client: "x", Server: "s", Tool: "a", Annotations: quiet}); d.Action != config.ActionAllow {
		t.Errorf("named client without clients list: %+v, want allow", d)
	}
}

func TestVisible(t *testing.T) {
	e := mustEngine(t, policyYAML)
	tests := []struct {
		client, server, tool string
		want                 bool
	}{
		{"", "gh", "create_issue", true}, // allow and approve rules
		{"", "gh", "merge", true},
		{"", "gh", "edit", true}, // conditional allow rule, default deny
		{"", "gh", "list_repos", true},
		{"", "gh", "push_x", true},
		{"", "gh", "drop_table", false},  // deny glob
		{"", "gh", "other", false},       // default deny
		{"", "ruled", "secret_a", false}, // unconditional deny rule before the allow rule
		{"", "ruled", "maybe", true},     // conditional deny rule
		{"", "open", "x", true},
		{"bob", "gh", "list_repos", true},
		{"bob", "gh", "delete_x", false}, // client deny
		{"bob", "open", "write", false},  // client: no match
		{"bob", "open", "read_x", true},
		{"carol", "open", "x", false},
		{"alice", "open", "x", true},
		{"mallory", "open", "x", false},
		{"", "nope", "x", false},
	}
	for _, tt := range tests {
		if got := e.Visible(tt.client, tt.server, tt.tool); got != tt.want {
			t.Errorf("Visible(%q, %q, %q) = %v, want %v", tt.client, tt.server, tt.tool, got, tt.want)
		}
	}
}

// TestReasonHidesArguments: CEL's own messages quote runtime values, such
// as a map key read from an argument; Reason must not.
func TestReasonHidesArguments(t *testing.T) {
	e := mustEngine(t, "version: 1\nservers:\n  s:\n    command: [s]\n    tools:\n      rules:\n        - {tool: a, when: \"args[args.k] == 1\", action: allow}\n        - {tool: a, when: \"int(args.n) == 1\", action: deny}\n")
	d := e.Decide(Input{Server: "s", Tool: "a", Args: map[string]any{"k": "hunter2-key", "n": "hunter2-num"}})
	if d.Action != config.ActionDeny || strings.Contains(d.Reason, "hunter2") {
		t.Errorf("Decide = %+v, want deny without the argument values", d)
	}
}

func TestCostLimit(t *testing.T) {
	list := make([]any, 10_000)
	for i := range list {
		list[i] = float64(i)
	}
	const hostile = "args.list.map(x, args.list.map(y, x)).size() > 0"
	for _, action := range []string{config.ActionAllow, config.ActionDeny} {
		t.Run(action, func(t *testing.T) {
			e := mustEngine(t, "version: 1\nservers:\n  s:\n    command: [s]\n    tools:\n      rules:\n        - {tool: a, when: \""+hostile+"\", action: "+action+"}\n")
			done := make(chan Decision, 1)
			go func() { done <- e.Decide(Input{Server: "s", Tool: "a", Args: map[string]any{"list": list}}) }()
			select {
			case d := <-done:
				if d.Action != config.ActionDeny || !strings.Contains(d.Reason, "exceeded") {
					t.Errorf("Decide = %+v, want deny with a limit exceeded", d)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("evaluation still running after 5s")
			}
		})
	}
}

// FuzzDecide checks that no argument string reaches Decision.Reason, and
// that Decide does not panic, whatever the arguments.
func FuzzDecide(f *testing.F) {
	for _, s := range []string{`{}`, `{"repo":"locked"}`, `{"repo":"pub-zzzz"}`, `{"count":7}`, `{"count":"zzzzzzzz"}`, `{"path":"ZZZZ.MD"}`, `{"k":[1,{"a":2.5}]}`} {
		f.Add(s, "create_issue")
		f.Add(s, "merge")
	}
	e := mustEngine(f, policyYAML)
	f.Fuzz(func(t *testing.T, argsJSON, tool string) {
		dec := json.NewDecoder(strings.NewReader(argsJSON))
		dec.UseNumber()
		var args map[string]any
		if dec.Decode(&args) != nil {
			return
		}
		d := e.Decide(Input{Client: "bob", Server: "gh", Tool: tool, Args: args, Annotations: args})
		if d.Action != config.ActionAllow && d.Action != config.ActionApprove && d.Action != config.ActionDeny {
			t.Fatalf("action %q", d.Action)
		}
		for _, v := range args {
			if s, ok := v.(string); ok && len(s) >= 8 && !strings.Contains(policyYAML+tool, s) && strings.Contains(d.Reason+d.Rule, s) {
				t.Fatalf("argument value %q in %+v", s, d)
			}
		}
	})
}

func TestComprehension(t *testing.T) {
	e := mustEngine(t, "version: 1\nservers:\n  s:\n    command: [s]\n    tools:\n      rules:\n        - {tool: a, when: \"args.labels.exists(l, l == 'prod')\", action: approve}\n      allow: [a]\n")
	tests := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"labels": []any{"dev", "prod"}}, config.ActionApprove},
		{map[string]any{"labels": []any{"dev"}}, config.ActionAllow},
		{map[string]any{}, config.ActionApprove}, // missing key: the approve rule applies (fail closed)
	}
	for _, tt := range tests {
		if d := e.Decide(Input{Server: "s", Tool: "a", Args: tt.args, Annotations: quiet}); d.Action != tt.want {
			t.Errorf("Decide(%v) = %+v, want %s", tt.args, d, tt.want)
		}
	}
}

// TestToolNamesWithSlash: "/" is an ordinary character of a tool's name:
// allow "*" allows "files/read", a deny glob covers it, a rule's tool
// glob matches it; a client's globs over SERVER/TOOL split at the first
// "/", and their tool part takes "/" as ordinary too.
func TestToolNamesWithSlash(t *testing.T) {
	e := mustEngine(t, `version: 1
clients:
  - {name: bob, token: {from: env:B}, tools: {allow: ["fs/files/*"]}}
  - {name: dan, token: {from: env:D}, tools: {allow: ["f*/*"], deny: ["fs/files/secret*"]}}
servers:
  fs:
    command: [fs]
    tools:
      rules:
        - {tool: "admin*", action: deny}
      deny: ["write*"]
      allow: ["*"]
`)
	for _, tt := range []struct {
		client, tool string
		want         bool
	}{
		{"", "files/read", true},
		{"", "write/file", false},
		{"", "admin/reset", false},
		{"bob", "files/read", true},
		{"bob", "read", false},
		{"dan", "files/read", true},        // a client's tool glob takes "/" in the tool too
		{"dan", "files/secret/key", false}, // so does its deny
	} {
		if got := e.Visible(tt.client, "fs", tt.tool); got != tt.want {
			t.Errorf("Visible(%q, fs, %q) = %v, want %v", tt.client, tt.tool, got, tt.want)
		}
	}
}

// TestUnannotated: the tools approve_annotations holds only because they
// leave an annotation out, as the server's own annotations (custom ones
// included) decide.
func TestUnannotated(t *testing.T) {
	e := mustEngine(t, `version: 1
servers:
  gh:
    command: [x]
    tools:
      allow: ["*"]
      approve: [approved]
      deny: [denied]
      rules: [{tool: ruled, when: 'args.a > 1', action: approve}]
  quiet: {command: [x], tools: {allow: ["*"], approve_annotations: []}}
  custom: {command: [x], tools: {allow: ["*"], approve_annotations: [openWorldHint]}}
`)
	tools := map[string]map[string]any{
		"bare":      nil,
		"titled":    {"title": "T"},
		"read":      {"readOnlyHint": true},
		"local":     {"readOnlyHint": true, "openWorldHint": false},
		"safe":      {"destructiveHint": false},
		"unwritten": {"readOnlyHint": false},
		"open":      {"openWorldHint": true}, // held for what it sets, not for what it leaves out
		"approved":  nil,
		"denied":    nil,
		"ruled":     nil,
	}
	for server, want := range map[string][]string{
		"gh":      {"bare", "read", "safe", "titled", "unwritten"},
		"quiet":   nil,
		"custom":  {"approved", "bare", "denied", "read", "ruled", "safe", "titled", "unwritten"},
		"unknown": nil,
	} {
		if got, _ := e.Unannotated(server, tools); !slices.Equal(got, want) {
			t.Errorf("Unannotated(%s) = %q, want %q", server, got, want)
		}
	}
	if _, anns := e.Unannotated("custom", tools); !slices.Equal(anns, []string{"openWorldHint"}) {
		t.Errorf("the annotations of custom = %q, want its approve_annotations", anns)
	}
}
