package cli

import (
	"os"
	"path/filepath"
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

// TestTrustWithNoServeNamesConfig: the hint names the config trust was
// given, which pin would not find on its own.
func TestTrustWithNoServeNamesConfig(t *testing.T) {
	dir := shortTemp(t)
	cfg := filepath.Join(dir, "team.yaml")
	if err := os.WriteFile(cfg, []byte("version: 1\nstate_dir: state\nservers:\n  memory: {command: [srv], tools: {allow: [\"*\"]}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI("trust", "memory", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "mcpbox pin --config "+cfg+" shows and pins") {
		t.Errorf("trust with no serve, --config: exit %d: %s", code, errOut)
	}
}
