package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyCheckPackageRunner: policy check refuses a runner command
// that serve would refuse, at its position.
func TestPolicyCheckPackageRunner(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(bad, []byte("version: 1\nservers:\n  s: {command: [npx, -c, 'echo hi'], tools: {allow: ['*']}}\n"), 0o644)
	os.WriteFile(good, []byte("version: 1\nservers:\n  s: {command: [npx, -y, '@modelcontextprotocol/server-memory'], tools: {allow: ['*']}}\n"), 0o644)
	if code, _, stderr := runCLI("policy", "check", bad); code != 1 || !strings.HasPrefix(stderr, bad+":3:16: servers.s.command: ") {
		t.Errorf("bad: exit %d, stderr %q", code, stderr)
	}
	if code, stdout, stderr := runCLI("policy", "check", good); code != 0 || !strings.Contains(stdout, "ok") {
		t.Errorf("good: exit %d, %q %q", code, stdout, stderr)
	}
}

// TestPolicyCheckMissingInput: a server whose filesystem.input, or a
// mount's source, is missing is flagged at its position (every start
// would fail on it), a package server's as well as a command's; an
// existing one is not.
func TestPolicyCheckMissingInput(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "data"), 0o755)
	cfg := filepath.Join(dir, "mcpbox.yaml")
	os.WriteFile(cfg, []byte(`version: 1
servers:
  fs:
    command: [npx, -y, "@modelcontextprotocol/server-filesystem", /workspace/input]
    filesystem: {input: {source: ./data-missing}}
    tools: {allow: ["*"]}
  ok:
    command: [sh, -c, "sleep 1"]
    filesystem: {input: {source: ./data}, mounts: [{source: ./data, target: /d}]}
    tools: {allow: ["*"]}
  imported:
    command: [npx, -y, "@modelcontextprotocol/server-filesystem", /data/out]
    filesystem: {mounts: [{source: ./out, target: /data/out}]}
    tools: {allow: ["*"]}
`), 0o644)
	code, _, stderr := runCLI("policy", "check", cfg)
	want := cfg + ":5:34: warning: servers.fs.filesystem.input.source: "
	if code != 0 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "server fs cannot start") {
		t.Errorf("exit %d, stderr %q; want a warning starting %q", code, stderr, want)
	}
	want = cfg + ":13:36: warning: servers.imported.filesystem.mounts[0].source: "
	if !strings.Contains(stderr, want) || !strings.Contains(stderr, "server imported cannot start") {
		t.Errorf("stderr %q; want a warning starting %q", stderr, want)
	}
	if strings.Contains(stderr, "servers.ok.") {
		t.Errorf("the server with an existing input is flagged: %q", stderr)
	}
}
