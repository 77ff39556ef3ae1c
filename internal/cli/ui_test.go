package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUIWithoutServe: mcpbox ui with no serve running says how to start
// the serve it means, with the config it was given, so that the command
// can be pasted as it is.
func TestUIWithoutServe(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "my project", "mcpbox.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("version: 1\nstate_dir: "+filepath.Join(dir, "state")+"\nservers: {s: {command: [x], tools: {allow: ['*']}}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI("ui", "--print-url", "--config", cfg)
	want := "start one with mcpbox serve --config '" + cfg + "' --http 127.0.0.1:8765"
	if code != 1 || !strings.Contains(errOut, "no mcpbox serve is running") || !strings.Contains(errOut, want) {
		t.Errorf("mcpbox ui without a serve: exit %d, stderr %q; want 1 and %q", code, errOut, want)
	}
}
