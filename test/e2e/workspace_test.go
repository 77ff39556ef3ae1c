package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The workspace features of serve, from the outside: the input overlay
// and its diff, templates (dir, archive, hostile archive), snapshots
// restored by a new gateway, and the artifact export. Per-client
// isolation of workspaces is TestTSClientAgentIsolation's.

// TestWorkspaceOverlayDiff: a server changes, adds and deletes files of
// its overlaid input; the source stays byte-identical and `mcpbox diff`
// prints exactly those changes.
func TestWorkspaceOverlayDiff(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		src := filepath.Join(m.dir(t), "src")
		wsFiles(t, m, src, map[string]string{
			"a.txt":        "one\ntwo\nthree\n",
			"gone.txt":     "bye\n",
			"sub/keep.txt": "keep\n",
		})
		before := wsRead(t, src)
		s := auConfig(t, m, "", fmt.Sprintf("      input: {source: %q, mode: overlay}\n      output: {}\n", src)+wsAllow)
		g := s.serve(t)
		sess := s.connect(t, g, nil)

		gwMustCall(t, sess, "fs_read", map[string]any{"path": "/workspace/input/a.txt"}, "one\ntwo\nthree\n")
		gwMustCall(t, sess, "fs_write", map[string]any{"path": "/workspace/input/a.txt", "text": "one\nTWO\nthree\n"}, "ok")
		gwMustCall(t, sess, "fs_write", map[string]any{"path": "/workspace/input/new.txt", "text": "fresh\nlines\n"}, "ok")
		gwMustCall(t, sess, "fs_remove", map[string]any{"path": "/workspace/input/gone.txt"}, "ok")
		// Links to host files: the diff, run on the host, must not follow them.
		gwMustCall(t, sess, "fs_symlink", map[string]any{"target": "/etc/passwd", "path": "/workspace/input/evil"}, "ok")
		gwMustCall(t, sess, "fs_remove", map[string]any{"path": "/workspace/input/sub/keep.txt"}, "ok")
		gwMustCall(t, sess, "fs_remove", map[string]any{"path": "/workspace/input/sub"}, "ok")
		gwMustCall(t, sess, "fs_symlink", map[string]any{"target": "/etc", "path": "/workspace/input/sub"}, "ok")
		gwMustCall(t, sess, "fs_read", map[string]any{"path": "/workspace/input/a.txt"}, "one\nTWO\nthree\n")
		wsCallFails(t, sess, "fs_read", map[string]any{"path": "/workspace/input/gone.txt"})

		if d := cmp.Diff(before, wsRead(t, src)); d != "" {
			t.Errorf("the input source changed (-before +after):\n%s", d)
		}
		row := s.waitPS(t, "running", "paused")
		r := s.cli(t, "diff", row.ID, "--config", s.cfg)
		if r.code != 0 {
			t.Fatalf("mcpbox diff: %s", r)
		}
		wsLines(t, r.stdout,
			"diff --git a/a.txt b/a.txt", "--- a/a.txt", "+++ b/a.txt", " one", "-two", "+TWO", " three",
			"diff --git a/new.txt b/new.txt", "new file mode 100644", "--- /dev/null", "+++ b/new.txt", "+fresh", "+lines",
			"diff --git a/gone.txt b/gone.txt", "deleted file mode 100644", "--- a/gone.txt", "+++ /dev/null", "-bye",
			"diff --git a/sub/keep.txt b/sub/keep.txt", "deleted file mode 100644", "--- a/sub/keep.txt", "+++ /dev/null", "-keep",
			"Symbolic links /dev/null and b/evil -> /etc/passwd differ",
			"Symbolic links /dev/null and b/sub -> /etc differ")
		for _, host := range []string{"root:x:", "nologin", "/bin/sh"} {
			if strings.Contains(r.stdout, host) {
				t.Errorf("the diff followed a link to the host (%q):\n%s", host, r.stdout)
			}
		}
		// The patch outlives the sandbox: after a stop, diff still prints it.
		if r := s.cli(t, "stop", row.ID, "--config", s.cfg); r.code != 0 {
			t.Fatalf("mcpbox stop: %s", r)
		}
		if after := s.cli(t, "diff", row.ID, "--config", s.cfg); after.code != 0 || after.stdout != r.stdout {
			t.Errorf("mcpbox diff after the stop: %s\nwant the same output as before:\n%s", after, r.stdout)
		}
		if r := s.cli(t, "diff", "sbx_aaaaaaaaaaaaaaaa", "--config", s.cfg); r.code == 0 {
			t.Errorf("mcpbox diff of an unknown sandbox succeeded: %s", r)
		}
		gwClose(t, sess)
		g.stop(t)
		if d := cmp.Diff(before, wsRead(t, src)); d != "" {
			t.Errorf("after serve stopped, the input source changed (-before +after):\n%s", d)
		}
	})
}

// wsTemplateFiles is what the template tests seed, and what fs_list
// should then print.
var (
	wsTemplateFiles = map[string]string{"readme.md": "hello from the template\n", "sub/deep.txt": "deep\n", "lnk": "->readme.md"}
	wsTemplateList  = "lnk -> readme.md\nreadme.md\nsub/deep.txt"
)

// TestWorkspaceTemplate: a dir or a .tar.gz template seeds a new
// workspace once; a hostile archive stops the sandbox from starting and
// writes nothing outside the workspace.
func TestWorkspaceTemplate(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		t.Run("dir", func(t *testing.T) {
			tdir := filepath.Join(m.dir(t), "tpl")
			wsFiles(t, m, tdir, wsTemplateFiles)
			wsTemplateSeeds(t, m, tdir)
		})
		t.Run("targz", func(t *testing.T) {
			archive := filepath.Join(m.dir(t), "tpl.tar.gz")
			wsTar(t, archive, [][2]string{{"readme.md", wsTemplateFiles["readme.md"]}, {"sub/", ""},
				{"sub/deep.txt", "deep\n"}, {"lnk", "->readme.md"}})
			wsTemplateSeeds(t, m, archive)
		})
		t.Run("hostile", func(t *testing.T) { wsTemplateHostile(t, m) })
	})
}

func wsTemplateSeeds(t *testing.T, m mode, template string) {
	s := auConfig(t, m, "", fmt.Sprintf("      output: {}\n      template: %q\n", template)+wsAllow)
	g := s.serve(t)
	sess := s.connect(t, g, nil)
	gwMustCall(t, sess, "fs_list", map[string]any{"path": "/workspace/output"}, wsTemplateList)
	gwMustCall(t, sess, "fs_read", map[string]any{"path": "/workspace/output/sub/deep.txt"}, "deep\n")
	gwMustCall(t, sess, "fs_read", map[string]any{"path": "/workspace/output/lnk"}, wsTemplateFiles["readme.md"])
	// The workspace is kept across a stop; the template is not applied again.
	gwMustCall(t, sess, "fs_remove", map[string]any{"path": "/workspace/output/readme.md"}, "ok")
	row := s.waitPS(t, "running", "paused")
	if r := s.cli(t, "stop", row.ID, "--config", s.cfg); r.code != 0 {
		t.Fatalf("mcpbox stop: %s", r)
	}
	gwMustCall(t, sess, "fs_list", map[string]any{"path": "/workspace/output"}, "lnk -> readme.md\nsub/deep.txt")
	if tdir, err := os.Stat(template); err == nil && tdir.IsDir() {
		if d := cmp.Diff(wsTemplateFiles["readme.md"], mustRead(t, filepath.Join(template, "readme.md"))); d != "" {
			t.Errorf("the template dir changed: %s", d)
		}
	}
}

// wsTemplateHostile: archives that try to write outside the workspace.
func wsTemplateHostile(t *testing.T, m mode) {
	cases := map[string]func(root string) [][2]string{
		"dotdot":   func(string) [][2]string { return [][2]string{{"ok.txt", "fine\n"}, {"../escape", "out\n"}} },
		"deep":     func(string) [][2]string { return [][2]string{{"a/../../../../escape", "out\n"}} },
		"absolute": func(root string) [][2]string { return [][2]string{{filepath.Join(root, "escape"), "out\n"}} },
		"symlink": func(root string) [][2]string {
			return [][2]string{{"l", "->" + root}, {"l/escape", "out\n"}}
		},
		"hardlink-abs": func(root string) [][2]string {
			return [][2]string{{"hl", "=>" + filepath.Join(root, "target.txt")}}
		},
		"hardlink-up": func(root string) [][2]string {
			return [][2]string{{"hl", "=>../../../../../../../../.." + filepath.Join(root, "target.txt")}}
		},
	}
	for name, entries := range cases {
		t.Run(name, func(t *testing.T) {
			root := m.dir(t)
			archive := filepath.Join(root, "hostile.tar.gz")
			wsTar(t, archive, entries(root))
			m.writeFile(t, filepath.Join(root, "target.txt"), "host file\n", 0o644)
			s := auConfig(t, m, "", fmt.Sprintf("      output: {}\n      template: %q\n", archive)+wsAllow)
			g := s.serve(t)
			msg, started := wsTryStart(t, s, g)
			if started {
				t.Fatalf("the sandbox started from a hostile template: whoami said %q", msg)
			}
			wsRefusal(t, g, msg, root, s.dir)
			wsNoEscape(t, root, s.dir)
			if _, err := os.Lstat(filepath.Join(os.TempDir(), "escape")); err == nil {
				t.Errorf("an archive wrote %s", filepath.Join(os.TempDir(), "escape"))
			}
			wsNoLinks(t, filepath.Join(root, "target.txt"), "host file\n")
		})
	}
}

// TestWorkspaceSnapshot: a snapshot of a sandbox's output and overlay,
// taken while it runs, seeds the workspaces of a new gateway with a fresh
// state dir.
func TestWorkspaceSnapshot(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		src := filepath.Join(m.dir(t), "src")
		wsFiles(t, m, src, map[string]string{"a.txt": "original\n", "gone.txt": "bye\n"})
		before := wsRead(t, src)
		s := auConfig(t, m, "", fmt.Sprintf("      input: {source: %q, mode: overlay}\n      output: {}\n", src)+wsAllow)
		g := s.serve(t)
		sess := s.connect(t, g, nil)
		writes := map[string]string{
			"/workspace/output/out.txt":        "output part\n",
			"/workspace/output/d/nested.txt":   "nested\n",
			"/workspace/input/a.txt":           "changed by the agent\n",
			"/workspace/input/added/added.txt": "added\n",
		}
		for p, text := range writes {
			gwMustCall(t, sess, "fs_write", map[string]any{"path": p, "text": text}, "ok")
		}
		gwMustCall(t, sess, "fs_remove", map[string]any{"path": "/workspace/input/gone.txt"}, "ok")
		// Snapshot runs on the host: a link to a host file stays a link.
		gwMustCall(t, sess, "fs_symlink", map[string]any{"target": "/etc/passwd", "path": "/workspace/output/pw"}, "ok")
		row := s.waitPS(t, "running", "paused")
		file := filepath.Join(m.dir(t), "ws.tar.gz")
		r := s.cli(t, "snapshot", row.ID, "-o", file, "--config", s.cfg)
		if r.code != 0 {
			t.Fatalf("mcpbox snapshot: %s", r)
		}
		if got := strings.TrimSpace(r.stdout); got != file {
			t.Errorf("mcpbox snapshot printed %q, want %q", got, file)
		}
		if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
			t.Fatalf("snapshot file: %v %v", fi, err)
		}
		// The sandbox runs on after the snapshot, the same process.
		gwMustCall(t, sess, "fs_read", map[string]any{"path": "/workspace/output/out.txt"}, "output part\n")
		if r := s.cli(t, "snapshot", row.ID, "-o", file, "--config", s.cfg); r.code == 0 {
			t.Errorf("a snapshot over an existing file succeeded: %s", r)
		}
		gwClose(t, sess)
		g.stop(t)

		fresh := filepath.Join(m.dir(t), "state2")
		g2 := gwServeIn(t, m, "", []string{"--config", s.cfg, "--state-dir", fresh, "--from-snapshot", file}, auTokenEnv+"="+s.token)
		sess2 := s.connect(t, g2, nil)
		for p, text := range writes {
			gwMustCall(t, sess2, "fs_read", map[string]any{"path": p}, text)
		}
		wsCallFails(t, sess2, "fs_read", map[string]any{"path": "/workspace/input/gone.txt"})
		gwMustCall(t, sess2, "fs_list", map[string]any{"path": "/workspace/output"}, "d/nested.txt\nout.txt\npw -> /etc/passwd")
		gwMustCall(t, sess2, "fs_list", map[string]any{"path": "/workspace/input"}, "a.txt\nadded/added.txt")
		if _, err := os.Stat(filepath.Join(fresh, "workspaces")); err != nil {
			t.Errorf("the new gateway did not use its fresh state dir: %v", err)
		}
		if d := cmp.Diff(before, wsRead(t, src)); d != "" {
			t.Errorf("the input source changed (-before +after):\n%s", d)
		}
		gwClose(t, sess2)
		g2.stop(t)
		t.Run("hostile", func(t *testing.T) { wsSnapshotHostile(t, m, s, file) })
	})
}

// wsSnapshotHostile: a real snapshot with hostile entries appended makes
// the sandbox fail to start, writes nothing outside the workspace, and
// still fails when serve is started again on the same state dir.
func wsSnapshotHostile(t *testing.T, m mode, s *auSetup, good string) {
	cases := map[string]func(root string) [][2]string{
		"output-dotdot":  func(string) [][2]string { return [][2]string{{"output/../../escape", "out\n"}} },
		"overlay-dotdot": func(string) [][2]string { return [][2]string{{"overlay/../../escape", "out\n"}} },
		"overlay-symlink": func(root string) [][2]string {
			return [][2]string{{"overlay/l", "->" + root}, {"overlay/l/escape", "out\n"}}
		},
		"output-hardlink": func(root string) [][2]string {
			return [][2]string{{"output/hl", "=>" + filepath.Join(root, "target.txt")}}
		},
		"overlay-hardlink": func(root string) [][2]string {
			return [][2]string{{"overlay/hl", "=>" + filepath.Join(root, "target.txt")}}
		},
	}
	for name, entries := range cases {
		t.Run(name, func(t *testing.T) {
			root := m.dir(t)
			m.writeFile(t, filepath.Join(root, "target.txt"), "host file\n", 0o644)
			file := filepath.Join(root, "hostile.tar.gz")
			wsAppendTar(t, good, file, entries(root))
			state := filepath.Join(m.dir(t), "state")
			args := []string{"--config", s.cfg, "--state-dir", state, "--from-snapshot", file}
			for attempt := 1; attempt <= 2; attempt++ {
				g := gwServeIn(t, m, "", args, auTokenEnv+"="+s.token)
				msg, started := wsTryStart(t, s, g)
				g.stop(t)
				if started {
					// The first failure must not leave a partly restored
					// workspace that the next start takes as made.
					t.Fatalf("attempt %d: the sandbox started from a hostile snapshot", attempt)
				}
				wsRefusal(t, g, msg, root, filepath.Dir(state))
			}
			wsNoEscape(t, root, s.dir, filepath.Dir(state))
			wsNoLinks(t, filepath.Join(root, "target.txt"), "host file\n")
		})
	}
}

// TestWorkspaceArtifacts: when a sandbox stops (by hand, then with
// serve), exactly the included regular files within max_size are copied
// out, and the sandbox_stop record lists them.
func TestWorkspaceArtifacts(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		adir := filepath.Join(m.dir(t), "artifacts")
		s := auConfig(t, m, "", "      output: {}\n    lifecycle: {restart: on-failure}\n"+
			fmt.Sprintf("    artifacts: {dir: %q, include: [\"*.txt\", \"keep/**\", \"via/**\"], max_size: 1Ki}\n", adir)+wsAllow)
		g := s.serve(t)
		sess := s.connect(t, g, nil)
		out := func(rel string) string { return "/workspace/output/" + rel }
		files := map[string]string{
			"ok.txt":       "small and included\n",
			"big.txt":      strings.Repeat("b", 2048),
			"edge.txt":     strings.Repeat("e", 1024),
			"other.bin":    "not included\n",
			"source.dat":   "hard link source\n",
			"sub/deep.txt": "* stays within a directory\n",
			"keep/top.bin": "kept\n",
			"keep/a/b.dat": "kept deeper\n",
		}
		for rel, text := range files {
			gwMustCall(t, sess, "fs_write", map[string]any{"path": out(rel), "text": text}, "ok")
		}
		gwMustCall(t, sess, "fs_symlink", map[string]any{"target": "/etc/passwd", "path": out("link.txt")}, "ok")
		gwMustCall(t, sess, "fs_symlink", map[string]any{"target": "ok.txt", "path": out("inner.txt")}, "ok")
		gwMustCall(t, sess, "fs_link", map[string]any{"target": out("source.dat"), "path": out("hard.txt")}, "ok")
		// Directory links the host-side copy must not walk into: the host's
		// /etc, absolute or by a relative path.
		gwMustCall(t, sess, "fs_symlink", map[string]any{"target": "/etc", "path": out("via")}, "ok")
		gwMustCall(t, sess, "fs_symlink", map[string]any{"target": "/etc", "path": out("keep/abs")}, "ok")
		gwMustCall(t, sess, "fs_symlink", map[string]any{"target": strings.Repeat("../", 20) + "etc", "path": out("keep/rel")}, "ok")
		want := wsTree{"ok.txt": files["ok.txt"], "edge.txt": files["edge.txt"],
			"keep/top.bin": files["keep/top.bin"], "keep/a/b.dat": files["keep/a/b.dat"]}

		row := s.waitPS(t, "running", "paused")
		if r := s.cli(t, "stop", row.ID, "--config", s.cfg); r.code != 0 {
			t.Fatalf("mcpbox stop: %s", r)
		}
		wsWantEnd(t, wsWantArtifacts(t, s, adir, row.ID, want), "sandbox_stop")
		// One record for the stop, marked as asked by an admin.
		if stops := s.logs(t, "--event", "sandbox_stop", "--sandbox", row.ID); len(stops) != 1 {
			t.Errorf("%d sandbox_stop records for one admin stop, want 1: %v", len(stops), stops)
		} else if d, _ := stops[0]["detail"].(map[string]any); d["by"] != fmt.Sprintf("cli:uid=%d", cliUID(m)) {
			t.Errorf("the admin stop's record has detail %v, want by=cli:uid=%d", stops[0]["detail"], cliUID(m))
		}

		// The next call starts another sandbox on the same workspace; a
		// crash ends it, and its files are copied out too.
		gwMustCall(t, sess, "fs_write", map[string]any{"path": out("later.txt"), "text": "later\n"}, "ok")
		second := wsNewSandbox(t, s, row.ID)
		wsCallFails(t, sess, "crash", nil)
		want["later.txt"] = "later\n"
		end := wsWantArtifacts(t, s, adir, second, want)
		wsWantEnd(t, end, "sandbox_crash")
		for _, r := range s.ps(t) {
			if r.ID == second && r.State != "failed" {
				t.Errorf("the crashed sandbox is %q in ps, want failed", r.State)
			}
		}

		// restart: on-failure starts a third; serve stopping ends it.
		gwMustCall(t, sess, "fs_write", map[string]any{"path": out("last.txt"), "text": "last\n"}, "ok")
		third := wsNewSandbox(t, s, row.ID, second)
		gwClose(t, sess)
		g.stop(t)
		want["last.txt"] = "last\n"
		wsWantEnd(t, wsWantArtifacts(t, s, adir, third, want), "sandbox_stop")
		_ = filepath.WalkDir(adir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && (d.Name() == "passwd" || d.Name() == "hostname") {
				t.Errorf("a host file was exported: %s", p)
			}
			return nil
		})
	})
}
