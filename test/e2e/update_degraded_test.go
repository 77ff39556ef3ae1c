package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUpdateAllowDegraded: `mcpbox update` takes --allow-degraded as pin
// and serve do: a user without cgroups cannot start the server the update
// resolved to, and can with --allow-degraded=cgroups, which pins it.
func TestUpdateAllowDegraded(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching to the unprivileged user needs root")
	}
	modules := requireNode(t)
	if _, err := os.Stat(filepath.Join(modules, "@modelcontextprotocol/server-memory/package.json")); err != nil {
		t.Skipf("server-memory not installed: %v", err)
	}
	m := mode{name: "unprivileged", uid: nobody}
	if doctorCgroups(t, m) {
		t.Skip("doctor: this host gives the unprivileged user cgroups, so there is nothing to degrade")
	}
	reg := newNPMRegistry(t, modules)
	dir := m.dir(t)
	cfg := map[string]any{"version": 1, "state_dir": filepath.Join(dir, "state"), "servers": map[string]any{
		"memory": map[string]any{
			"package": "npm:@modelcontextprotocol/server-memory",
			"env":     map[string]string{"MEMORY_FILE_PATH": "/tmp/memory.jsonl"},
			"tools":   map[string]any{"allow": []string{"*"}},
		},
	}}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	cfgPath := filepath.Join(dir, "mcpbox.yaml")
	m.writeFile(t, cfgPath, string(b), 0o644)
	env := []string{"NPM_CONFIG_REGISTRY=" + reg.url(), "HOME=" + dir}

	r := pkgCLI(t, m, env, "update", "--config", cfgPath, "memory")
	if r.code == 0 || !strings.Contains(r.stderr, "cgroup") {
		t.Fatalf("update as a user without cgroups: want it refused for cgroups:\n%s", r)
	}
	r = pkgCLI(t, m, env, "update", "--allow-degraded=cgroups", "--config", cfgPath, "memory")
	if r.code != 0 || !strings.Contains(r.stdout, "\npinned memory: package ") {
		t.Fatalf("update --allow-degraded=cgroups:\n%s", r)
	}
	if lock, _ := os.ReadFile(filepath.Join(dir, "mcpbox.lock")); !strings.Contains(string(lock), "server-memory") {
		t.Errorf("the lock file does not pin the package:\n%s", lock)
	}
}

// doctorCgroups reports whether mcpbox doctor finds cgroups usable by
// the user of mode m.
func doctorCgroups(t *testing.T, m mode) bool {
	t.Helper()
	for _, l := range strings.Split(m.mcpbox(t, 60*time.Second, "", "doctor", "--json").stdout, "\n") {
		var c struct {
			Name string `json:"name"`
			OK   bool   `json:"ok"`
		}
		if json.Unmarshal([]byte(l), &c) == nil && c.Name == "cgroups" {
			return c.OK
		}
	}
	return false
}
