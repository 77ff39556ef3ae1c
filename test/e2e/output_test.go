package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestServeRefusesProjectSymlinks: a hostile project ships a symlink where
// the default (or its own config) names a host dir of the sandbox: the
// output itself, a dir on the output's way, a mount source in the input,
// the workspace template, the artifacts dir; or where it names the
// audit's JSONL copy (the file, a dir on its way).
// serve refuses to start, naming the link and its target, and nothing is
// made or written at the target.
func TestServeRefusesProjectSymlinks(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, tc := range []struct {
			name string
			link string // planted in the project, to the host dir
			edit func(cfg string) string
		}{
			{"default output", "mcpbox-out", nil},
			{"intermediate", "build", func(cfg string) string {
				return strings.Replace(cfg, "./mcpbox-out", "./build/out", 1)
			}},
			{"mount in input", "data", func(cfg string) string {
				return strings.Replace(cfg, "      output:", "      mounts: [{source: ./data, target: /data}]\n      output:", 1)
			}},
			// Read, not written, but a link to ~/.ssh would seed the
			// workspace with the user's keys.
			{"template", "tmpl", func(cfg string) string {
				return regexp.MustCompile(`output: \{source: \./mcpbox-out[^}]*\}`).ReplaceAllString(cfg, "output: {}\n      template: ./tmpl")
			}},
			{"artifacts dir", "artifacts", func(cfg string) string {
				return strings.Replace(cfg, "    limits:", "    artifacts: {dir: ./artifacts, include: [\"*\"]}\n    limits:", 1)
			}},
			// The audit's JSONL copy: records (with names a client
			// chooses) appended to a file of the link's choosing, such
			// as ~/.bashrc, are commands for the user's next shell.
			{"audit copy", "audit.jsonl", func(cfg string) string { return cfg + "audit: {jsonl: ./audit.jsonl}\n" }},
			{"audit copy's dir", "logs", func(cfg string) string { return cfg + "audit: {jsonl: ./logs/audit.jsonl}\n" }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := newDefaultProject(t, m)
				link := filepath.Join(p.dir, tc.link)
				if err := os.Symlink(p.hostDir, link); err != nil {
					t.Fatal(err)
				}
				before := dirNames(t, p.hostDir)
				args := defaultServeArgs(t, m, p.dir, "--stdio", "--state-dir", m.dir(t))
				if tc.edit != nil {
					def := string(printDefault(t, m, p.dir))
					cfg := tc.edit(def)
					if cfg == def {
						t.Fatal("the edit left the default unchanged")
					}
					if !m.root() {
						cfg += "sandbox: {require: [userns, mountns, pidns, netns, seccomp, landlock, idmap]}\n"
					}
					m.writeFile(t, filepath.Join(p.dir, "mcpbox.yaml"), cfg, 0o644)
					args = []string{"serve", "--config", filepath.Join(p.dir, "mcpbox.yaml"), "--stdio", "--state-dir", m.dir(t)}
				}
				// The session a client would open: serve must not get
				// as far as answering it.
				r := defaultRun(t, m, p.dir, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`+"\n", args...)
				if r.code == 0 || !strings.Contains(r.stderr, link) || !strings.Contains(r.stderr, p.hostDir) || !strings.Contains(r.stderr, "symlink") {
					t.Errorf("serve with %s a symlink to %s: want a refusal naming both\n%s", link, p.hostDir, r)
				}
				if strings.Contains(r.stdout, `"result"`) {
					t.Errorf("serve answered the client:\n%s", r.stdout)
				}
				// The default's output: what to do about it, too.
				if tc.name == "default output" && !strings.Contains(r.stderr, "remove the link (not what it points to)") {
					t.Errorf("the refusal of a linked mcpbox-out does not say to remove the link:\n%s", r)
				}
				if after := dirNames(t, p.hostDir); !slices.Equal(before, after) {
					t.Errorf("the link's target holds %v, had %v", after, before)
				}
			})
		}
	})
}

// TestDefaultBannerShowsRealOutput: the banner names the output dir the
// sandbox writes to, with symlinks resolved, not the name as written.
func TestDefaultBannerShowsRealOutput(t *testing.T) {
	m := mode{name: "root", uid: -1}
	if os.Geteuid() != 0 {
		t.Skip("the embedded default needs cgroups, which the unprivileged user lacks here")
	}
	p := newDefaultProject(t, m)
	// The project is reached through a symlink of the user's own (the
	// working dir); the banner shows where the output really is.
	via := filepath.Join(m.dir(t), "via")
	if err := os.Symlink(p.dir, via); err != nil {
		t.Fatal(err)
	}
	g := gwServeIn(t, m, via, []string{"--state-dir", m.dir(t)}, "PWD="+via)
	real, err := filepath.EvalSymlinks(filepath.Join(p.dir, "mcpbox-out"))
	if err != nil {
		t.Fatal(err)
	}
	if !g.logs.waitFor("  Output:  ", 30*time.Second) {
		t.Fatalf("no banner within 30 s\n%s", g.logs)
	}
	var out string
	for _, line := range strings.Split(g.logs.String(), "\n") {
		if s, ok := strings.CutPrefix(line, "  Output:  "); ok {
			out = s
		}
	}
	if out != real {
		t.Errorf("banner Output: %q, want the real path %q\n%s", out, real, g.logs)
	}
}

// dirNames lists dir's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
