package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPackageInstallsInBackground: a package server's first install does
// not hold up the others. serve answers the client's initialize while the
// package is still installing (the loopback registry holds it), with the
// other server's tools; the installing one joins the session once
// installed, announced by tools/list_changed, is pinned in mcpbox.lock,
// and its tools work.
func TestPackageInstallsInBackground(t *testing.T) {
	const pkg = "@modelcontextprotocol/server-memory"
	reg, free, waitedOut := heldRegistry(t, pkg)
	m := modes(t)[0]
	dir := m.dir(t)
	bin := goBuild(t, gwServerPkg)
	cfg := map[string]any{"version": 1, "state_dir": filepath.Join(dir, "state"), "servers": map[string]any{
		"memory": map[string]any{"package": "npm:" + pkg, "tools": map[string]any{"allow": []string{"*"}}},
		"quick": map[string]any{
			"command":    []string{"/opt/bin/mcpserver", "-name", "quick"},
			"filesystem": map[string]any{"mounts": []map[string]string{{"source": bin, "target": "/opt/bin", "mode": "ro"}}},
			"tools":      map[string]any{"allow": []string{"*"}},
		},
	}}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	cfgPath := filepath.Join(dir, "mcpbox.yaml")
	m.writeFile(t, cfgPath, string(b), 0o644)
	changed := make(chan struct{}, 1)
	sess, logs, stop := pkgServeWith(t, m, cfgPath, listChanged(changed), "NPM_CONFIG_REGISTRY="+reg.url(), "HOME="+dir)
	defer stop()
	if waitedOut.Load() {
		t.Fatalf("initialize was answered only after the registry had held the install for 90 s\n%s", logs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tools, err := sess.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v\n%s", err, logs)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "quick__whoami") || strings.Contains(strings.Join(names, " "), "memory__") {
		t.Fatalf("while memory installs, quick's tools and none of memory's expected, got %v\n%s", names, logs)
	}
	if !strings.Contains(logs.String(), "server memory: its package is still installing") {
		t.Errorf("serve did not say memory is still installing:\n%s", logs)
	}
	if _, err := os.Stat(filepath.Join(dir, "mcpbox.lock")); err == nil {
		if lock, _ := os.ReadFile(filepath.Join(dir, "mcpbox.lock")); strings.Contains(string(lock), pkg) {
			t.Fatalf("memory pinned before its install ended:\n%s", lock)
		}
	}

	free()
	waitTools(t, sess, changed, logs, "memory__read_graph")
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "memory__read_graph", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("memory__read_graph after the late join: %v %+v\n%s", err, res, logs)
	}
	lock, err := os.ReadFile(filepath.Join(dir, "mcpbox.lock"))
	if err != nil || !strings.Contains(string(lock), pkg) {
		t.Fatalf("memory's package not pinned after its install: %v\n%s", err, lock)
	}
}

// TestOnlyPackageServerJoins: with only a package server, whose first
// install outlasts the waits for it, serve answers initialize before the
// client gives up (a client that does ends a stdio serve and the install
// with it, so that nothing would ever install), with no tools, and the
// server joins once installed, announced by tools/list_changed. Once the
// registry has confirmed the package (its dependencies install), serve
// waits no longer for it, only the session does (20 s): within the 30 s
// Claude Desktop gives a server's start. While the registry does not
// answer for the package itself, serve first waits up to 10 s (a
// mistyped name fails within it), and says so: within the TypeScript
// SDK's minute.
func TestOnlyPackageServerJoins(t *testing.T) {
	const pkg = "@modelcontextprotocol/server-memory"
	for _, tc := range []struct {
		name, held string
		within     time.Duration
		waits      bool // serve says it waits for the registry (else it may)
	}{
		{"dependencies install", "@modelcontextprotocol/sdk", 28 * time.Second, false},
		{"registry stalls", pkg, 45 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg, free, waitedOut := heldRegistry(t, tc.held)
			m := modes(t)[0]
			dir := m.dir(t)
			cfg := map[string]any{"version": 1, "state_dir": filepath.Join(dir, "state"), "servers": map[string]any{
				"memory": map[string]any{"package": "npm:" + pkg, "tools": map[string]any{"allow": []string{"*"}}},
			}}
			b, _ := json.MarshalIndent(cfg, "", "  ")
			cfgPath := filepath.Join(dir, "mcpbox.yaml")
			m.writeFile(t, cfgPath, string(b), 0o644)
			changed := make(chan struct{}, 1)
			begin := time.Now()
			sess, logs, stop := pkgServeWith(t, m, cfgPath, listChanged(changed), "NPM_CONFIG_REGISTRY="+reg.url(), "HOME="+dir)
			defer stop()
			took := time.Since(begin)
			if took > tc.within || waitedOut.Load() {
				t.Fatalf("initialize was answered after %v, want within %v\n%s", took, tc.within, logs)
			}
			t.Logf("initialize answered after %v", took)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			tools, err := sess.ListTools(ctx, nil)
			if err != nil || len(tools.Tools) != 0 {
				t.Fatalf("tools/list while memory installs: %v %v\n%s", tools, err, logs)
			}
			if tc.waits && !logs.waitFor("waiting up to", time.Second) {
				t.Errorf("serve did not say it waits for the registry:\n%s", logs)
			}
			free()
			waitTools(t, sess, changed, logs, "read_graph") // the only server: no prefix
			if res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "read_graph", Arguments: map[string]any{}}); err != nil || res.IsError {
				t.Fatalf("memory__read_graph after the late join: %v %+v\n%s", err, res, logs)
			}
		})
	}
}

// heldRegistry is a loopback npm registry that holds pkg's metadata
// (for mcpbox's resolution, or npm's install of a dependency) until free
// is called, 90 s at most (then waitedOut is set).
func heldRegistry(t *testing.T, pkg string) (reg *npmRegistry, free func(), waitedOut *atomic.Bool) {
	t.Helper()
	reg = newNPMRegistry(t, requireNode(t))
	release := make(chan struct{})
	var releaseOnce sync.Once
	free = func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free)
	waitedOut = new(atomic.Bool)
	reg.gate = func(p string) {
		if strings.TrimPrefix(p, "/") != pkg {
			return
		}
		select {
		case <-release:
		case <-time.After(90 * time.Second):
			waitedOut.Store(true)
		}
	}
	return reg, free, waitedOut
}
