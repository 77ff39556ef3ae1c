package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPinProtectsTheLockFile: a config whose server mounts the lock
// file's dir writable is refused by pin as by serve, before any server
// starts: the server could rewrite the pins (and pin its own next
// definitions), the config or the audit copy. pin used to start it.
func TestPinProtectsTheLockFile(t *testing.T) {
	project := t.TempDir()
	cfg := filepath.Join(project, "mcpbox.yaml")
	// Only userns required: serve's cgroups check is not what is tested.
	write(t, cfg, `version: 1
sandbox: {require: [userns]}
servers:
  s:
    command: [x]
    filesystem:
      mounts: [{source: ., target: /data, mode: rw}]
`)
	for _, args := range [][]string{
		{"pin", "--config", cfg, "--state-dir", t.TempDir()},
		{"pin", "--check", "--config", cfg, "--state-dir", t.TempDir()},
		{"serve", "--config", cfg, "--stdio", "--state-dir", t.TempDir()},
	} {
		code, _, errs := runCLI(args...)
		if code != exitUsage || !strings.Contains(errs, "server s: the writable mount") || !strings.Contains(errs, "contains "+project) {
			t.Errorf("%s: exit %d, stderr %q; want a refusal naming %s", strings.Join(args, " "), code, errs, project)
		}
	}
}
