package cli

import (
	"os"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/config"
)

// clientRequestTimeout is the request timeout of common MCP clients
// (the TypeScript and Python SDKs' default): an approval that waits
// longer reaches a client that has already given up.
const clientRequestTimeout = 60 * time.Second

// TestDefaultConfigRecovers: the embedded default restarts a crashed
// server and answers a call waiting for approval before the client's own
// request timeout.
func TestDefaultConfigRecovers(t *testing.T) {
	c, err := config.Load("(embedded default)", defaultConfig)
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Approvals.EffectiveTimeout(); d <= 0 || d >= clientRequestTimeout {
		t.Errorf("approval timeout of the default config: %v, want in (0, %v)", d, clientRequestTimeout)
	}
	for _, s := range c.Servers {
		if r := s.Lifecycle.EffectiveRestart(); r != config.RestartOnFailure {
			t.Errorf("server %s: restart %q, want %q", s.Name, r, config.RestartOnFailure)
		}
	}
}

// TestDefaultConfigDocumented: docs/config.md quotes the embedded default
// as --print-config prints it, word for word.
func TestDefaultConfigDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "\n## The embedded default\n")
	if !ok {
		t.Fatal(`docs/config.md has no section "The embedded default"`)
	}
	_, block, ok := strings.Cut(rest, "```yaml\n")
	if ok {
		block, _, ok = strings.Cut(block, "```\n")
	}
	if !ok {
		t.Fatal(`docs/config.md's "The embedded default" quotes no YAML block`)
	}
	if block != string(defaultConfig) {
		t.Errorf("docs/config.md's embedded default differs from internal/cli/default.yaml:\n%s", block)
	}
}
