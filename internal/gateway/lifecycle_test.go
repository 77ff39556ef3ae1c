package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// pausable wraps a launcher's processes with Pause and Resume that count
// and, while paused, would leave requests unanswered: the rawServer holds
// its replies until resumed.
func pausable(t *testing.T) (func(context.Context, Scope) (*Process, error), func() []*rawServer, *atomic.Int32, *atomic.Int32) {
	var frozen atomic.Bool
	var pauses, resumes atomic.Int32
	base, started := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/call" {
			deadline := time.Now().Add(5 * time.Second)
			for frozen.Load() && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			s.reply(msg, `{"content":[]}`)
		}
		if msg["method"] == "tools/list" {
			s.reply(msg, `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
		}
	})
	launch := func(ctx context.Context, scope Scope) (*Process, error) {
		p, err := base(ctx, scope)
		if err != nil {
			return nil, err
		}
		p.Pause = func() error { pauses.Add(1); frozen.Store(true); return nil }
		p.Resume = func() error { resumes.Add(1); frozen.Store(false); return nil }
		return p, nil
	}
	return launch, started, &pauses, &resumes
}

// waitState polls the one instance's state until it is want.
func waitState(t *testing.T, gw *Gateway, want string) Instance {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ins := gw.Instances()
		if len(ins) == 1 && ins[0].State == want {
			return ins[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("instances %+v, want one %s", ins, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestIdlePauseWakes: an idle instance is paused; the next call resumes
// it first and is answered; after idle_stop a paused instance is stopped
// and the next call starts a new process.
func TestIdlePauseWakes(t *testing.T) {
	launch, started, pauses, resumes := pausable(t)
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"},
		Idle: 100 * time.Millisecond, IdleAction: IdlePause, IdleStop: 600 * time.Millisecond})
	c := newRawClient(t, gw)
	waitState(t, gw, StatePaused)
	if pauses.Load() != 1 {
		t.Fatalf("%d pauses, want 1", pauses.Load())
	}
	if resp, _ := c.call("tools/call", map[string]any{"name": "t"}); resp["error"] != nil {
		t.Fatalf("call to a paused server: %v", resp)
	}
	if resumes.Load() != 1 {
		t.Fatalf("%d resumes, want 1", resumes.Load())
	}
	in := waitState(t, gw, StatePaused)
	waitState(t, gw, StateStopped)
	select {
	case <-started()[0].done:
	case <-time.After(5 * time.Second):
		t.Fatal("the idle-stopped process still runs")
	}
	if resp, _ := c.call("tools/call", map[string]any{"name": "t"}); resp["error"] != nil {
		t.Fatalf("call after idle stop: %v", resp)
	}
	if n := len(started()); n != 2 {
		t.Fatalf("%d processes, want 2 (a new one after the idle stop)", n)
	}
	if ins := gw.Instances(); ins[0].Starts != 2 || ins[0].Started.Before(in.Started) {
		t.Fatalf("instance after restart: %+v", ins[0])
	}
}

// TestIdleStopAndMaxLifetime: idle_action stop stops the process without
// counting a failure; max_lifetime stops even a busy one.
func TestIdleStopAndMaxLifetime(t *testing.T) {
	launch, started, pauses, _ := pausable(t)
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}, Restart: RestartNo,
		Idle: 100 * time.Millisecond, IdleAction: IdleStop})
	c := newRawClient(t, gw)
	waitState(t, gw, StateStopped)
	if pauses.Load() != 0 {
		t.Fatal("idle_action stop paused")
	}
	// restart: no does not apply: an idle stop is no failure.
	if resp, _ := c.call("tools/call", map[string]any{"name": "t"}); resp["error"] != nil {
		t.Fatalf("call after idle stop: %v", resp)
	}
	if len(started()) != 2 {
		t.Fatalf("%d processes, want 2", len(started()))
	}

	launch2, started2, _, _ := pausable(t)
	gw2 := newGateway(t, &Server{Name: "raw", Launch: launch2, Allow: []string{"*"}, MaxLifetime: 300 * time.Millisecond})
	newRawClient(t, gw2)
	waitState(t, gw2, StateStopped)
	if len(started2()) != 1 {
		t.Fatalf("%d processes", len(started2()))
	}
}

// TestAdminPauseResumeStop: the admin operations and the states they leave.
func TestAdminPauseResumeStop(t *testing.T) {
	launch, _, pauses, resumes := pausable(t)
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}})
	c := newRawClient(t, gw)
	in := waitState(t, gw, StateRunning)
	if err := gw.Pause("raw", in.Scope); err != nil {
		t.Fatal(err)
	}
	waitState(t, gw, StatePaused)
	if err := gw.Resume("raw", in.Scope); err != nil || resumes.Load() != 1 || pauses.Load() != 1 {
		t.Fatalf("resume: %v, %d pauses, %d resumes", err, pauses.Load(), resumes.Load())
	}
	waitState(t, gw, StateRunning)
	if err := gw.Stop("raw", in.Scope); err != nil {
		t.Fatal(err)
	}
	if st := waitState(t, gw, StateStopped); st.Reason != "stopped by an admin" {
		t.Fatalf("reason %q", st.Reason)
	}
	if err := gw.Pause("raw", in.Scope); err == nil {
		t.Fatal("pausing a stopped instance succeeded")
	}
	if err := gw.Stop("nope", in.Scope); err == nil {
		t.Fatal("stopping an unknown instance succeeded")
	}
	if resp, _ := c.call("tools/call", map[string]any{"name": "t"}); resp["error"] != nil {
		t.Fatalf("call after an admin stop: %v", resp)
	}
}

// TestAdminStopNamedToCall: a call in flight when an admin stops its
// instance is told so, not only that the connection closed.
func TestAdminStopNamedToCall(t *testing.T) {
	called := make(chan struct{}, 1)
	launch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		switch msg["method"] {
		case "tools/list":
			s.reply(msg, `{"tools":[{"name":"hang","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			called <- struct{}{} // and no answer
		}
	})
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}})
	c := newRawClient(t, gw)
	got := make(chan map[string]any, 1)
	go func() {
		resp, _ := c.call("tools/call", map[string]any{"name": "hang"})
		got <- resp
	}()
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not reach the server")
	}
	in := waitState(t, gw, StateRunning)
	if err := gw.Stop("raw", in.Scope); err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-got:
		if msg := fmt.Sprint(resp["error"]); !strings.Contains(msg, "stopped by an admin before it answered") {
			t.Errorf("the call in flight at an admin's stop: %v; want the stop named", resp)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight got no answer after the stop")
	}
}

// TestAdminResumeOfIdle: an admin's resume of an instance paused for
// being idle lasts an idle period, not until the next tick.
func TestAdminResumeOfIdle(t *testing.T) {
	launch, _, pauses, _ := pausable(t)
	const idle = 2 * time.Second // a tick of 500 ms
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}, Idle: idle, IdleAction: IdlePause})
	newRawClient(t, gw)
	in := waitState(t, gw, StatePaused)
	if err := gw.Resume("raw", in.Scope); err != nil {
		t.Fatal(err)
	}
	time.Sleep(idle / 2) // two ticks
	if ins := gw.Instances(); len(ins) != 1 || ins[0].State != StateRunning || pauses.Load() != 1 {
		t.Fatalf("%v after an admin's resume: %+v, %d pauses; want it running", idle/2, ins, pauses.Load())
	}
	waitState(t, gw, StatePaused)
}

// TestPauseRefusedByStopQuiet: a pause that a stop refuses (the stop
// came between the pause's check and the freeze) is no failure of the
// server's: no "pausing the server failed" warning in serve's log.
func TestPauseRefusedByStopQuiet(t *testing.T) {
	base, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/list" {
			s.reply(msg, `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
		}
	})
	var gw *Gateway
	launch := func(ctx context.Context, scope Scope) (*Process, error) {
		p, err := base(ctx, scope)
		if err != nil {
			return nil, err
		}
		p.Pause = func() error {
			go gw.Stop("raw", scope) // waits for this pause to end
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if ins := gw.Instances(); len(ins) == 1 && ins[0].State == StateStopped {
					break
				}
			}
			return errors.New("pausing sandbox x: it is being stopped")
		}
		p.Resume = func() error { return nil }
		return p, nil
	}
	var logMu sync.Mutex
	var logs bytes.Buffer
	gw, err := New([]*Server{{Name: "raw", Launch: launch, Allow: []string{"*"}}},
		Options{Version: "test", Logger: slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	newRawClient(t, gw)
	in := waitState(t, gw, StateRunning)
	if err := gw.Pause("raw", in.Scope); err == nil {
		t.Fatal("a pause the stop refused succeeded")
	}
	waitState(t, gw, StateStopped)
	logMu.Lock()
	defer logMu.Unlock()
	if strings.Contains(logs.String(), "pausing the server failed") {
		t.Fatalf("a pause refused by a stop was logged as the server's failure:\n%s", logs.String())
	}
}

// TestCloseWaitsForLifecycle: Close returns only after the lifecycle
// goroutine has, so an idle pause under way cannot outlive the gateway
// (and write to an audit that is closed after it).
func TestCloseWaitsForLifecycle(t *testing.T) {
	base, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/list" {
			s.reply(msg, `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
		}
	})
	pausing := make(chan struct{})
	var once sync.Once
	var paused atomic.Bool
	launch := func(ctx context.Context, scope Scope) (*Process, error) {
		p, err := base(ctx, scope)
		if err != nil {
			return nil, err
		}
		p.Pause = func() error {
			once.Do(func() { close(pausing) })
			time.Sleep(300 * time.Millisecond)
			paused.Store(true)
			return nil
		}
		p.Resume = func() error { return nil }
		return p, nil
	}
	gw, err := New([]*Server{{Name: "raw", Launch: launch, Allow: []string{"*"},
		Idle: 50 * time.Millisecond, IdleAction: IdlePause}}, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	newRawClient(t, gw)
	select {
	case <-pausing:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle instance was not paused")
	}
	gw.Close()
	if !paused.Load() {
		t.Fatal("Close returned while the lifecycle goroutine was still pausing a server")
	}
	select {
	case <-gw.lifeDone:
	default:
		t.Fatal("Close returned before the lifecycle goroutine")
	}
}

// TestInstanceStoppedSaysWhy: once the restart delay after a failed
// start has passed with no request to start it again, the instance is
// stopped and still says why the last start failed (ps shows it).
func TestInstanceStoppedSaysWhy(t *testing.T) {
	u := &upstream{srv: &Server{Name: "zap"}, restartErr: &RestartError{Server: "zap", Reason: "failed to start: connection refused", Restart: 1, Max: 5},
		restartAt: time.Now().Add(-time.Second)}
	if in := u.instance(); in.State != StateStopped || in.Reason != "failed to start: connection refused" {
		t.Errorf("instance = %+v, want stopped, saying why the last start failed", in)
	}
	u.restartAt = time.Now().Add(time.Minute)
	if in := u.instance(); in.State != StateRestarting || !strings.Contains(in.Reason, "try again in") {
		t.Errorf("during the delay: %+v, want restarting", in)
	}
}

// TestIdleHeldByCallHook: a call waiting in the call hook (a human's
// approval) keeps its server from idling: no pause while it waits, and
// the call then runs.
func TestIdleHeldByCallHook(t *testing.T) {
	launch, _, pauses, _ := pausable(t)
	release := make(chan struct{})
	var gw *Gateway
	var during atomic.Int32
	paused := func() bool {
		return slices.ContainsFunc(gw.Instances(), func(in Instance) bool { return in.State == StatePaused })
	}
	hook := func(ctx context.Context, c *Call, next func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
		// Paused before the call came, a held server is thawed.
		for deadline := time.Now().Add(5 * time.Second); paused(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				return nil, errors.New("the held server stayed paused")
			}
		}
		before := pauses.Load()
		// An admin's pause is refused too: the idle check would undo it.
		if err := gw.Pause("raw", c.Scope); err == nil {
			return nil, errors.New("an admin's pause of the held server succeeded")
		}
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		during.Store(pauses.Load() - before)
		return next(ctx)
	}
	gw, err := New([]*Server{{Name: "raw", Launch: launch, Allow: []string{"*"}, Idle: 50 * time.Millisecond, IdleAction: IdlePause}},
		Options{Version: "test", Hooks: Hooks{Call: hook}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	c := newRawClient(t, gw)
	go func() {
		time.Sleep(500 * time.Millisecond) // ten idle periods
		close(release)
	}()
	if resp, _ := c.call("tools/call", map[string]any{"name": "t"}); resp["error"] != nil {
		t.Fatalf("held call: %v", resp)
	}
	if n := during.Load(); n != 0 {
		t.Errorf("%d pauses while the call waited in the hook, want 0", n)
	}
}

// LastCall is the last tools/call, not any request: listing the tools
// uses the instance (idle counts from it) but calls nothing.
func TestInstanceLastCallIsAToolCall(t *testing.T) {
	launch, _, _, _ := pausable(t)
	gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}})
	c := newRawClient(t, gw)
	if resp, _ := c.call("tools/list", nil); resp["error"] != nil {
		t.Fatalf("tools/list: %v", resp)
	}
	in := waitState(t, gw, StateRunning)
	if in.LastUse.IsZero() || !in.LastCall.IsZero() {
		t.Fatalf("after tools/list: LastUse %v, LastCall %v; want a use and no call", in.LastUse, in.LastCall)
	}
	before := time.Now()
	if resp, _ := c.call("tools/call", map[string]any{"name": "t"}); resp["error"] != nil {
		t.Fatalf("tools/call: %v", resp)
	}
	if in := waitState(t, gw, StateRunning); in.LastCall.Before(before) {
		t.Fatalf("after tools/call: LastCall %v, before the call at %v", in.LastCall, before)
	}
}
