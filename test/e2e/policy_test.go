package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyFile runs a sandbox from a config file's first server, and
// checks policy check's FILE:LINE:COL errors, through the binary.
func TestPolicyFile(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		dir := m.dir(t)
		for _, d := range []string{"repo", "out"} {
			if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
			if !m.root() {
				_ = os.Chown(filepath.Join(dir, d), m.uid, m.uid)
			}
		}
		m.writeFile(t, filepath.Join(dir, "repo", "x.txt"), "from the repo", 0o644)
		cfg := filepath.Join(dir, "mcpbox.yaml")
		m.writeFile(t, cfg, `version: 1
servers:
  tool:
    command: [sh]
    filesystem:
      input: {source: ./repo}
      output: {source: ./out}
      tmp: {size: 16Mi}
    env: {LOG_LEVEL: debug}
    limits: {memory: 128Mi, pids: 32}
`, 0o644)
		r := m.sh(t, `echo "level=$LOG_LEVEL"; cat /workspace/input/x.txt; echo; df -k /tmp | tail -1 | awk '{print "tmpk=" $2}'; echo made > /workspace/output/o`, "--policy", cfg)
		want(t, r, 0, "level=debug", "from the repo", "tmpk=16384")
		if got, err := os.ReadFile(filepath.Join(dir, "out", "o")); err != nil || string(got) != "made\n" {
			t.Fatalf("output file: %q %v", got, err)
		}

		bad := filepath.Join(dir, "bad.yaml")
		m.writeFile(t, bad, "version: 1\nservers:\n  tool:\n    command: [sh]\n    limits: {memroy: 1Gi}\n", 0o644)
		out, err := m.command(t.Context(), "policy", "check", bad).CombinedOutput()
		if err == nil || !strings.HasPrefix(string(out), bad+":5:") || !strings.Contains(string(out), "memroy") {
			t.Fatalf("policy check of a bad file: %v\n%s", err, out)
		}
		r = m.exec(t, "", "--policy", bad, "--", "true")
		if r.code != 2 || !strings.Contains(r.stderr, bad+":5:") {
			t.Fatalf("exec --policy with a bad file:\n%s", r)
		}
	})
}
