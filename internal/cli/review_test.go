package cli

import (
	"strings"
	"testing"
)

// TestTrustWithNoServe: trust asks a running serve, where a change waits;
// with none it says so and points at pin.
func TestTrustWithNoServe(t *testing.T) {
	state := shortTemp(t)
	code, _, errOut := runCLI("trust", "memory", "--dry-run", "--state-dir", state)
	if code != 1 || !strings.Contains(errOut, "no mcpbox serve is running") || !strings.Contains(errOut, "mcpbox pin shows and pins") {
		t.Errorf("trust with no serve: exit %d: %s", code, errOut)
	}
}
