package guard

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/redact"
)

// TestListRemembersByGen: the List hook remembers its answer for a
// server list by the gateway's gen of it, and checks a list of another
// gen afresh (a definition changed under a pin is then hidden).
func TestListRemembersByGen(t *testing.T) {
	dir := t.TempDir()
	c, err := config.Load("guard.yaml", []byte("version: 1\nservers:\n  srv:\n    command: [srv]\n    tools: {allow: [\"*\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(c, Options{StateDir: dir, LockPath: filepath.Join(dir, "mcpbox.lock")}, slog.New(slog.DiscardHandler), &redact.Book{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	tool := func(desc string) []gateway.Item {
		return []gateway.Item{{Key: "a", Raw: []byte(`{"name":"a","description":"` + desc + `","inputSchema":{"type":"object"}}`)}}
	}
	keys := func(items []gateway.Item) []string {
		var out []string
		for _, it := range items {
			out = append(out, string(it.Raw))
		}
		return out
	}
	first := g.list(gateway.LocalAgent, "srv", gateway.KindTools, 1, tool("reads a file"))
	if len(first) != 1 {
		t.Fatalf("first list: %q, want the tool (pinned on first use)", keys(first))
	}
	// The same gen is the same list: the answer is remembered (the gateway
	// never shows other items under one gen; here it does, to tell).
	if again := g.list(gateway.LocalAgent, "srv", gateway.KindTools, 1, tool("changed")); len(again) != 1 || string(again[0].Raw) != string(first[0].Raw) {
		t.Errorf("same gen: %q, want the remembered %q", keys(again), keys(first))
	}
	// A new gen is checked: the changed definition is hidden until trusted.
	if fresh := g.list(gateway.LocalAgent, "srv", gateway.KindTools, 2, tool("changed")); len(fresh) != 0 {
		t.Errorf("new gen: %q, want the changed definition hidden", keys(fresh))
	}
	// Gen 0 names no list: never remembered.
	if none := g.list(gateway.LocalAgent, "srv", gateway.KindTools, 0, tool("reads a file")); len(none) != 1 {
		t.Errorf("gen 0 with the pinned definition: %q, want it shown", keys(none))
	}
}

// TestUnmatchedGlobsWarned: an allow or approve glob (or the tool of a
// rule that is no deny) that matches none of the server's tools is warned
// of, once, with the tools it has; globs that match are not, nor deny
// globs and rules.
func TestUnmatchedGlobsWarned(t *testing.T) {
	dir := t.TempDir()
	c, err := config.Load("guard.yaml", []byte(`version: 1
servers:
  fs:
    command: [srv]
    tools:
      allow: [read_*, raed_file]
      deny: [delete_*]
      approve: [write_file]
      rules:
        - {tool: wirte_*, action: approve}
        - {tool: "*rm*", action: deny}
`))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer // list logs synchronously
	log := slog.New(slog.NewTextHandler(&logs, nil))
	g, err := New(c, Options{StateDir: dir, LockPath: filepath.Join(dir, "mcpbox.lock")}, log, &redact.Book{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	items := []gateway.Item{
		{Key: "read_file", Raw: []byte(`{"name":"read_file","inputSchema":{"type":"object"}}`)},
		{Key: "write_file", Raw: []byte(`{"name":"write_file","inputSchema":{"type":"object"}}`)},
	}
	g.list(gateway.LocalAgent, "fs", gateway.KindTools, 1, items)
	g.list("other", "fs", gateway.KindTools, 2, items)
	out := logs.String()
	for _, want := range []string{
		`servers.fs.tools.allow: \"raed_file\" matches none of server fs's 2 tools (a typo, or a tool it does not offer yet?): read_file, write_file`,
		`servers.fs.tools.rules[0]: tool \"wirte_*\" matches none`,
	} {
		if strings.Count(out, want) != 1 {
			t.Errorf("want once in the log: %s\nlog:\n%s", want, out)
		}
	}
	// Deny globs and deny rules are written ahead for tools a server may
	// add: no warning.
	for _, not := range []string{`"read_*"`, `"write_file"`, `"delete_*"`, `"*rm*"`} {
		if strings.Contains(out, not) {
			t.Errorf("a glob that matches was warned of: %s\nlog:\n%s", not, out)
		}
	}
}

// TestRemovedDefinitionLoggedAsInfo: a pinned tool a later list lacks
// (servers list by the client's capabilities) is logged at info, without
// an empty hint; a changed one still warns with what to do.
func TestRemovedDefinitionLoggedAsInfo(t *testing.T) {
	g, logs := newLoggingGuard(t, "fs", "")
	read := gateway.Item{Key: "read_file", Raw: []byte(`{"name":"read_file","inputSchema":{"type":"object"}}`)}
	write := gateway.Item{Key: "write_file", Raw: []byte(`{"name":"write_file","inputSchema":{"type":"object"}}`)}
	g.list(gateway.LocalAgent, "fs", gateway.KindTools, 1, []gateway.Item{read, write})
	read.Raw = []byte(`{"name":"read_file","description":"changed","inputSchema":{"type":"object"}}`)
	g.list(gateway.LocalAgent, "fs", gateway.KindTools, 2, []gateway.Item{read})
	out := logs.String()
	for _, want := range []string{
		`level=INFO msg="tool definition removed" server=fs kind=tool name=write_file` + "\n",
		`level=WARN msg="tool definition changed" server=fs kind=tool name=read_file hint=`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// TestManyHiddenOneLine: a list that hides several definitions of a
// server at once (a package's new version) is one warning naming them
// and the one command that reviews them all, not a warning per tool; a
// single hidden change keeps its own line with its own hint.
func TestManyHiddenOneLine(t *testing.T) {
	g, logs := newLoggingGuard(t, "memory", "")
	items := func(desc string, names ...string) []gateway.Item {
		var its []gateway.Item
		for _, n := range names {
			its = append(its, gateway.Item{Key: n, Raw: []byte(`{"name":"` + n + `","description":"` + desc + `","inputSchema":{"type":"object"}}`)})
		}
		return its
	}
	g.list(gateway.LocalAgent, "memory", gateway.KindTools, 1, items("v1", "read_graph", "create_entities", "search_nodes"))
	logs.Reset()
	g.list(gateway.LocalAgent, "memory", gateway.KindTools, 2, append(items("v2", "read_graph", "create_entities", "search_nodes"), items("v2", "open_nodes")...))
	out := logs.String()
	if n := strings.Count(out, "level=WARN"); n != 1 {
		t.Errorf("%d warnings for one list that hid 4 tools, want 1:\n%s", n, out)
	}
	want := `level=WARN msg="tool definitions changed or new: hidden" server=memory kind=tool count=4 names="\"create_entities\", \"open_nodes\", \"read_graph\", \"search_nodes\"" hint="hidden until trusted: ` + "`mcpbox trust memory --dry-run` shows them"
	if !strings.Contains(out, want) {
		t.Errorf("log lacks %q:\n%s", want, out)
	}

	logs.Reset()
	g.list(gateway.LocalAgent, "memory", gateway.KindTools, 3, append(items("v2", "read_graph", "create_entities", "search_nodes", "open_nodes"), items("v3", "delete_entities")...))
	out = logs.String()
	if want := `level=WARN msg="tool definition new" server=memory kind=tool name=delete_entities hint="hidden until ` + "`mcpbox trust memory/delete_entities`"; !strings.Contains(out, want) || strings.Count(out, "level=WARN") != 1 {
		t.Errorf("one new tool: log lacks %q as its only warning:\n%s", want, out)
	}
}

// TestWarnPinSaysShown: under pin: warn, which shows new and changed
// definitions, the log says they are shown, not hidden until trusted.
func TestWarnPinSaysShown(t *testing.T) {
	g, logs := newLoggingGuard(t, "memory", "pin: warn")
	item := func(name, desc string) gateway.Item {
		return gateway.Item{Key: name, Raw: []byte(`{"name":"` + name + `","description":"` + desc + `","inputSchema":{"type":"object"}}`)}
	}
	g.list(gateway.LocalAgent, "memory", gateway.KindTools, 1, []gateway.Item{item("a", "v1"), item("b", "v1")})
	for i, tc := range []struct {
		items []gateway.Item
		want  string
	}{
		{[]gateway.Item{item("a", "v2"), item("b", "v2")}, `msg="tool definitions changed or new: shown (pin: warn)"`},
		{[]gateway.Item{item("a", "v3"), item("b", "v2")}, `msg="tool definition changed" server=memory kind=tool name=a hint="shown (pin: warn); ` + "`mcpbox trust memory/a` records it"},
	} {
		logs.Reset()
		shown := g.list(gateway.LocalAgent, "memory", gateway.KindTools, uint64(i+2), tc.items)
		out := logs.String()
		if len(shown) != 2 || !strings.Contains(out, tc.want) || strings.Contains(out, "hidden") {
			t.Errorf("%d shown; log lacks %q or says hidden:\n%s", len(shown), tc.want, out)
		}
	}
}

// newLoggingGuard is a guard of one server, name, with the setting extra
// ("pin: warn"; "" none), whose log the returned buffer holds (list logs
// synchronously).
func newLoggingGuard(t *testing.T, name, extra string) (*Guard, *bytes.Buffer) {
	t.Helper()
	dir := t.TempDir()
	c, err := config.Load("guard.yaml", []byte("version: 1\nservers:\n  "+name+":\n    command: [srv]\n    "+extra+"\n    tools: {allow: [\"*\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	g, err := New(c, Options{StateDir: dir, LockPath: filepath.Join(dir, "mcpbox.lock")}, slog.New(slog.NewTextHandler(&logs, nil)), &redact.Book{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g, &logs
}

// TestListWarnsOfUnannotatedTools: tools whose calls wait for review only
// because they leave destructiveHint or openWorldHint out (a read-only one
// that leaves openWorldHint out among them) are named once per server in
// a warning; tools that set them, or a read-only one that sets
// openWorldHint false, are not. A tool the server adds later gets a
// warning of its own (pin: warn shows it at once; otherwise once it is
// trusted: TestManyHiddenOneLine's hidden tools, which set no
// annotations, get no such warning).
func TestListWarnsOfUnannotatedTools(t *testing.T) {
	g, logs := newLoggingGuard(t, "gh", "pin: warn")
	items := []gateway.Item{
		{Key: "merge_pull_request", Raw: []byte(`{"name":"merge_pull_request","inputSchema":{"type":"object"}}`)},
		{Key: "push_files", Raw: []byte(`{"name":"push_files","inputSchema":{"type":"object"},"annotations":{"title":"Push"}}`)},
		{Key: "get_issue", Raw: []byte(`{"name":"get_issue","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`)},
		{Key: "create_issue", Raw: []byte(`{"name":"create_issue","inputSchema":{"type":"object"},"annotations":{"destructiveHint":false,"openWorldHint":true}}`)},
		{Key: "add_label", Raw: []byte(`{"name":"add_label","inputSchema":{"type":"object"},"annotations":{"destructiveHint":false}}`)},
		{Key: "get_me", Raw: []byte(`{"name":"get_me","inputSchema":{"type":"object"},"annotations":{"destructiveHint":false,"openWorldHint":false}}`)},
		{Key: "get_local", Raw: []byte(`{"name":"get_local","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"openWorldHint":false}}`)},
	}
	g.list(gateway.LocalAgent, "gh", gateway.KindTools, 1, items)
	g.list(gateway.LocalAgent, "gh", gateway.KindTools, 2, items)
	out := logs.String()
	if n := strings.Count(out, "leave destructiveHint or openWorldHint unset"); n != 1 {
		t.Fatalf("%d warnings of unannotated tools, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, `4 tools of server gh`) || !strings.Contains(out, `merge_pull_request`) || !strings.Contains(out, `push_files`) ||
		!strings.Contains(out, `add_label`) || !strings.Contains(out, "get_issue") ||
		strings.Contains(out, "create_issue") || strings.Contains(out, "get_me") || strings.Contains(out, "get_local") {
		t.Errorf("the warning names the wrong tools:\n%s", out)
	}
	logs.Reset()
	later := append(items, gateway.Item{Key: "delete_repo", Raw: []byte(`{"name":"delete_repo","inputSchema":{"type":"object"}}`)})
	g.list(gateway.LocalAgent, "gh", gateway.KindTools, 3, later)
	g.list(gateway.LocalAgent, "gh", gateway.KindTools, 4, later)
	out = logs.String()
	if strings.Count(out, "leaves destructiveHint or openWorldHint unset") != 1 || !strings.Contains(out, "1 more tool of server gh leaves") ||
		!strings.Contains(out, "delete_repo") || strings.Contains(out, "merge_pull_request") {
		t.Errorf("want one warning naming only the tool added later:\n%s", out)
	}
}

// TestUnannotatedWarnedBounded: the tools warned of as unannotated are
// remembered up to maxWarnedTools per server, as fixed-size hashes; a
// server that lists ever new (and long) names grows nothing past that,
// and its tools get no more warnings.
func TestUnannotatedWarnedBounded(t *testing.T) {
	g, logs := newLoggingGuard(t, "gh", "pin: off")
	tools := func(gen, n int) []gateway.Item {
		items := make([]gateway.Item, n)
		for i := range items {
			name := fmt.Sprintf("t%d_%d_%s", gen, i, strings.Repeat("x", 1000))
			items[i] = gateway.Item{Key: name, Raw: []byte(`{"name":"` + name + `","inputSchema":{"type":"object"}}`)}
		}
		return items
	}
	g.list(gateway.LocalAgent, "gh", gateway.KindTools, 1, tools(1, maxWarnedTools+10))
	g.mu.Lock()
	n := len(g.unannotated["gh"])
	g.mu.Unlock()
	if n != maxWarnedTools {
		t.Fatalf("%d tools remembered, want %d", n, maxWarnedTools)
	}
	logs.Reset()
	g.list(gateway.LocalAgent, "gh", gateway.KindTools, 2, tools(2, 10))
	g.mu.Lock()
	n = len(g.unannotated["gh"])
	g.mu.Unlock()
	if n != maxWarnedTools || strings.Contains(logs.String(), "unset") {
		t.Errorf("past the bound: %d remembered, log:\n%s", n, logs.String())
	}
}
