package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/integrity"
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

// oneServerLock is a config with one server, s, and its empty lock file.
func oneServerLock(t *testing.T) (*config.Config, *integrity.Pins) {
	t.Helper()
	dir := t.TempDir()
	c, err := config.Load(filepath.Join(dir, "mcpbox.yaml"), []byte("version: 1\nservers:\n  s:\n    command: [x]\n"))
	if err != nil {
		t.Fatal(err)
	}
	pins, err := integrity.OpenPins(filepath.Join(dir, "mcpbox.lock"))
	if err != nil {
		t.Fatal(err)
	}
	return c, pins
}

// TestPinDiffEscaped: pin --check prints a server's changed definition
// with what a terminal would act on escaped: a C1 control (CSI, U+009B)
// or a bidirectional override is valid in JSON, and the server chose it.
func TestPinDiffEscaped(t *testing.T) {
	c, pins := oneServerLock(t)
	tool := func(desc string) gateway.Item {
		return gateway.Item{Key: "t", Raw: json.RawMessage(`{"name":"t","description":"` + desc + `","inputSchema":{"type":"object"}}`)}
	}
	if _, _, err := pins.Check("s", integrity.ModeTOFU, integrity.KindTool, []integrity.Item{{Key: "t", Raw: tool("adds").Raw}}); err != nil {
		t.Fatal(err)
	}
	evil := "adds\u009b2J\u202eexe.txt"
	defs := map[string]*gateway.Definitions{"s": {Lists: map[string][]gateway.Item{gateway.KindTools: {tool(evil)}}}}
	var out strings.Builder
	e := &env{stdout: &out, stderr: &out}
	if n := e.compareWithLock(c, pins, defs, true, "mcpbox pin"); n != 1 {
		t.Fatalf("compareWithLock found %d changes, want 1:\n%s", n, out.String())
	}
	if strings.ContainsAny(out.String(), "\u009b\u202e") || !strings.Contains(out.String(), `adds\u009b2J\u202eexe.txt`) {
		t.Errorf("the changed definition is not shown escaped:\n%s", out.String())
	}
}

// TestNotYetPinnedSaysWhoPins: definitions the lock has nothing of are
// "pinned now" when the command pins them (update), and name the command
// that would when it only checks (pin --check, update --check). update
// used to say "mcpbox pin s records them", then pin them itself.
func TestNotYetPinnedSaysWhoPins(t *testing.T) {
	c, pins := oneServerLock(t)
	tool := gateway.Item{Key: "t", Raw: json.RawMessage(`{"name":"t","inputSchema":{"type":"object"}}`)}
	defs := map[string]*gateway.Definitions{"s": {Lists: map[string][]gateway.Item{gateway.KindTools: {tool}}}}
	for _, tc := range []struct {
		check bool
		cmd   string
		want  string
	}{
		{false, "mcpbox update", "not yet pinned: 1 tool of s (pinned now)\n"},
		{true, "mcpbox update", "not yet pinned: 1 tool of s (mcpbox update s records them)\n"},
		{true, "mcpbox pin", "not yet pinned: 1 tool of s (mcpbox pin s records them)\n"},
	} {
		var out strings.Builder
		e := &env{stdout: &out, stderr: &out}
		if n := e.compareWithLock(c, pins, defs, tc.check, tc.cmd); n != 1 || out.String() != tc.want {
			t.Errorf("check %v, %s: %d differences, printed %q; want 1, %q", tc.check, tc.cmd, n, out.String(), tc.want)
		}
	}
}
