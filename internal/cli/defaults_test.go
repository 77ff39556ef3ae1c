package cli

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/builtin"
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

// TestDefaultConfigNamesDestructiveTools: the default's comment on
// approve_annotations names every built-in tool marked destructive, the
// tools that line lets run without review.
func TestDefaultConfigNamesDestructiveTools(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := builtin.NewServer(builtin.Options{}).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	comment, _, ok := strings.Cut(string(defaultConfig), "approve_annotations: []")
	if !ok {
		t.Fatal("the embedded default has no approve_annotations: []")
	}
	comment = comment[strings.LastIndex(comment, "tools:"):]
	destructive := 0
	for _, tool := range tools.Tools {
		a := tool.Annotations
		if a == nil || a.DestructiveHint == nil || !*a.DestructiveHint {
			continue
		}
		destructive++
		if !strings.Contains(comment, tool.Name) {
			t.Errorf("the default's comment on approve_annotations does not name %s, marked destructive:\n%s", tool.Name, comment)
		}
	}
	if destructive == 0 {
		t.Error("no built-in tool is marked destructive")
	}
}
