package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestConfigMountSourceWithColon: a config mount whose source dir's name
// holds ":" is mounted, by exec --policy as by serve: a config's source is
// a name, not the --mount flag's SRC:DST[:MODE] syntax (serve used to
// refuse it).
func TestConfigMountSourceWithColon(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		dir := gwDir(t, m)
		src := filepath.Join(dir, "data:v1")
		m.mkdir(t, src)
		m.writeFile(t, filepath.Join(src, "x.txt"), "from data:v1", 0o644)
		mounts := []map[string]any{{"source": "./data:v1", "target": "/data"}}

		cfg := hsWriteConfig(t, m, dir, map[string]any{"tool": map[string]any{
			"command":    []string{"sh"},
			"filesystem": map[string]any{"mounts": mounts},
		}})
		r := m.sh(t, `cat /data/x.txt`, "--policy", cfg)
		want(t, r, 0, "from data:v1")

		cfg = hsWriteConfig(t, m, dir, map[string]any{"ws": map[string]any{
			"builtin":    "workspace",
			"filesystem": map[string]any{"output": map[string]any{}, "mounts": mounts},
			"tools":      map[string]any{"allow": []string{"*"}, "approve_annotations": []string{}},
			"commands":   map[string]any{"allow": []string{"cat"}},
		}})
		g := gwServe(t, m, cfg)
		defer g.stop(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sess := gwConnect(t, ctx, g.url, nil, nil, gwLegacy)
		defer gwClose(t, sess)
		if out, err := gwCall(ctx, sess, "run_command", map[string]any{"argv": []string{"cat", "/data/x.txt"}}); err != nil || !strings.Contains(out, "from data:v1") {
			t.Errorf("serve: cat /data/x.txt: %q, %v; want the mounted file", out, err)
		}
	})
}
