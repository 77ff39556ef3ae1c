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

// TestPauseWithoutFreezer: pausing a sandbox that has no cgroup (no
// limits here; cgroups degraded for a user without a delegated cgroup)
// fails naming the sandbox as `mcpbox ps` lists it (the id of its cgroup
// too), and says what to do instead; the error still wraps
// cgroup.ErrUnsupported, and the sandbox keeps running.
func TestPauseWithoutFreezer(t *testing.T) {
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		t.Skip("no user namespaces")
	}
	spec := sandbox.Spec{Args: []string{"cat"}, Limits: sandbox.Limits{Timeout: 30 * time.Second}}
	l := NewLocal(LocalOptions{Name: "nofreezer", Spec: spec, Stderr: io.Discard, Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(l.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	inst, err := l.Start(ctx, gateway.Scope{Agent: "a"})
	if err != nil {
		t.Skipf("cannot start a sandbox here: %v", err)
	}
	t.Cleanup(inst.Stop)
	in := inst.(*sandboxInstance)
	err = in.Pause()
	if !errors.Is(err, cgroup.ErrUnsupported) {
		t.Fatalf("Pause = %v, want cgroup.ErrUnsupported", err)
	}
	msg := err.Error()
	if in.rec.ID != in.sb.ID {
		t.Errorf("ps lists the sandbox as %s, its cgroup and the cleanup log as %s", in.rec.ID, in.sb.ID)
	}
	if !strings.HasPrefix(msg, "sandbox "+in.rec.ID+" cannot be paused") || !strings.Contains(msg, "mcpbox stop "+in.rec.ID+" ends it") {
		t.Errorf("Pause = %q; want it to name %s (what ps lists) and mcpbox stop", msg, in.rec.ID)
	}
	if in.sb.Paused() {
		t.Error("the sandbox is paused after a failed pause")
	}
}
