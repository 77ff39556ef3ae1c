package daemon

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mcpbox/internal/admin"
	"mcpbox/internal/config"
	"mcpbox/internal/instance"
)

// shortTemp is a temp dir with a short path: unix socket paths are
// limited to 108 bytes.
func shortTemp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "mcpbox-inst-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestStartSparesLiveSessions: an instance that starts while another
// runs on the state dir must not remove the session workspaces (it cannot
// tell the live one's from a crashed one's); one that starts alone
// removes them, as it removes a dead instance's record and socket.
func TestStartSparesLiveSessions(t *testing.T) {
	tmp := shortTemp(t)
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "xdg"))
	state := filepath.Join(tmp, "s")
	session := filepath.Join(state, "workspaces", "_local", "srv", "sessions", "s1")
	if err := os.MkdirAll(session, 0o700); err != nil {
		t.Fatal(err)
	}
	// A dead instance's leftovers: a record and a socket nobody serves.
	if err := instance.Write(instance.Record{PID: 999999, StateDir: state}); err != nil {
		t.Fatal(err)
	}
	dead, err := net.Listen("unix", instance.SocketPath(state, 999999))
	if err != nil {
		t.Fatal(err)
	}
	dead.(*net.UnixListener).SetUnlinkOnClose(false)
	dead.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	first, err := startInstance(ctx, &config.Config{}, admin.NewRecord(state, "", tmp, true, ""), log)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := os.Stat(session); err == nil {
		t.Fatal("the first instance, alone, kept the crashed one's session workspace")
	}
	if recs, _ := instance.List(state); len(recs) != 1 || first.Shared() {
		t.Errorf("after a lone start: %d live records, shared %v; want 1, false", len(recs), first.Shared())
	}
	for _, p := range []string{instance.SocketPath(state, 999999), strings.TrimSuffix(instance.SocketPath(state, 999999), ".sock") + ".json"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("the dead instance's %s is still there", p)
		}
	}

	// The first instance now has a session; a second one starts.
	if err := os.MkdirAll(session, 0o700); err != nil {
		t.Fatal(err)
	}
	// Another pid's record: this test process can only be one instance.
	rec := admin.NewRecord(state, "", tmp, false, "127.0.0.1:0")
	rec.PID = os.Getpid() + 100000
	second, err := startInstance(ctx, &config.Config{}, rec, log)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if _, err := os.Stat(session); err != nil {
		t.Errorf("a second instance removed the live instance's session workspace: %v", err)
	}
	if !second.Shared() {
		t.Error("the second instance did not see the first")
	}
	if recs, _ := instance.List(state); len(recs) != 2 {
		t.Errorf("%d live records, want 2", len(recs))
	}
	second.Close()
	if recs, _ := instance.List(state); len(recs) != 1 {
		t.Errorf("after the second closed: %d live records, want 1", len(recs))
	}
}
