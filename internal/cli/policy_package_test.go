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
