package cli

import (
	"testing"

	"mcpbox/internal/audit"
	"mcpbox/internal/config"
)

const twoServers = `version: 1
servers:
  github: {command: [gh], tools: {allow: ["*"]}}
  fs: {command: [fs], prefix: "f_", tools: {allow: ["*"]}}
`

// TestResolveTool: an admin command's tool argument may be SERVER/TOOL
// or the name clients call the tool by, with whatever prefix the config
// gives its server.
func TestResolveTool(t *testing.T) {
	c, err := config.Load("t.yaml", []byte(twoServers))
	if err != nil {
		t.Fatal(err)
	}
	pre := prefixes(c)
	tests := []struct {
		arg, server, tool string
		ok                bool
	}{
		{"github/create_issue", "github", "create_issue", true},
		{c.EffectivePrefix(c.Server("github")) + "create_issue", "github", "create_issue", true},
		{c.EffectivePrefix(c.Server("fs")) + "read", "fs", "read", true},
		{"create_issue", "", "", false},        // no server's prefix
		{"github__", "", "", false},            // a prefix alone
		{"nosuch/create_issue", "", "", false}, // no such server
		{"github/", "", "", false},
	}
	for _, tt := range tests {
		s, tool, ok := resolveTool(tt.arg, pre)
		if s != tt.server || tool != tt.tool || ok != tt.ok {
			t.Errorf("resolveTool(%q) = %q, %q, %v; want %q, %q, %v", tt.arg, s, tool, ok, tt.server, tt.tool, tt.ok)
		}
	}
	// Whatever the prefixes, the name a tool shows is the one it resolves from.
	for server, p := range pre {
		name := itemName(server, p, "tool", "x")
		if s, tool, ok := resolveTool(name, pre); !ok || s != server || tool != "x" {
			t.Errorf("the shown name %q resolves to %q, %q, %v; want %s, x", name, s, tool, ok, server)
		}
	}
}

// TestLogsToolFilter: `logs --tool` selects the same records by the
// client-visible name, the server's own name and SERVER/TOOL, and no
// record of another tool.
func TestLogsToolFilter(t *testing.T) {
	recs := []audit.Record{
		{Seq: 1, Server: "github", Tool: "create_issue", Name: "github__create_issue"},
		{Seq: 2, Server: "github", Tool: "list_issues", Name: "github__list_issues"},
		{Seq: 3, Server: "fs", Tool: "create_issue", Name: "f_create_issue"},
		{Seq: 4, Event: audit.EventSessionStart},
	}
	tests := []struct {
		arg  string
		want []int64
	}{
		{"github__create_issue", []int64{1}},
		{"f_create_issue", []int64{3}},
		{"create_issue", []int64{1, 3}}, // the servers' own name: both
		{"github/create_issue", []int64{1}},
		{"", []int64{1, 2, 3, 4}},
	}
	for _, tt := range tests {
		f := parseToolFilter(tt.arg)
		var got []int64
		for _, r := range recs {
			// The query's part of the filter, then match.
			if (f.server != "" && r.Server != f.server) || (f.tool != "" && r.Tool != f.tool) || !f.match(r) {
				continue
			}
			got = append(got, r.Seq)
		}
		if len(got) != len(tt.want) {
			t.Errorf("--tool %q selects %v, want %v", tt.arg, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("--tool %q selects %v, want %v", tt.arg, got, tt.want)
				break
			}
		}
	}
}

func TestItemName(t *testing.T) {
	for _, tt := range []struct{ prefix, kind, key, want string }{
		{"github__", "tool", "create_issue", "github__create_issue"},
		{"github__", "prompt", "review", "github__review"},
		{"github__", "template", "repo://{x}", "github/repo://{x}"}, // no client-visible name
		{"github__", "instructions", "instructions", "github/instructions"},
		{"", "tool", "read", "read"},
	} {
		if got := itemName("github", tt.prefix, tt.kind, tt.key); got != tt.want {
			t.Errorf("itemName(github, %q, %q, %q) = %q, want %q", tt.prefix, tt.kind, tt.key, got, tt.want)
		}
	}
}
