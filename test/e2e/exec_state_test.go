package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExecTouchesNoState: `mcpbox exec` builds its sandbox from its flags
// alone. It reads no project config (a broken mcpbox.yaml in its working
// directory does not stop it), so it compiles no policy or CEL condition;
// it opens no audit database and creates no state, config, cache or
// runtime dir (HOME and the XDG dirs stay empty). The gateway's set-up
// stays off the path of the CLI's shortest command, whose time is
// measured against bubblewrap's (issue 19, docs/performance.md: where
// `mcpbox exec`'s time goes).
func TestExecTouchesNoState(t *testing.T) {
	root := t.TempDir()
	dirs := map[string]string{}
	for _, name := range []string{"HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR"} {
		d := filepath.Join(root, strings.ToLower(name))
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		dirs[name] = d
	}
	work := filepath.Join(root, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(work, "mcpbox.yaml")
	if err := os.WriteFile(config, []byte("servers: [unterminated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if _, set := dirs[strings.SplitN(kv, "=", 2)[0]]; !set {
			env = append(env, kv)
		}
	}
	for name, d := range dirs {
		env = append(env, name+"="+d)
	}
	run := func(args ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, mcpboxBin, args...)
		cmd.Dir, cmd.Env = work, env
		return cmd.CombinedOutput()
	}

	// The config is one mcpbox refuses: reading it would fail exec.
	if out, err := run("policy", "check", config); err == nil {
		t.Fatalf("mcpbox policy check accepted the broken config, which proves nothing about exec:\n%s", out)
	}
	if out, err := run("exec", "--", "/bin/true"); err != nil {
		t.Fatalf("mcpbox exec -- /bin/true beside a broken mcpbox.yaml: %v\n%s", err, out)
	}
	for name, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			t.Errorf("mcpbox exec created %s in its %s (%s): exec must not open state, an audit database or config", e.Name(), name, d)
		}
	}
	ents, err := os.ReadDir(work)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "mcpbox.yaml" {
			t.Errorf("mcpbox exec created %s in its working directory", e.Name())
		}
	}
}
