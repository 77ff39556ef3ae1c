package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/approval"
	"mcpbox/internal/config"
	"mcpbox/internal/instance"
)

// TestWriteSandboxesCallsNow: a sandbox with calls in hand shows the
// oldest under LAST CALL, running or awaiting approval, for how long, and
// how many more, on one line whatever the tool name holds; the JSON
// lists every one.
func TestWriteSandboxesCallsNow(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.Local)
	views := []View{{Record: instance.Record{PID: 42}, Sandboxes: []Sandbox{
		{ID: "sbx_1", State: "running", Server: "fs", LastCall: now.Add(-time.Hour), Instance: 42,
			Calls: []Call{{Tool: "write_file", Started: now.Add(-12 * time.Second), Waiting: "approval"}, {Tool: "read_file", Started: now.Add(-time.Second)}}},
		{ID: "sbx_2", State: "running", Server: "gh", LastCall: now.Add(-time.Hour), Instance: 42,
			Calls: []Call{{Tool: "search\nrm -rf", Started: now.Add(-3 * time.Second)}}},
	}}}
	var out bytes.Buffer
	WriteSandboxes(&out, views, false, now)
	for _, want := range []string{"write_file awaits approval 12s +1", "search rm -rf running 3s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table without %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "ago") {
		t.Errorf("a sandbox with calls in hand shows its last call:\n%s", out.String())
	}
	out.Reset()
	WriteSandboxes(&out, views, true, now)
	var first Sandbox
	if err := json.Unmarshal([]byte(strings.Split(out.String(), "\n")[0]), &first); err != nil || len(first.Calls) != 2 || first.Calls[0].Waiting != "approval" {
		t.Errorf("JSON %s: %+v, %v", out.String(), first, err)
	}
}

// TestWriteSandboxesRemote: a remote server's connection is a row with
// "-" for its ID, its origin under POD / REMOTE and why it failed under
// EXIT; the instance's SANDBOXES counts the sandboxes there only (not a
// stopped one, nor connections). A sandbox's OUTPUT is its host dir,
// relative to the instance's state dir when beneath it.
func TestWriteSandboxesRemote(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.Local)
	views := []View{{
		Record: instance.Record{PID: 42, Project: "/p", StateDir: "/s", Transport: "stdio"},
		Sandboxes: []Sandbox{
			{ID: "sbx_1", State: "running", Server: "fs", Started: now.Add(-time.Minute), Instance: 42, Output: "/s/workspaces/_local/fs/output"},
			{ID: "sbx_0", State: "stopped", Server: "fs", Started: now.Add(-time.Hour), Instance: 42, Output: "/sx/out"},
			{State: "running", Server: "docs", Started: now.Add(-time.Minute), LastCall: now.Add(-5 * time.Second), Remote: "https://mcp.example.com", Instance: 42},
			{State: "failed", Server: "api", Remote: "https://api.example.com:8443", Reason: "401 Unauthorized: check header Authorization from env:API_KEY", Instance: 42},
		},
	}, {Record: instance.Record{PID: 43, Project: "/q"}, Err: errors.New("no answer")}}
	var out bytes.Buffer
	WriteSandboxes(&out, views, false, now)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 || !strings.HasSuffix(strings.TrimSpace(lines[0]), "POD / REMOTE                  OUTPUT") {
		t.Fatalf("table:\n%s", out.String())
	}
	for i, want := range [][]string{
		{"sbx_1 ", "running", "fs", "42", "  workspaces/_local/fs/output"},
		{"sbx_0 ", "stopped", "fs", "42", "  /sx/out"},
		{"- ", "running", "docs", "5s ago", "https://mcp.example.com", "-"},
		{"- ", "failed", "api", "401 Unauthorized", "https://api.example.com:8443", "-"},
	} {
		f := lines[i+1]
		if !strings.HasPrefix(f, want[0]) || !strings.HasSuffix(f, want[len(want)-1]) {
			t.Errorf("row %d: %q, want it to begin %q and end %q", i, f, want[0], want[len(want)-1])
		}
		for _, w := range want[1:] {
			if !strings.Contains(f, w) {
				t.Errorf("row %d: %q, want %q in it", i, f, w)
			}
		}
	}
	if strings.Count(lines[4], " - ") < 4 || strings.Contains(lines[4], "00:00:00") {
		t.Errorf("a connection never opened shows a start time or resource use: %q", lines[4])
	}
	out.Reset()
	WriteInstances(&out, views, false)
	if row := strings.Fields(strings.Split(out.String(), "\n")[1]); row[6] != "1" {
		t.Errorf("instance 42 counts %s sandboxes, want 1:\n%s", row[6], out.String())
	}
	out.Reset()
	WriteInstances(&out, views[:1], true)
	if !strings.Contains(out.String(), `"sandboxes":1`) {
		t.Errorf("ps --instances --json: %s; want 1 sandbox", out.String())
	}
}

// TestWriteChangeAndTrusted: trust shows a change's findings below its
// diff, and says how many trusted definitions scan: block still hides.
func TestWriteChangeAndTrusted(t *testing.T) {
	c := PinChange{Server: "rug", Kind: "tool", Key: "add", Status: "changed", Diff: "-a\n+b",
		Findings: []string{"hidden-tag [high] at description: markup"}, Blocked: true}
	var b strings.Builder
	WriteChange(&b, c)
	want := "changed tool rug/add\n-a\n+b\n  scanner: hidden-tag [high] at description: markup\n" +
		"  the server has scan: block: this definition stays hidden even if trusted\n"
	if b.String() != want {
		t.Errorf("WriteChange:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	WriteTrusted(&b, []PinChange{c, {Server: "rug", Key: "sub"}})
	if got := b.String(); !strings.HasPrefix(got, "trusted 2 definition(s)") || !strings.Contains(got, "\n1 of them stay hidden") {
		t.Errorf("WriteTrusted: %q", got)
	}
	b.Reset()
	WriteTrusted(&b, []PinChange{{Server: "rug", Key: "sub"}})
	if strings.Contains(b.String(), "hidden") {
		t.Errorf("WriteTrusted with nothing blocked: %q", b.String())
	}
}

// TestDecided: approve names the scope of a call's approval and the
// definition a trust request trusted; deny says denied.
func TestDecided(t *testing.T) {
	call := approval.Request{ID: "apr_1", Server: "gh", Tool: "create_issue"}
	trust := approval.Request{ID: "apr_2", Kind: approval.KindTrust, Server: "rug", Tool: "add"}
	// Held by a rule's when: a wider grant says it passes over the condition.
	cond := approval.Request{ID: "apr_3", Server: "ev", Tool: "get-sum", Client: "_local",
		Rule: "servers.ev.tools.rules[0] (/p/mcpbox.yaml:9:11)", Conditional: true}
	for _, tc := range []struct {
		req   approval.Request
		allow bool
		scope string
		want  string
	}{
		{call, true, "", "approved (once) apr_1"},
		{call, true, approval.ScopeAlways, "approved (always) apr_1"},
		{trust, true, "", "approved apr_2: the changed definition rug/add is trusted"},
		{trust, false, "", "denied apr_2"},
		{cond, true, "", "approved (once) apr_3"},
		{cond, true, approval.ScopeSession, "approved (session) apr_3: every later call of ev/get-sum by client _local's session that needs approval runs without asking, whatever its arguments: the condition (when:) of servers.ev.tools.rules[0] no longer holds one back"},
		{cond, true, approval.ScopeAlways, "approved (always) apr_3: every later call of ev/get-sum by client _local that needs approval runs without asking, whatever its arguments: the condition (when:) of servers.ev.tools.rules[0] no longer holds one back (mcpbox approvals lists the decision; approvals revoke ID forgets it)"},
		{cond, false, "", "denied apr_3"},
	} {
		if got := Decided(tc.req, tc.allow, tc.scope); got != tc.want {
			t.Errorf("Decided(%+v, %v, %q) = %q, want %q", tc.req, tc.allow, tc.scope, got, tc.want)
		}
	}
}

// TestHumanBytes: memory in ps reads in the largest unit, one decimal
// below 10.
func TestHumanBytes(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "0", 1000: "1000", 1024: "1.0Ki", 32956416: "31Mi", 1610612736: "1.5Gi", 10 << 30: "10Gi",
	} {
		if got := HumanBytes(n); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestWriteApprovals: a call's arguments and a trust request's summary
// (its scanner findings), cut in the table, are shown whole below it,
// control and bidi characters escaped.
func TestWriteApprovals(t *testing.T) {
	long := "tool add changed: description gained text; scanner: hidden-tag@description, model-directive@description, credential-access@description \u202e"
	short := "re\u202eport"
	var b strings.Builder
	WriteApprovals(&b, Approvals{Pending: []approval.Request{
		{ID: "apr_1", Kind: approval.KindCall, Server: "fs", Tool: "write_file", Summary: `{"path": "a"}`, Arguments: json.RawMessage(`{"path":"a"}`)},
		{ID: "apr_2", Kind: approval.KindTrust, Server: "rug", Tool: "add", Summary: long},
		{ID: "apr_3", Kind: approval.KindTrust, Server: "rug", Tool: "sub", Summary: short},
		{ID: "apr_4", Kind: approval.KindCall, Server: "ev", Tool: "get-sum", Client: "cd", Summary: `{"a": 1}`,
			Rule: "servers.ev.tools.rules[0] (/p/mcpbox.yaml:9:11)", Conditional: true},
	}}, false)
	out := b.String()
	// apr_4's rule has a when: the table says what a wider grant covers
	// before anyone decides.
	cond := "\napr_4 approved for the session or always: every later call of ev/get-sum by client cd that needs approval runs without asking, whatever its arguments: the condition (when:) of servers.ev.tools.rules[0] no longer holds one back\n"
	if strings.Count(out, "whatever its arguments") != 1 {
		t.Errorf("want one note on a wider grant, for apr_4:\n%s", out)
	}
	for _, want := range []string{"apr_1 fs/write_file arguments:\n", "apr_2 rug/add change:\n", `re\u{202E}port`, "credential-access@description \\u{202E}", cond} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\u202e") {
		t.Errorf("a bidi override printed as it is:\n%s", out)
	}
}

// TestWriteApprovalsWhere: with several instances answering, each
// pending request names the instance that holds it, in the table and
// the JSON lines.
func TestWriteApprovalsWhere(t *testing.T) {
	r := Approvals{Pending: []approval.Request{{ID: "apr_1", Server: "fs", Tool: "write_file"}, {ID: "apr_2", Server: "fs", Tool: "read_file"}},
		Where: map[string]string{"apr_1": "/home/me/a (pid 10)", "apr_2": "/home/me/b (pid 20)"}}
	var b strings.Builder
	WriteApprovals(&b, r, false)
	if out := b.String(); !strings.Contains(out, "INSTANCE") || !strings.Contains(out, "/home/me/a (pid 10)") || !strings.Contains(out, "/home/me/b (pid 20)") {
		t.Errorf("table:\n%s", out)
	}
	b.Reset()
	WriteApprovals(&b, r, true)
	if out := b.String(); !strings.Contains(out, `"instance":"/home/me/b (pid 20)"`) {
		t.Errorf("json:\n%s", out)
	}
	b.Reset()
	WriteApprovals(&b, Approvals{Pending: r.Pending}, false)
	if strings.Contains(b.String(), "INSTANCE") {
		t.Errorf("one instance: %s", b.String())
	}
}

// TestPrintEscapesServerText: what a server chose (a changed definition
// for trust, a finding's excerpt, a sandbox's end reason in ps) is
// printed with what a terminal would act on escaped: an escape sequence
// could clear the screen, a C1 control start one, a bidirectional
// override turn a name around.
func TestPrintEscapesServerText(t *testing.T) {
	var b strings.Builder
	WriteChange(&b, PinChange{Server: "rug", Kind: "tool", Key: "add\u202e", Status: "changed",
		Diff: "-\"adds\"\n+\"adds\u009b2J\"", Findings: []string{"hidden-tag [high]: \u202etxt.exe"}})
	want := "changed tool rug/add\\u202e\n-\"adds\"\n+\"adds\\u009b2J\"\n  scanner: hidden-tag [high]: \\u202etxt.exe\n"
	if b.String() != want {
		t.Errorf("WriteChange:\n%q\nwant:\n%q", b.String(), want)
	}
	if got := OneLine("killed\x1b[2J: \r\n out of memory", 80); got != `killed\x1b[2J: out of memory` {
		t.Errorf("OneLine = %q", got)
	}
}

// TestWriteInstancesEscapesPaths: an instance's project, config and state
// dir are a directory's or a config's choice; the table and the lines
// below it show them escaped, a line break included, one row each.
func TestWriteInstancesEscapesPaths(t *testing.T) {
	views := []View{{Record: instance.Record{PID: 42, Project: "/p\x1b[2J", Config: "/p/ok\u202elmy.yaml",
		StateDir: "/p/st\nmcpbox: forged", TokenFile: "/p/st\x1b]0;t\x07/token", Transport: "http",
		Unavailable: map[string]string{"fs": "exited: \x1b[31mred\x1b[0m\nline"}}}}
	var b strings.Builder
	WriteInstances(&b, views, false)
	out := b.String()
	if i := strings.IndexFunc(out, config.ActsOnTerminal); i >= 0 {
		t.Errorf("ps prints %q raw at %d:\n%s", []rune(out[i:])[0], i, out)
	}
	if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); len(lines) != 4 || strings.HasPrefix(lines[2], "mcpbox:") {
		t.Errorf("want the header, one row, the token line and the unavailable line; got:\n%s", out)
	}
	for _, want := range []string{`/p\x1b[2J`, `ok\u202elmy.yaml`, `/p/st\nmcpbox: forged`, `/p/st\x1b]0;t\a/token`, `red\x1b[0m\nline`} {
		if !strings.Contains(out, want) {
			t.Errorf("ps output lacks %s:\n%s", want, out)
		}
	}
	// ps --json's notes and the approvals table's INSTANCE column name the
	// project too.
	views[0].Err = errors.New("timeout")
	b.Reset()
	for _, n := range Notes(views) {
		b.WriteString(n + "\n")
	}
	WriteApprovals(&b, Approvals{Pending: []approval.Request{{ID: "apr_1", Server: "fs", Tool: "t"}},
		Where: map[string]string{"apr_1": "/p\x1b[2J (pid 42)"}}, false)
	if i := strings.IndexFunc(b.String(), config.ActsOnTerminal); i >= 0 {
		t.Errorf("notes or approvals print %q raw at %d:\n%s", []rune(b.String()[i:])[0], i, b.String())
	}
}

// TestJSONEscapesServerText: the --json listings write what a terminal
// would act on as \u escapes, also where JSON would leave it raw (C1
// controls, bidirectional overrides), and it decodes to the same text.
func TestJSONEscapesServerText(t *testing.T) {
	hostile := "add\u009b2J\u202etxt.exe\x1b]0;x\x07"
	views := []View{{Record: instance.Record{PID: 42, Project: "/p\u202e"}, Sandboxes: []Sandbox{{
		ID: "sbx_1", Server: "fs", State: "running", Calls: []Call{{Tool: hostile, Started: time.Unix(1, 0)}},
	}}}}
	var b strings.Builder
	WriteSandboxes(&b, views, true, time.Unix(2, 0))
	WriteInstances(&b, views, true)
	WriteApprovals(&b, Approvals{Pending: []approval.Request{{ID: "apr_1", Tool: hostile}}}, true)
	out := b.String()
	if i := strings.IndexFunc(out, config.ActsOnTerminal); i >= 0 {
		t.Errorf("--json output holds %q raw at %d:\n%s", []rune(out[i:])[0], i, out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), out)
	}
	var sbx Sandbox
	if err := json.Unmarshal([]byte(lines[0]), &sbx); err != nil || len(sbx.Calls) != 1 || sbx.Calls[0].Tool != hostile {
		t.Errorf("the sandbox line decodes to %+v, %v; want the tool name %q", sbx, err, hostile)
	}
	var apr struct{ Request approval.Request }
	if err := json.Unmarshal([]byte(lines[2]), &apr); err != nil || apr.Request.Tool != hostile {
		t.Errorf("the approval line decodes to %+v, %v; want the tool name %q", apr, err, hostile)
	}
}

// TestWriteSandboxesNone: with no sandbox yet, ps says so and why, not an
// empty table's header; --json prints nothing.
func TestWriteSandboxesNone(t *testing.T) {
	views := []View{{Record: instance.Record{PID: 42, Project: "/p"}}}
	var out bytes.Buffer
	WriteSandboxes(&out, views, false, time.Now())
	if got := out.String(); got != "no sandboxes yet: a server's sandbox starts when a client first connects\n" {
		t.Errorf("ps without sandboxes: %q", got)
	}
	out.Reset()
	WriteSandboxes(&out, views, true, time.Now())
	if out.Len() != 0 {
		t.Errorf("ps --json without sandboxes: %q", out.String())
	}
}
