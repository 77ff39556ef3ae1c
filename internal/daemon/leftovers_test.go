package daemon

import (
	"bytes"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// cleanLeftovers removes a crashed gateway's session workspaces and dead
// sockets, and keeps agent workspaces, live sockets, the audit store, lock
// flocks, and whatever a symlink leads to.
func TestCleanLeftovers(t *testing.T) {
	state, err := os.MkdirTemp("/tmp", "mcpbox-left-") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(state)
	outside := t.TempDir()
	files := []string{
		"workspaces/a1/srv/output/kept.txt",
		"workspaces/a1/srv/sessions/s1/output/gone.txt",
		"workspaces/a1/srv/sessions/s2/output/sub/gone.txt",
		"workspaces/_local/other/sessions/s3/output/gone.txt",
		"workspaces/_shared/srv/output/kept.txt",
		"audit.db", "audit.db-wal", "mcpbox.lock.flock", "plain.sock",
	}
	for _, f := range files {
		leftoverFile(t, filepath.Join(state, f))
	}
	leftoverFile(t, filepath.Join(outside, "sessions", "victim", "kept.txt"))
	// Symlinks planted at each level lead out of the state dir: the walk
	// must not follow them.
	mustSymlink(t, outside, filepath.Join(state, "workspaces/evil"))
	mustSymlink(t, filepath.Join(outside, "sessions"), filepath.Join(state, "workspaces/a2/srv/sessions"))
	mustSymlink(t, outside, filepath.Join(state, "workspaces/a1/srv/sessions/link"))
	deadSocket(t, filepath.Join(state, "approvals.sock"))
	deadSocket(t, filepath.Join(state, "admin.sock")) // an earlier version's
	ln, err := net.Listen("unix", filepath.Join(state, "live.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	var logs bytes.Buffer
	if err := cleanLeftoversAfter(state, false, slog.New(slog.NewTextHandler(&logs, nil)), 0); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"audit.db", "audit.db-wal", "live.sock", "mcpbox.lock.flock", "plain.sock",
		"workspaces", "workspaces/_local", "workspaces/_local/other", "workspaces/_local/other/sessions",
		"workspaces/_shared", "workspaces/_shared/srv", "workspaces/_shared/srv/output", "workspaces/_shared/srv/output/kept.txt",
		"workspaces/a1", "workspaces/a1/srv", "workspaces/a1/srv/output", "workspaces/a1/srv/output/kept.txt",
		"workspaces/a1/srv/sessions",
		"workspaces/a2", "workspaces/a2/srv", "workspaces/a2/srv/sessions",
		"workspaces/evil",
	}
	if diff := cmp.Diff(want, tree(t, state)); diff != "" {
		t.Errorf("state dir after cleanup (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"sessions", "sessions/victim", "sessions/victim/kept.txt"}, tree(t, outside)); diff != "" {
		t.Errorf("outside the state dir (-want +got):\n%s", diff)
	}
	for _, s := range []string{"approvals.sock", "agent=a1 server=srv count=3", "agent=_local server=other count=1"} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("log lacks %q:\n%s", s, logs.String())
		}
	}
	// A second run finds nothing more.
	logs.Reset()
	if err := cleanLeftoversAfter(state, false, slog.New(slog.NewTextHandler(&logs, nil)), 0); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), state) || strings.Contains(logs.String(), "session workspaces") {
		t.Errorf("second run removed more:\n%s", logs.String())
	}
}

func TestCleanLeftoversMissingStateDir(t *testing.T) {
	if err := cleanLeftoversAfter(filepath.Join(t.TempDir(), "none"), false, slog.New(slog.DiscardHandler), 0); err == nil {
		t.Fatal("no error for a missing state dir")
	}
}

func leftoverFile(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// deadSocket leaves a socket file nobody listens on, as a killed process
// does.
func deadSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
}

// tree lists every path under root, relative and sorted, without
// following symlinks.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root {
			rel, _ := filepath.Rel(root, p)
			paths = append(paths, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}
