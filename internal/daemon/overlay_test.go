package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLeftOverlay: `mcpbox diff --server` finds the overlay a stopped
// serve left, from the config alone: its one agent's, or the named
// agent's; several agents, none, a link in the tree, a server without an
// overlay and a hostile agent name each get an error that says so.
func TestLeftOverlay(t *testing.T) {
	project := t.TempDir()
	src := filepath.Join(project, "src")
	cfg := filepath.Join(project, "mcpbox.yaml")
	for _, err := range []error{
		os.Mkdir(src, 0o700),
		os.WriteFile(cfg, []byte(`version: 1
state_dir: state
servers:
  fs:
    command: [a]
    filesystem: {input: {source: src, mode: overlay}}
  ro:
    command: [a]
    filesystem: {input: {source: src}}
`), 0o600),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(project, "state", "workspaces")
	upper := func(agent string) string { return filepath.Join(root, agent, "fs", "overlay", "upper") }
	wd := filepath.Join(project, "sub")
	if err := os.Mkdir(wd, 0o700); err != nil {
		t.Fatal(err)
	}
	wantErr := func(agent, want string) {
		t.Helper()
		if _, _, err := LeftOverlay("", wd, "fs", agent); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("agent %q: err %v, want one with %q", agent, err, want)
		}
	}
	wantErr("", "no sandbox of it has written")

	if err := os.MkdirAll(upper("_local"), 0o700); err != nil {
		t.Fatal(err)
	}
	// The project's config, found from a subdir without --config.
	lower, up, err := LeftOverlay("", wd, "fs", "")
	if err != nil || lower != src || up != upper("_local") {
		t.Errorf("one agent: %q %q %v, want %q %q", lower, up, err, src, upper("_local"))
	}

	// A link where an agent's dir would be is not an overlay.
	if err := os.Symlink(filepath.Join(root, "_local"), filepath.Join(root, "evil")); err != nil {
		t.Fatal(err)
	}
	if _, up, err := LeftOverlay(cfg, "/", "fs", ""); err != nil || up != upper("_local") {
		t.Errorf("with a link beside: %q %v", up, err)
	}
	wantErr("evil", "no overlay of server fs for agent evil")
	wantErr("..", "not an agent name")

	if err := os.MkdirAll(upper("alice"), 0o700); err != nil {
		t.Fatal(err)
	}
	wantErr("", "several agents (_local, alice)")
	if _, up, err := LeftOverlay(cfg, "/", "fs", "alice"); err != nil || up != upper("alice") {
		t.Errorf("--agent alice: %q %v", up, err)
	}

	if _, _, err := LeftOverlay(cfg, "/", "ro", ""); err == nil || !strings.Contains(err.Error(), "has no input overlay") {
		t.Errorf("read-only input: %v", err)
	}
	if _, _, err := LeftOverlay(cfg, "/", "nope", ""); err == nil || !strings.Contains(err.Error(), `no server "nope"`) {
		t.Errorf("unknown server: %v", err)
	}
	if _, _, err := LeftOverlay("", t.TempDir(), "fs", ""); err == nil || !strings.Contains(err.Error(), "pass --config") {
		t.Errorf("no project config: %v", err)
	}
}
