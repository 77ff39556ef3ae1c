package launch

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"mcpbox/internal/gateway"
	"mcpbox/internal/sandbox"
)

// The test binary is the init of the sandboxes it starts.
func TestMain(m *testing.M) {
	sandbox.Main()
	os.Exit(m.Run())
}

// syncBuffer is a log sink the sandboxes' goroutines may write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWarmPoolStartLogged: a start that took a prepared sandbox of the
// warm pool is logged at info as such, with the server's name and the
// start time, and one the pool could not serve as cold; the track (what
// `mcpbox ps --json` shows) says which, and names the sandbox by its own
// id either way.
func TestWarmPoolStartLogged(t *testing.T) {
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		t.Skip("no user namespaces")
	}
	var logs syncBuffer
	spec := sandbox.Spec{Args: []string{"cat"}, AllowDegraded: []sandbox.Layer{sandbox.LayerCgroups},
		Limits: sandbox.Limits{Timeout: 30 * time.Second}}
	l := NewLocal(LocalOptions{Name: "pooled", Spec: spec, WarmPool: 1, Stderr: io.Discard,
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	t.Cleanup(l.Close)
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := l.pool.Ready()
		if err != nil {
			t.Skipf("cannot prepare a sandbox here: %v", err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the warm pool prepared nothing in 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := func(agent string, prepared bool) {
		in, err := l.Start(ctx, gateway.Scope{Agent: agent})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(in.Stop)
		// What ps --json shows (admin.Sandbox.Prepared, from the track).
		si := in.(*sandboxInstance)
		if got := si.rec.Prepared; got != prepared {
			t.Errorf("agent %s: the track's Prepared = %v, want %v", agent, got, prepared)
		}
		// One id: what ps lists is the sandbox's (its cgroup's).
		if si.rec.ID != si.sb.ID {
			t.Errorf("agent %s: the track names the sandbox %s, the sandbox is %s", agent, si.rec.ID, si.sb.ID)
		}
	}
	start("a", true)
	if got := logs.String(); !strings.Contains(got, "level=INFO") || !strings.Contains(got, "server=pooled from=\"warm pool\" start=") {
		t.Fatalf("log after a pooled start:\n%s", got)
	}
	// The next start finds the pool empty (or its refill under way, which
	// it waits for); make it cold by closing the pool first.
	l.pool.Close()
	start("b", false)
	if got := logs.String(); !strings.Contains(got, "server=pooled from=cold start=") {
		t.Fatalf("log after a cold start:\n%s", got)
	}
}
