package guard

import (
	"testing"

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
		name := ItemName(server, p, "tool", "x")
		if s, tool, ok := resolveTool(name, pre); !ok || s != server || tool != "x" {
			t.Errorf("the shown name %q resolves to %q, %q, %v; want %s, x", name, s, tool, ok, server)
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
		if got := ItemName("github", tt.prefix, tt.kind, tt.key); got != tt.want {
			t.Errorf("ItemName(github, %q, %q, %q) = %q, want %q", tt.prefix, tt.kind, tt.key, got, tt.want)
		}
	}
}
