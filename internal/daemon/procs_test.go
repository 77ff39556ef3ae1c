//go:build linux

package daemon

import (
	"context"
	"io"
	"os"
	"runtime"
	"testing"
	"time"

	"mcpbox/internal/egress"
	"mcpbox/internal/sandbox"
)

// atLeastTwoProcs makes the test process run on two processors or more
// (restored at cleanup) and returns how many.
func atLeastTwoProcs(t *testing.T) int {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	if before < 2 {
		runtime.GOMAXPROCS(2)
		return 2
	}
	return before
}

// TestRunProcs: `mcpbox run` runs on one processor when its sandbox has
// no egress proxy (issue 19), keeps the default when it has one or when
// GOMAXPROCS is set, and restores the setting when it returns.
func TestRunProcs(t *testing.T) {
	before := atLeastTwoProcs(t)
	for _, tc := range []struct {
		name string
		env  string
		net  sandbox.Network
		want int
	}{
		{"no network", "", sandbox.Network{}, 1},
		{"egress rules", "", sandbox.Network{Rules: []egress.Rule{{Host: "example.com"}}}, before},
		{"forwards", "", sandbox.Network{Forwards: []egress.Forward{{}}}, before},
		{"GOMAXPROCS set", "3", sandbox.Network{}, before},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMAXPROCS", tc.env)
			restore := runProcs(tc.net)
			if got := runtime.GOMAXPROCS(0); got != tc.want {
				t.Errorf("GOMAXPROCS while serving = %d, want %d", got, tc.want)
			}
			restore()
			if got := runtime.GOMAXPROCS(0); got != before {
				t.Errorf("GOMAXPROCS after = %d, want %d restored", got, before)
			}
		})
	}
}

// TestRunServerOneProc: RunServer serves a sandbox without egress on one
// processor, and gives the setting back when it returns.
func TestRunServerOneProc(t *testing.T) {
	before := atLeastTwoProcs(t)
	t.Setenv("GOMAXPROCS", "")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- RunServer(ctx, ServerOptions{
			Name: "idle", Spec: sandbox.Spec{Args: []string{"true"}},
			Stdin: pr, Stdout: io.Discard, Stderr: io.Discard,
		})
	}()
	one := false
	for deadline := time.Now().Add(10 * time.Second); !one && time.Now().Before(deadline); {
		select {
		case err := <-done:
			t.Fatalf("RunServer returned while its client was attached: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		one = runtime.GOMAXPROCS(0) == 1
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunServer after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunServer still serving 10 s after its context ended")
	}
	if !one {
		t.Errorf("GOMAXPROCS stayed %d while RunServer served a sandbox without egress, want 1", before)
	}
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("GOMAXPROCS after RunServer = %d, want %d restored", got, before)
	}
}
