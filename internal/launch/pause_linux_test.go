package launch

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/cgroup"
	"mcpbox/internal/gateway"
	"mcpbox/internal/sandbox"
)

// TestPauseWithoutCgroup: pausing a sandbox that has no cgroup (an
// unprivileged user without a delegated one, --allow-degraded=cgroups)
// fails saying why and what to do instead, without the sandbox package's
// own id, which is not the one mcpbox ps shows and the user typed.
func TestPauseWithoutCgroup(t *testing.T) {
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		t.Skip("no user namespaces")
	}
	spec := sandbox.Spec{Args: []string{"cat"}, AllowDegraded: []sandbox.Layer{sandbox.LayerCgroups},
		Limits: sandbox.Limits{Timeout: 30 * time.Second}} // no memory, pids or cpu limit: no cgroup
	l := NewLocal(LocalOptions{Name: "nocg", Spec: spec, Stderr: io.Discard, Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(l.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	in, err := l.Start(ctx, gateway.Scope{Agent: "a"})
	if err != nil {
		t.Skipf("cannot start a sandbox here: %v", err)
	}
	defer in.Stop()
	err = in.Pause()
	if err == nil {
		t.Fatal("a sandbox without a cgroup paused")
	}
	if msg := err.Error(); !errors.Is(err, cgroup.ErrUnsupported) || strings.Contains(msg, "sbx_") ||
		!strings.Contains(msg, "cannot be paused") || !strings.Contains(msg, "mcpbox stop") || !strings.Contains(msg, "mcpbox doctor") {
		t.Errorf("Pause = %q, want why (no cgroup, see mcpbox doctor) and what instead (mcpbox stop), no internal id", msg)
	}
}
