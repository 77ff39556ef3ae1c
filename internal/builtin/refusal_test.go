//go:build linux

package builtin

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPolicyRefusalMarked: a command the policy refuses comes back as an
// error result marked with PolicyMeta and the deciding rule, so that the
// gateway audits it as a denial; a command that ran, or one that failed
// for another reason, carries no marker.
func TestPolicyRefusalMarked(t *testing.T) {
	w := newWorkspace(t, Options{
		Commands:       CommandPolicy{Allow: []string{"ls", "sh", "no-such-program-xyz"}, Deny: []string{"rm"}, Approve: []string{"touch"}},
		CommandTimeout: 2 * time.Second,
		OutputCap:      1000,
	})
	tests := []struct {
		tool     string
		argv     []string
		wantRule string // "": no marker
	}{
		{"run_command", []string{"rm", "-rf", "/"}, `commands.deny "rm"`},
		{"start_job", []string{"rm", "x"}, `commands.deny "rm"`},
		{"run_command", []string{"touch", "x"}, `commands.approve "touch"`},
		{"run_command", []string{"cat", "/etc/passwd"}, "commands.allow (no rule matches)"},
		{"start_job", []string{"cat", "x"}, "commands.allow (no rule matches)"},
		{"run_command", []string{"ls"}, ""},
		{"run_command", []string{"sh", "-c", "exit 3"}, ""},
		{"run_command", []string{"no-such-program-xyz"}, ""},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := w.cs.CallTool(ctx, &mcp.CallToolParams{Name: tt.tool, Arguments: map[string]any{"argv": tt.argv}})
		cancel()
		if err != nil {
			t.Fatalf("%s %q: %v", tt.tool, tt.argv, err)
		}
		mark, _ := res.Meta[PolicyMeta].(map[string]any)
		switch {
		case tt.wantRule == "" && mark != nil:
			t.Errorf("%s %q: marked %v, want no marker", tt.tool, tt.argv, mark)
		case tt.wantRule != "" && (!res.IsError || mark["decision"] != "deny" || mark["rule"] != tt.wantRule):
			t.Errorf("%s %q: error %v, marker %v; want an error result marked deny by %s", tt.tool, tt.argv, res.IsError, mark, tt.wantRule)
		}
	}
}
