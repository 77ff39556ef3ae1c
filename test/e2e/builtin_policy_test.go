package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestBuiltinCommandSpellings: inside the real sandbox, every spelling of
// a denied command is refused by the workspace server's command policy
// (absolute path, a symlinked dir, "..", a wrapper, a shell), the allowed
// command still runs by path, and a workspace program named like an
// allowed one is refused.
func TestBuiltinCommandSpellings(t *testing.T) {
	if _, err := os.Stat("/usr/bin/git"); err != nil {
		t.Skip("no /usr/bin/git on this host")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		cfg := hsWriteConfig(t, m, gwDir(t, m), map[string]any{"ws": map[string]any{
			"builtin":    "workspace",
			"filesystem": map[string]any{"output": map[string]any{}},
			"tools":      map[string]any{"allow": []string{"*"}, "approve_annotations": []string{}},
			"commands":   map[string]any{"allow": []string{"git", "env", "sh"}, "deny": []string{"git *push*"}},
		}})
		g := gwServe(t, m, cfg)
		defer g.stop(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sess := gwConnect(t, ctx, g.url, nil, nil, gwLegacy)
		defer gwClose(t, sess)
		run := func(argv ...string) (string, error) {
			cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
			defer ccancel()
			return gwCall(cctx, sess, "run_command", map[string]any{"argv": argv})
		}
		for _, argv := range [][]string{
			{"git", "push"},
			{"/usr/bin/git", "push"},
			{"/bin/git", "push"},
			{"/usr/bin/../bin/git", "push"},
			{"env", "/usr/bin/git", "push"},
			{"sh", "-c", "git push"},
		} {
			if out, err := run(argv...); err == nil || !strings.Contains(err.Error(), `matches deny rule \"git *push*\"`) {
				t.Errorf("%q: got %q, %v; want the deny rule", argv, out, err)
			}
		}
		if out, err := run("/usr/bin/git", "--version"); err != nil || !strings.Contains(out, "git version") {
			t.Errorf("/usr/bin/git --version: %q, %v", out, err)
		}
		if _, err := run("sh", "-c", "printf '#!/bin/sh\\necho pwned\\n' > git && chmod +x git"); err != nil {
			t.Fatalf("writing a workspace program: %v", err)
		}
		for _, argv := range [][]string{{"./git", "log"}, {"/workspace/output/git", "log"}, {"/usr/bin/../../workspace/output/git", "log"}} {
			if out, err := run(argv...); err == nil || !strings.Contains(err.Error(), "outside the sandbox's executable directories") {
				t.Errorf("%q: got %q, %v; want a refusal", argv, out, err)
			}
		}
	})
}
