package daemon

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/integrity"
)

// TestCompareSkipsPinOff: pin --check compares only the servers whose
// definitions serve checks: a builtin server (pinning off by default) and
// one with pin: off are not reported as "not yet pinned", which failed
// the check of every config holding the embedded default's workspace.
func TestCompareSkipsPinOff(t *testing.T) {
	c, err := config.Load("mcpbox.yaml", []byte(`version: 1
servers:
  workspace: {builtin: workspace, tools: {allow: ["*"]}}
  off: {command: [x], pin: off, tools: {allow: ["*"]}}
  tofu: {command: [x], tools: {allow: ["*"]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	pins, err := integrity.OpenPins(filepath.Join(t.TempDir(), "mcpbox.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]*gateway.Definitions{}
	for _, name := range []string{"workspace", "off", "tofu"} {
		defs[name] = &gateway.Definitions{Lists: map[string][]gateway.Item{
			gateway.KindTools: {{Key: "t", Raw: json.RawMessage(`{"name":"t","inputSchema":{"type":"object"}}`)}},
		}}
	}
	notPinned := map[string]int{}
	for _, cmp := range Compare(c, pins, defs) {
		notPinned[cmp.Server] += cmp.NotPinned
	}
	if notPinned["workspace"] != 0 || notPinned["off"] != 0 || notPinned["tofu"] != 1 {
		t.Errorf("not pinned: %v, want only tofu's tool", notPinned)
	}
}
