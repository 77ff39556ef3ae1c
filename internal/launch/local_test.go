package launch

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/gateway"
	"mcpbox/internal/redact"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/track"
)

// recordingObserver counts what a launcher reports.
type recordingObserver struct{ started, ended, events, egress atomic.Int32 }

func (o *recordingObserver) SandboxStarted(string, gateway.Scope, *track.Sandbox) func() {
	o.started.Add(1)
	return func() {}
}
func (o *recordingObserver) SandboxEnded(string, gateway.Scope, *track.Sandbox, string, bool) {
	o.ended.Add(1)
}
func (o *recordingObserver) SandboxEvent(string, string, gateway.Scope, *track.Sandbox, string) {
	o.events.Add(1)
}
func (o *recordingObserver) EgressEvent(string, gateway.Scope, *track.Sandbox, egress.Event) {
	o.egress.Add(1)
}

// TestLaunchCancelStopsSecret: a start resolves its secrets with the
// caller's context, so a cancelled start does not wait for a slow cmd:
// secret; nothing was started, so the observer hears of nothing and the
// backend lists nothing.
func TestLaunchCancelStopsSecret(t *testing.T) {
	obs := &recordingObserver{}
	l := NewLocal(LocalOptions{
		Name: "slow", Secrets: []config.Secret{{Name: "TOKEN", From: "cmd:sleep 30"}},
		Book: &redact.Book{}, Log: slog.New(slog.DiscardHandler), Stderr: io.Discard, Observer: obs,
	})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := l.Start(ctx, gateway.Scope{Agent: "a"})
	if err == nil || !strings.Contains(err.Error(), "secret TOKEN") || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("Start = %v, want the secret's cancellation", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("a cancelled start took %s", d)
	}
	if n := obs.started.Load() + obs.ended.Load(); n != 0 {
		t.Fatalf("the observer heard of %d starts or ends of a sandbox that never started", n)
	}
	if got := l.List(); len(got) != 0 {
		t.Fatalf("List = %v after a failed start", got)
	}
}

func TestExitStatus(t *testing.T) {
	size := &sandbox.SizeError{Dir: "/workspace/output", Limit: 1024, Stopped: true}
	tests := []struct {
		res       *sandbox.Result
		err       error
		want      string
		wantClean bool
	}{
		{res: &sandbox.Result{ExitCode: 0}, want: "exited with status 0", wantClean: true},
		{res: &sandbox.Result{ExitCode: 2}, want: "exited with status 2"},
		{err: errors.New("waiting: broken"), want: "waiting: broken"},
		{res: &sandbox.Result{ExitCode: 137, OOMKilled: true}, want: "killed: out of memory"},
		{res: &sandbox.Result{ExitCode: 0, PidsExhausted: true}, want: "exited with status 0 after hitting its process limit"},
		{res: &sandbox.Result{ExitCode: 137, SizeExceeded: size}, want: "killed: " + SizeReport(size)},
	}
	for _, tt := range tests {
		got, clean := exitStatus(tt.res, tt.err)
		if got != tt.want || clean != tt.wantClean {
			t.Errorf("exitStatus(%+v, %v) = %q, %v; want %q, %v", tt.res, tt.err, got, clean, tt.want, tt.wantClean)
		}
	}
}

// TestStoppedStatus: ps says mcpbox stopped a sandbox only when it did: a
// server killed by a signal mcpbox did not send (kill -9 from outside, a
// crash) keeps its own status, also when the gateway asked for a stop on
// seeing it gone.
func TestStoppedStatus(t *testing.T) {
	for _, tt := range []struct {
		status           string
		code             int
		stopping, killed bool
		want             string
	}{
		{"exited with status 0", 0, true, false, "stopped by mcpbox (exited with status 0)"},
		{"exited with status 1", 1, true, false, "stopped by mcpbox (exited with status 1)"},
		{"exited with status 137", 137, true, true, "stopped by mcpbox (killed: it did not exit within 2s)"},
		{"exited with status 137", 137, true, false, "exited with status 137"},
		{"exited with status 139", 139, false, false, "exited with status 139"},
	} {
		if got := stoppedStatus(tt.status, tt.code, tt.stopping, tt.killed); got != tt.want {
			t.Errorf("stoppedStatus(%q, %d, stopping %v, killed %v) = %q, want %q", tt.status, tt.code, tt.stopping, tt.killed, got, tt.want)
		}
	}
}
