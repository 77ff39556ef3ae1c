package gateway

import (
	"errors"
	"fmt"
	"time"
)

// Instance states, as Instances reports them.
const (
	StateStarting = "starting"
	StateRunning  = "running"
	StatePaused   = "paused"
	StateStopped  = "stopped" // not running now; the next request starts it
	StateFailed   = "failed"  // given up on (restart policy, crash loop)
	// StateRestarting: it ended and the restart policy starts it again
	// after a delay; requests meanwhile get a RestartError.
	StateRestarting = "restarting"
)

// Instance is one server instance (a server for one scope).
type Instance struct {
	Server  string
	Scope   Scope
	State   string
	Started time.Time // of the running process; zero when none runs
	LastUse time.Time // the last request (what idle counts from)
	// LastCall is when the last tools/call was sent to the server.
	LastCall time.Time
	// Starts counts the processes started for this scope; Reason says why
	// the last one stopped or failed.
	Starts int
	Reason string
	// Restarts counts the starts the restart policy made after an end.
	Restarts int
}

// Instances lists the server instances of the gateway.
func (g *Gateway) Instances() []Instance {
	g.mu.Lock()
	ups := make([]*upstream, 0, len(g.pool))
	for _, u := range g.pool {
		ups = append(ups, u)
	}
	g.mu.Unlock()
	out := make([]Instance, 0, len(ups))
	for _, u := range ups {
		out = append(out, u.instance())
	}
	return out
}

func (u *upstream) instance() Instance {
	u.mu.Lock()
	defer u.mu.Unlock()
	in := Instance{Server: u.srv.Name, Scope: u.scope, LastUse: u.used, LastCall: u.called, Starts: u.starts, Reason: u.reason, Restarts: u.restarts}
	switch {
	case u.failed != nil:
		in.State, in.Reason = StateFailed, u.failed.Error()
	case u.peer == nil && u.restartErr != nil && time.Now().Before(u.restartAt):
		e := *u.restartErr
		e.RetryAfter = time.Until(u.restartAt)
		in.State, in.Reason = StateRestarting, e.Error()
	case u.starting != nil:
		in.State = StateStarting
	case u.peer == nil:
		in.State = StateStopped
		if in.Reason == "" && u.restartErr != nil {
			// The restart delay has passed: why the last start failed.
			in.Reason = u.restartErr.Reason
		}
	case u.paused:
		in.State, in.Started = StatePaused, u.startedAt
	default:
		in.State, in.Started = StateRunning, u.startedAt
	}
	return in
}

// ErrNoInstance: no instance of that server runs for that scope.
var ErrNoInstance = errors.New("no such server instance")

// Pause freezes the instance of server for scope now, as idle would; the
// next request resumes it.
func (g *Gateway) Pause(server string, scope Scope) error {
	u := g.lookup(server, scope)
	if u == nil {
		return ErrNoInstance
	}
	u.mu.Lock()
	p, proc := u.peer, u.proc
	u.mu.Unlock()
	if p == nil {
		return fmt.Errorf("%w: %s is not running", ErrNoInstance, server)
	}
	return u.pause(p, proc, "paused by an admin", true)
}

// Resume thaws a paused instance, and starts its idle clock again: an
// instance paused for being idle would be paused again at the next tick.
func (g *Gateway) Resume(server string, scope Scope) error {
	u := g.lookup(server, scope)
	if u == nil {
		return ErrNoInstance
	}
	u.mu.Lock()
	u.used = time.Now()
	u.mu.Unlock()
	return u.resume()
}

// Stop stops the instance of server for scope (its calls in flight
// fail); the next request starts a new one.
func (g *Gateway) Stop(server string, scope Scope) error {
	u := g.lookup(server, scope)
	if u == nil {
		return ErrNoInstance
	}
	u.mu.Lock()
	p := u.peer
	u.mu.Unlock()
	if p == nil {
		return fmt.Errorf("%w: %s is not running", ErrNoInstance, server)
	}
	u.park(p, ReasonAdminStop)
	return nil
}

// ReasonAdminStop is Instance.Reason after Stop.
const ReasonAdminStop = "stopped by an admin"

func (g *Gateway) lookup(server string, scope Scope) *upstream {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pool[poolKey{server, scope}]
}

// lifecycleTick is how often the gateway looks for idle and old
// instances (and for calls waiting on a paused one): a quarter of the
// shortest period, within [50ms, 5s]; 1s when no server has one.
func lifecycleTick(servers []*Server) time.Duration {
	var d time.Duration
	for _, s := range servers {
		for _, p := range []time.Duration{s.Idle, s.IdleStop, s.MaxLifetime} {
			if p > 0 && (d == 0 || p < d) {
				d = p
			}
		}
	}
	if d == 0 {
		return time.Second
	}
	return min(max(d/4, 50*time.Millisecond), 5*time.Second)
}

// lifecycle applies Idle, IdleStop and MaxLifetime until the gateway closes.
func (g *Gateway) lifecycle(tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-g.done:
			return
		case <-t.C:
		}
		g.mu.Lock()
		ups := make([]*upstream, 0, len(g.pool))
		for _, u := range g.pool {
			ups = append(ups, u)
		}
		g.mu.Unlock()
		for _, u := range ups {
			u.checkIdle(time.Now())
		}
	}
}

// checkIdle pauses or stops u if it has been idle or alive too long.
// An instance with calls in flight is not idle.
func (u *upstream) checkIdle(now time.Time) {
	s := u.srv
	u.mu.Lock()
	p, proc := u.peer, u.proc
	if p == nil || u.stopped || u.stale == p {
		u.mu.Unlock()
		return
	}
	if s.MaxLifetime > 0 && now.Sub(u.startedAt) >= s.MaxLifetime {
		u.mu.Unlock()
		u.park(p, fmt.Sprintf("max_lifetime %s reached", s.MaxLifetime))
		return
	}
	if len(u.calls) > 0 || u.held > 0 {
		u.used = now
		paused := u.paused
		u.mu.Unlock()
		if paused {
			// A call reached the process between a pause's check and its
			// freeze (an admin pause, a snapshot): it must not hang.
			_ = u.resume()
		}
		return
	}
	idle, paused := now.Sub(u.used), u.paused
	u.mu.Unlock()
	switch {
	case paused && s.IdleStop > 0 && idle >= s.IdleStop:
		u.park(p, fmt.Sprintf("idle for %s (idle_stop)", s.IdleStop))
	case !paused && s.Idle > 0 && idle >= s.Idle:
		if s.IdleAction != IdleStop && proc.Pause != nil {
			err := u.pause(p, proc, fmt.Sprintf("idle for %s", s.Idle), false)
			if err == nil {
				return
			}
			// No freezer here (e.g. no cgroups): idle still ends it.
		}
		u.park(p, fmt.Sprintf("idle for %s", s.Idle))
	}
}

// pause freezes p's process unless it is in use. Pause and resume are
// serialized by u.freeze, and paused is set before the process freezes:
// a request that comes meanwhile sees it and resumes after the freeze.
func (u *upstream) pause(p *peer, proc *Process, reason string, force bool) error {
	if proc == nil || proc.Pause == nil || proc.Resume == nil {
		return errors.New("this server cannot be paused (a remote server or a Kubernetes pod): mcpbox stop ends it, and its next call starts it again")
	}
	u.freeze.Lock()
	defer u.freeze.Unlock()
	u.mu.Lock()
	// A call held in the call hook counts for a forced pause too: the
	// idle check would thaw it again at once.
	busy := len(u.calls) > 0 || u.held > 0 || (!force && time.Since(u.used) < u.srv.Idle)
	if u.peer != p || u.paused || busy {
		u.mu.Unlock()
		if busy && force {
			return errors.New("it has calls in flight")
		}
		return nil
	}
	u.paused = true
	u.mu.Unlock()
	if err := proc.Pause(); err != nil {
		u.mu.Lock()
		u.paused = false
		// Stopped meanwhile (the session ended, serve stopping): the
		// stop refused the pause, and the server is not at fault.
		stopped := u.peer != p
		u.mu.Unlock()
		if !stopped {
			u.log.Warn("pausing the server failed", "err", err)
		}
		return err
	}
	u.log.Info("server paused", "reason", reason)
	return nil
}

// resume thaws the process if it is paused; get calls it before handing
// out a paused peer.
func (u *upstream) resume() error {
	u.mu.Lock()
	if !u.paused {
		u.mu.Unlock()
		return nil
	}
	u.paused = false
	proc := u.proc
	u.mu.Unlock()
	u.freeze.Lock()
	defer u.freeze.Unlock()
	start := time.Now()
	if err := proc.Resume(); err != nil {
		u.log.Warn("resuming the server failed; stopping it", "err", err)
		u.mu.Lock()
		p := u.peer
		u.mu.Unlock()
		if p != nil {
			u.park(p, "resume failed: "+err.Error())
		}
		return err
	}
	u.log.Info("server resumed", "after", time.Since(start))
	return nil
}

// park stops p's process without counting it as a failure: the next
// request starts a new one.
func (u *upstream) park(p *peer, reason string) {
	u.mu.Lock()
	if u.peer != p {
		u.mu.Unlock()
		return
	}
	proc, paused := u.proc, u.paused
	u.peer, u.proc, u.paused, u.reason = nil, nil, false, reason
	u.mu.Unlock()
	u.log.Info("server stopped", "reason", reason)
	if paused && proc.Resume != nil {
		// A frozen process cannot exit; thawed, it sees its stdin close.
		u.freeze.Lock()
		_ = proc.Resume()
		u.freeze.Unlock()
	}
	p.closeFor(reason)
	proc.stop()
}
