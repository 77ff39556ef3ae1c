package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/admin"
	"mcpbox/internal/instance"
)

// TestTrustWithNoServe: trust asks a running serve, where a change waits;
// with none it says so and points at pin.
func TestTrustWithNoServe(t *testing.T) {
	state := shortTemp(t)
	code, _, errOut := runCLI("trust", "memory", "--dry-run", "--state-dir", state)
	if code != 1 || !strings.Contains(errOut, "no mcpbox serve is running") || !strings.Contains(errOut, "mcpbox pin shows and pins") {
		t.Errorf("trust with no serve: exit %d: %s", code, errOut)
	}
}

// TestTrustWithNoServeNamesConfig: the hint names the config trust was
// given, which pin would not find on its own.
func TestTrustWithNoServeNamesConfig(t *testing.T) {
	dir := shortTemp(t)
	cfg := filepath.Join(dir, "team.yaml")
	if err := os.WriteFile(cfg, []byte("version: 1\nstate_dir: state\nservers:\n  memory: {command: [srv], tools: {allow: [\"*\"]}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI("trust", "memory", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "mcpbox pin --config "+cfg+" shows and pins") {
		t.Errorf("trust with no serve, --config: exit %d: %s", code, errOut)
	}
}

// pinsBackend is a gateway's admin back-end with no pending change.
type pinsBackend struct{ admin.Backend }

func (pinsBackend) Pins(string) ([]admin.PinChange, error) { return nil, nil }

// TestTrustNothingPending: with a serve running that holds no change of
// the name, trust says where a change waits and what pins one now, not
// only "nothing pending" (a user whose serve had ended, or whose running
// one never saw the change, took that for done).
func TestTrustNothingPending(t *testing.T) {
	tmp := shortTemp(t)
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "xdg"))
	state := filepath.Join(tmp, "s")
	if err := instance.MakeDir(state); err != nil {
		t.Fatal(err)
	}
	srv, err := admin.Serve(context.Background(), instance.SocketPath(state, 101), admin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	srv.Attach(pinsBackend{})
	if err := instance.Write(instance.Record{PID: 101, Started: time.Now(), StateDir: state, Project: "/p", Config: "/p/mcpbox.yaml", Transport: "stdio"}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("trust", "everything/get-roots-list", "--state-dir", state)
	if code != 0 || !strings.Contains(out, "everything/get-roots-list: nothing pending (a change waits in the serve") || !strings.Contains(out, "mcpbox pin --check --config /p/mcpbox.yaml everything compares") {
		t.Errorf("trust with nothing pending: exit %d: %q %q", code, out, errOut)
	}
}
