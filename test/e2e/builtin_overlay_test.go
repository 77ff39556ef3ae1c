package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// builtinOverlaySetup writes a config whose built-in workspace server has
// the project as an overlaid input and its output inside it (./mcpbox-out,
// as in the default), and returns it with the project dir.
func builtinOverlaySetup(t *testing.T, m mode) (s *auSetup, project string) {
	t.Helper()
	project = filepath.Join(m.dir(t), "proj")
	wsFiles(t, m, project, map[string]string{
		"a.txt":               "one\ntwo\n",
		"sub/keep.txt":        "keep\n",
		"mcpbox-out/old.txt":  "earlier output marker-7f3a\n",
		"mcpbox-outside.txt":  "not the output\n",
		"mcpbox-out/sub/b.md": "b\n",
	})
	s = &auSetup{m: m, dir: m.dir(t), token: gwHex(16)}
	s.state = filepath.Join(s.dir, "state")
	s.cfg = filepath.Join(s.dir, "mcpbox.yaml")
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nstate_dir: %q\n", s.state)
	if !m.root() {
		b.WriteString("sandbox: {require: [userns, mountns, pidns, netns, seccomp, landlock, idmap]}\n")
	}
	fmt.Fprintf(&b, "clients:\n  - {name: %s, token: {from: \"env:%s\"}}\n", auClient, auTokenEnv)
	fmt.Fprintf(&b, `servers:
  ws:
    builtin: workspace
    filesystem:
      input: {source: %q, mode: overlay}
      output: {source: %q}
    tools: {allow: ["*"], approve_annotations: []}
    commands: {allow: [ls, cat, sh]}
`, project, filepath.Join(project, "mcpbox-out"))
	m.writeFile(t, s.cfg, b.String(), 0o644)
	return s, project
}

// TestBuiltinOverlayWriteDiff: with input mode overlay, the built-in
// server's write_file and edit_file change input/; the project on the host
// stays byte-identical and `mcpbox diff` prints exactly the agent's patch.
// The output inside the project is hidden from the input view, for the
// file tools and for commands, and cannot be written through it (so it is
// not in the patch either). A program not on the list is refused with the
// line that would allow it.
func TestBuiltinOverlayWriteDiff(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s, project := builtinOverlaySetup(t, m)
		before := wsRead(t, project)
		g := s.serve(t)
		sess := s.connect(t, g, nil)
		defer gwClose(t, sess)

		gwMustCall(t, sess, "edit_file", map[string]any{"path": "input/a.txt", "old": "two", "new": "TWO"}, "edited input/a.txt")
		gwMustCall(t, sess, "write_file", map[string]any{"path": "/workspace/input/new/x.txt", "content": "fresh\n"}, "")
		gwMustCall(t, sess, "write_file", map[string]any{"path": "output/report.txt", "content": "result marker-7f3a\n"}, "")
		gwMustCall(t, sess, "read_file", map[string]any{"path": "input/a.txt"}, "one\nTWO\n")

		// The output is seen once: under output/, not under input/.
		list := gwMustCall(t, sess, "list_files", map[string]any{"depth": 4}, "")
		search := gwMustCall(t, sess, "search_files", map[string]any{"pattern": "marker-7f3a"}, "")
		for _, want := range []string{"input/a.txt", "input/new/x.txt", "input/mcpbox-outside.txt", "output/old.txt", "output/report.txt"} {
			if !strings.Contains(list, want) {
				t.Errorf("list_files lacks %s:\n%s", want, list)
			}
		}
		if strings.Contains(list, "input/mcpbox-out/") {
			t.Errorf("list_files shows the output under input/:\n%s", list)
		}
		wsLines(t, search, "output/old.txt:1:earlier output marker-7f3a", "output/report.txt:1:result marker-7f3a")
		if strings.Contains(search, "input/") {
			t.Errorf("search_files finds the output under input/:\n%s", search)
		}
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"read_file", map[string]any{"path": "input/mcpbox-out/old.txt"}},
			{"write_file", map[string]any{"path": "input/mcpbox-out/planted.txt", "content": "x"}},
			{"list_files", map[string]any{"path": "/workspace/input/mcpbox-out"}},
		} {
			if msg := wsCallFails(t, sess, c.tool, c.args); !strings.Contains(msg, "is not shown in input/") {
				t.Errorf("%s %v: %s; want the hidden-output refusal", c.tool, c.args, msg)
			}
		}
		ls := gwMustCall(t, sess, "run_command", map[string]any{"argv": []string{"ls", "-A", "/workspace/input/mcpbox-out"}}, "")
		for _, name := range []string{"old.txt", "report.txt", "b.md", "sub"} {
			if strings.Contains(ls, name) {
				t.Errorf("ls of /workspace/input/mcpbox-out shows %s:\n%s", name, ls)
			}
		}
		if !strings.Contains(gwMustCall(t, sess, "run_command", map[string]any{"argv": []string{"ls", "/workspace/output"}}, ""), "report.txt") {
			t.Error("ls /workspace/output lacks report.txt: the ls above proves nothing")
		}
		wsCallFails(t, sess, "run_command", map[string]any{"argv": []string{"sh", "-c", "echo x > /workspace/input/mcpbox-out/planted2.txt"}})
		wsCallFails(t, sess, "run_command", map[string]any{"argv": []string{"sh", "-c", "cat /workspace/input/mcpbox-out/old.txt"}})
		wsCallFails(t, sess, "run_command", map[string]any{"argv": []string{"cat", "/workspace/input/./mcpbox-out/sub/b.md"}})

		// The refusal of a program not on the list says how to allow it.
		refusal := wsCallFails(t, sess, "run_command", map[string]any{"argv": []string{"terraform", "plan"}})
		for _, want := range []string{"no allow rule matches", "commands.allow", `commands: {allow: [..., \"terraform\"]}`} {
			if !strings.Contains(refusal, want) {
				t.Errorf("refusal %s lacks %s", refusal, want)
			}
		}

		// The host's project is untouched, but for what the output got.
		after := wsRead(t, project)
		if got := after["mcpbox-out/report.txt"]; !strings.Contains(got, "result marker-7f3a") {
			t.Errorf("output/report.txt on the host: %q", got)
		}
		delete(after, "mcpbox-out/report.txt")
		if d := cmp.Diff(before, after); d != "" {
			t.Errorf("the project changed (-before +after):\n%s", d)
		}

		row := s.waitPS(t, "running", "paused")
		r := s.cli(t, "diff", row.ID, "--config", s.cfg)
		if r.code != 0 {
			t.Fatalf("mcpbox diff: %s", r)
		}
		wsLines(t, r.stdout,
			"diff --git a/a.txt b/a.txt", "--- a/a.txt", "+++ b/a.txt", " one", "-two", "+TWO",
			"diff --git a/new/x.txt b/new/x.txt", "new file mode 100644", "--- /dev/null", "+++ b/new/x.txt", "+fresh")
		for _, not := range []string{"mcpbox-out", "planted", "report", "keep"} {
			if strings.Contains(r.stdout, not) {
				t.Errorf("the diff names %s:\n%s", not, r.stdout)
			}
		}

		// The user changes a.txt after the agent's edit (here: applies it
		// and adds a line). The agent's copy is older: a patch of it would
		// undo the user's line, so the diff names it instead.
		m.writeFile(t, filepath.Join(project, "a.txt"), "one\nTWO\nthree by the user\n", 0o644)
		r = s.cli(t, "diff", row.ID, "--config", s.cfg)
		if r.code != 0 {
			t.Fatalf("mcpbox diff: %s", r)
		}
		wsLines(t, r.stdout, "diff --git a/new/x.txt b/new/x.txt", "+fresh")
		if !strings.Contains(r.stdout, "Changes to a.txt not shown (the project changed it after the agent copied it") || strings.Contains(r.stdout, "three by the user") {
			t.Errorf("the diff after the user's change to a.txt:\n%s", r.stdout)
		}

		// Once the serve has stopped (a stdio client's ends with the
		// client), --server reads the overlay it left: the same diff.
		gwClose(t, sess)
		g.stop(t)
		left := s.cli(t, "diff", "--server", "ws", "--config", s.cfg)
		if left.code != 0 || left.stdout != r.stdout {
			t.Errorf("mcpbox diff --server ws after the serve stopped: %s\nwant the stdout of mcpbox diff %s:\n%s", left, row.ID, r.stdout)
		}

		// --discard is refused while a sandbox has the overlay mounted;
		// once none has, the changes go, and the next sandbox sees the
		// input as it is now (a.txt with the user's line, no new/x.txt).
		g = s.serve(t)
		sess = s.connect(t, g, nil)
		gwMustCall(t, sess, "read_file", map[string]any{"path": "input/a.txt"}, "one\nTWO\n")
		if r := s.cli(t, "diff", "--server", "ws", "--config", s.cfg, "--discard"); r.code != 1 || !strings.Contains(r.stderr, "stop it first") {
			t.Errorf("mcpbox diff --server ws --discard while a sandbox runs: %s, want refused", r)
		}
		gwClose(t, sess)
		g.stop(t)
		kept := wsRead(t, project)
		if r := s.cli(t, "diff", "--server", "ws", "--config", s.cfg, "--discard"); r.code != 0 || !strings.Contains(r.stdout, "discarded the changes") {
			t.Fatalf("mcpbox diff --server ws --discard: %s", r)
		}
		if r := s.cli(t, "diff", "--server", "ws", "--config", s.cfg); r.code != 1 || !strings.Contains(r.stderr, "no sandbox of it has written") {
			t.Errorf("mcpbox diff --server ws after --discard: %s, want no overlay", r)
		}
		g = s.serve(t)
		sess = s.connect(t, g, nil)
		gwMustCall(t, sess, "read_file", map[string]any{"path": "input/a.txt"}, "one\nTWO\nthree by the user\n")
		wsCallFails(t, sess, "read_file", map[string]any{"path": "input/new/x.txt"})
		if d := cmp.Diff(kept, wsRead(t, project)); d != "" {
			t.Errorf("--discard changed the project (-before +after):\n%s", d)
		}
	})
}

// TestBuiltinOverlaySessionKept: with scope session (what the overlay's
// lock advises for a second client), a session's edits to its input are
// kept when the session ends, for `mcpbox diff --server`; before, they
// went with the session, unannounced. A session that changed nothing
// leaves nothing; with several kept, --session picks one.
func TestBuiltinOverlaySessionKept(t *testing.T) {
	m := mode{name: "root", uid: -1}
	s, _ := builtinOverlaySetup(t, m)
	b, err := os.ReadFile(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.writeFile(t, s.cfg, strings.Replace(string(b), "    builtin: workspace\n", "    builtin: workspace\n    scope: session\n", 1), 0o644)
	g := s.serve(t)
	diff := func(args ...string) result {
		return s.cli(t, append([]string{"diff", "--server", "ws", "--config", s.cfg}, args...)...)
	}
	// waitKept waits for the diff of the one kept session to show want.
	waitKept := func(want string) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			r := diff()
			if r.code == 0 && strings.Contains(r.stdout, want) {
				return r.stdout
			}
			if time.Now().After(deadline) {
				t.Fatalf("mcpbox diff --server ws after the session ended: %s; want %q in it", r, want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	sess := s.connect(t, g, nil)
	gwMustCall(t, sess, "read_file", map[string]any{"path": "input/a.txt"}, "one\ntwo\n")
	gwClose(t, sess)
	sess = s.connect(t, g, nil)
	gwMustCall(t, sess, "edit_file", map[string]any{"path": "input/a.txt", "old": "two", "new": "TWO"}, "edited input/a.txt")
	gwClose(t, sess)
	first := waitKept("+TWO")
	wsLines(t, first, "diff --git a/a.txt b/a.txt", "-two", "+TWO")

	sess = s.connect(t, g, nil)
	gwMustCall(t, sess, "write_file", map[string]any{"path": "input/second.txt", "content": "second\n"}, "")
	gwClose(t, sess)
	var several result
	deadline := time.Now().Add(30 * time.Second)
	for several = diff(); several.code == 0 && time.Now().Before(deadline); several = diff() {
		time.Sleep(200 * time.Millisecond)
	}
	_, newest, ok := strings.Cut(several.stderr, "the newest: ")
	if several.code == 0 || !strings.Contains(several.stderr, "2 ended sessions of server ws kept changes") || !ok {
		t.Fatalf("mcpbox diff --server ws with two sessions kept: %s; want an error naming them (a session that changed nothing keeps nothing)", several)
	}
	id, _, _ := strings.Cut(newest, " ")
	r := diff("--session", id)
	if r.code != 0 || !strings.Contains(r.stdout, "+second") || strings.Contains(r.stdout, "TWO") {
		t.Errorf("mcpbox diff --server ws --session %s: %s; want the second session's diff only", id, r)
	}
	// The next serve's start (a stdio client's, each time it connects)
	// cleans up what a killed serve left, not the kept overlays.
	g.stop(t)
	s.serve(t)
	if again := diff("--session", id); again.code != 0 || again.stdout != r.stdout {
		t.Errorf("mcpbox diff --server ws --session %s after the next serve's start: %s; want the same diff", id, again)
	}
}
