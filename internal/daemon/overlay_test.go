package daemon

import (
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/instance"
	"mcpbox/internal/workspace"
)

// TestLeftOverlay: `mcpbox diff --server` finds the overlay a stopped
// serve left, from the config alone: its one agent's, or the named
// agent's; several agents, none, a link in the tree, a server without an
// overlay and a hostile agent name each get an error that says so.
func TestLeftOverlay(t *testing.T) {
	project := t.TempDir()
	src := filepath.Join(project, "src")
	cfg := filepath.Join(project, "mcpbox.yaml")
	for _, err := range []error{
		os.Mkdir(src, 0o700),
		os.WriteFile(cfg, []byte(`version: 1
state_dir: state
servers:
  fs:
    command: [a]
    filesystem: {input: {source: src, mode: overlay}}
  ro:
    command: [a]
    filesystem: {input: {source: src}}
`), 0o600),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(project, "state", "workspaces")
	upper := func(agent string) string { return filepath.Join(root, agent, "fs", "overlay", "upper") }
	wd := filepath.Join(project, "sub")
	if err := os.Mkdir(wd, 0o700); err != nil {
		t.Fatal(err)
	}
	wantErr := func(agent, want string) {
		t.Helper()
		if _, _, err := LeftOverlay("", wd, "fs", agent, ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("agent %q: err %v, want one with %q", agent, err, want)
		}
	}
	wantErr("", "no sandbox of it has written")

	if err := os.MkdirAll(upper("_local"), 0o700); err != nil {
		t.Fatal(err)
	}
	// The project's config, found from a subdir without --config.
	lower, up, err := LeftOverlay("", wd, "fs", "", "")
	if err != nil || lower != src || up != upper("_local") {
		t.Errorf("one agent: %q %q %v, want %q %q", lower, up, err, src, upper("_local"))
	}

	// A link where an agent's dir would be is not an overlay.
	if err := os.Symlink(filepath.Join(root, "_local"), filepath.Join(root, "evil")); err != nil {
		t.Fatal(err)
	}
	if _, up, err := LeftOverlay(cfg, "/", "fs", "", ""); err != nil || up != upper("_local") {
		t.Errorf("with a link beside: %q %v", up, err)
	}
	wantErr("evil", "no overlay of server fs for agent evil")
	wantErr("..", "not an agent name")

	if err := os.MkdirAll(upper("alice"), 0o700); err != nil {
		t.Fatal(err)
	}
	wantErr("", "several agents (_local, alice)")
	if _, up, err := LeftOverlay(cfg, "/", "fs", "alice", ""); err != nil || up != upper("alice") {
		t.Errorf("--agent alice: %q %v", up, err)
	}

	if _, _, err := LeftOverlay(cfg, "/", "ro", "", ""); err == nil || !strings.Contains(err.Error(), "has no input overlay") {
		t.Errorf("read-only input: %v", err)
	}
	if _, _, err := LeftOverlay(cfg, "/", "nope", "", ""); err == nil || !strings.Contains(err.Error(), `no server "nope"`) {
		t.Errorf("unknown server: %v", err)
	}
	if _, _, err := LeftOverlay("", t.TempDir(), "fs", "", ""); err == nil || !strings.Contains(err.Error(), "pass --config") {
		t.Errorf("no project config: %v", err)
	}
}

// TestLeftOverlaySessions: for a server of scope session, `mcpbox diff
// --server` reads the overlay an ended session kept: the one, or the one
// --session names; with several it names the newest, with none it says
// so. A live session's dir (no ended mark) is not one.
func TestLeftOverlaySessions(t *testing.T) {
	project := t.TempDir()
	cfg := filepath.Join(project, "mcpbox.yaml")
	if err := os.Mkdir(filepath.Join(project, "src"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("version: 1\nstate_dir: state\nservers:\n  fs:\n    command: [a]\n    scope: session\n    filesystem: {input: {source: src, mode: overlay}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(project, "state", "workspaces")
	session := func(agent, id string, ended bool) string {
		base := filepath.Join(root, agent, "fs", "sessions", id)
		if err := os.MkdirAll(filepath.Join(base, "overlay", "upper"), 0o700); err != nil {
			t.Fatal(err)
		}
		if ended {
			if err := os.WriteFile(filepath.Join(base, "ended"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return filepath.Join(base, "overlay", "upper")
	}
	wantErr := func(agent, id, want string) {
		t.Helper()
		if _, _, err := LeftOverlay(cfg, "/", "fs", agent, id); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("agent %q session %q: %v, want an error with %q", agent, id, err, want)
		}
	}
	session("alice", "live", false)
	wantErr("", "", "no ended session of server fs (scope: session) kept changes")
	// An agent's overlay from before scope: session is named.
	if err := os.MkdirAll(filepath.Join(root, "_local", "fs", "overlay", "upper"), 0o700); err != nil {
		t.Fatal(err)
	}
	wantErr("", "", "server fs also has an overlay of the agent scope (agents: _local), from before scope: session")
	first := session("alice", "s1", true)
	past := time.Now().Add(-time.Minute) // the marks' order, whatever the clock's grain
	if err := os.Chtimes(filepath.Join(root, "alice", "fs", "sessions", "s1", "ended"), past, past); err != nil {
		t.Fatal(err)
	}
	if _, up, err := LeftOverlay(cfg, "/", "fs", "", ""); err != nil || up != first {
		t.Errorf("one kept: %q %v, want %q", up, err, first)
	}
	second := session("bob", "s2", true)
	wantErr("", "", "2 ended sessions of server fs kept changes to their input overlay: pass --session ID (the newest: s2 (agent bob")
	if _, up, err := LeftOverlay(cfg, "/", "fs", "", "s2"); err != nil || up != second {
		t.Errorf("--session s2: %q %v, want %q", up, err, second)
	}
	if _, up, err := LeftOverlay(cfg, "/", "fs", "alice", ""); err != nil || up != first {
		t.Errorf("--agent alice: %q %v, want %q", up, err, first)
	}
	wantErr("", "live", "no ended session live of server fs")
	wantErr("", "../x", "not a session id")

	// A killed serve's session, never released, with changes: found while
	// no serve runs on the state dir (before, only after the next start).
	killed := session("carol", "k1", false)
	if err := os.WriteFile(filepath.Join(killed, "edited.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, up, err := LeftOverlay(cfg, "/", "fs", "", "k1"); err != nil || up != killed {
		t.Errorf("--session k1 of a killed serve: %q %v, want %q", up, err, killed)
	}
	if _, up, err := LeftOverlay(cfg, "/", "fs", "carol", ""); err != nil || up != killed {
		t.Errorf("--agent carol, a killed serve's session: %q %v, want %q", up, err, killed)
	}
	wantErr("", "live", "no ended session live of server fs") // no changes: nothing to diff
	// While a serve runs there, it is a running session's (mcpbox diff ID).
	stateDir := filepath.Join(project, "state")
	if err := instance.MakeDir(stateDir); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", instance.SocketPath(stateDir, os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if err := instance.Write(instance.Record{PID: os.Getpid(), StateDir: stateDir, Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	wantErr("", "k1", "no ended session k1 of server fs")
}

// TestLeftoversKeepChangedOverlays: a serve's start removes the session
// workspaces a killed serve left, but keeps an overlay with changes (as a
// session's end does) and the overlays kept already; it removed every
// one, a kept one too.
func TestLeftoversKeepChangedOverlays(t *testing.T) {
	root := filepath.Join(t.TempDir(), "workspaces")
	base := func(id string) string {
		return workspace.Base(root, workspace.Scope{Server: "fs", Agent: "_local", Session: id})
	}
	session := func(id string, changed bool) {
		for _, d := range []string{"output", "overlay/upper"} {
			if err := os.MkdirAll(filepath.Join(base(id), d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		if changed {
			if err := os.WriteFile(filepath.Join(base(id), "overlay", "upper", "a.txt"), []byte("edit"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	session("ended", true)
	if kept, _ := workspace.ReleaseSession(base("ended")); !kept {
		t.Fatal("the ended session's overlay was not kept")
	}
	session("crashed", true)
	session("idle", false)
	if err := removeSessionWorkspaces(root, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range workspace.EndedSessions(filepath.Dir(base("x"))) {
		got = append(got, e.ID)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"crashed", "ended"}) {
		t.Errorf("kept overlays after the start: %v, want crashed and ended", got)
	}
	for _, gone := range []string{filepath.Join(base("crashed"), "output"), base("idle")} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want it gone", gone, err)
		}
	}
}

// TestWriteDiffInGitSubdir: where the input source is a directory below
// a git repository's top, diff says how to apply the patch, and the
// command it names applies it (plain git apply there skips every path).
// At the top, or outside any repository, it says nothing.
func TestWriteDiffInGitSubdir(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	top := t.TempDir()
	lower, upper := filepath.Join(top, "pkg", "api"), t.TempDir()
	if err := os.MkdirAll(lower, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(git, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	run(top, "init", "-q")
	os.WriteFile(filepath.Join(lower, "a.txt"), []byte("old\n"), 0o644)
	os.WriteFile(filepath.Join(upper, "a.txt"), []byte("new\n"), 0o644)

	var patch, note strings.Builder
	if err := WriteDiff(&patch, &note, lower, upper); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(note.String(), "git apply --directory=pkg/api") {
		t.Fatalf("note %q, want it to name git apply --directory=pkg/api", note.String())
	}
	cmd := exec.Command(git, "apply", "--directory=pkg/api")
	cmd.Dir, cmd.Stdin = lower, strings.NewReader(patch.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply --directory=pkg/api: %v: %s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(lower, "a.txt")); string(b) != "new\n" {
		t.Errorf("after the note's command a.txt is %q, want the agent's", b)
	}

	for _, dir := range []string{top, t.TempDir()} { // the top; no repository
		note.Reset()
		if err := WriteDiff(io.Discard, &note, dir, upper); err != nil || note.Len() != 0 {
			t.Errorf("WriteDiff of %s: %v, note %q; want none", dir, err, note.String())
		}
	}
}

// TestDiscardOverlay: --discard removes an agent's overlay (upper and
// work, the workspace's output stays) unless a sandbox holds its lock,
// and a kept session's workspace whole.
func TestDiscardOverlay(t *testing.T) {
	base := filepath.Join(t.TempDir(), "workspaces", "_local", "fs")
	upper := filepath.Join(base, "overlay", "upper")
	for _, d := range []string{upper, filepath.Join(base, "overlay", "work", "work"), filepath.Join(base, "output")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(upper, "a.txt"), []byte("agent's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(base, "overlay", "work", "work"), 0); err != nil { // as the kernel leaves it
		t.Fatal(err)
	}
	unlock, err := instance.LockOverlay(base) // a running sandbox's
	if err != nil {
		t.Fatal(err)
	}
	if err := DiscardOverlay(upper); err == nil || !strings.Contains(err.Error(), "stop it first") {
		t.Errorf("discard while the lock is held: %v, want refused", err)
	}
	if _, err := os.Stat(filepath.Join(upper, "a.txt")); err != nil {
		t.Errorf("the refused discard removed the change: %v", err)
	}
	unlock()
	if err := DiscardOverlay(upper); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(base, "overlay")); !os.IsNotExist(err) {
		t.Errorf("overlay after discard: %v, want gone", err)
	}
	if _, err := os.Stat(filepath.Join(base, "output")); err != nil {
		t.Errorf("the output went with the overlay: %v", err)
	}

	session := filepath.Join(base, "sessions", "s1")
	upper = filepath.Join(session, "overlay", "upper")
	if err := os.MkdirAll(upper, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := DiscardOverlay(upper); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(session); !os.IsNotExist(err) {
		t.Errorf("kept session after discard: %v, want gone", err)
	}
}
