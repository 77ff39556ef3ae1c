package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// RestartError is what a request gets while its server is down between
// a crash and the start that replaces it: which server, how its last
// process ended, which restart this is, and when to try again.
type RestartError struct {
	Server string
	// Reason is how the last process ended ("exited with status 1") or
	// why it could not start.
	Reason string
	// Restart is the number of this restart among the ends within the
	// crash window; Max is how many restarts that window allows.
	Restart, Max int
	// RetryAfter is how long until the new process starts; zero when
	// it is starting now.
	RetryAfter time.Duration
}

func (e *RestartError) Error() string {
	msg := fmt.Sprintf("server %s is restarting after it %s (restart %d of %d)", e.Server, e.Reason, e.Restart, e.Max)
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf("; try again in %s", roundUp(e.RetryAfter))
	}
	return msg
}

// roundUp rounds d up to a tenth of a second, up to whole seconds from 1s.
func roundUp(d time.Duration) time.Duration {
	unit := 100 * time.Millisecond
	if d >= time.Second {
		unit = time.Second
	}
	return (d + unit - 1).Truncate(unit)
}

// ErrNotSetUp is wrapped by a Launch error that started nothing because
// the server is not set up (its package did not install, its image did
// not pull): such a start is no crash of the server, so the restart
// policy neither counts it, delays the next start nor gives up on the
// server (which would keep refusing it for giveUpFor after its setup
// succeeded), and Hooks.Restart does not hear of it.
var ErrNotSetUp = errors.New("the server is not set up")

// NotSetUp wraps err, why a server is not set up, as a Launch error that
// started nothing: its message is err's, and it wraps ErrNotSetUp too.
func NotSetUp(err error) error { return notSetUpError{err} }

type notSetUpError struct{ err error }

func (e notSetUpError) Error() string   { return e.err.Error() }
func (e notSetUpError) Unwrap() []error { return []error{e.err, ErrNotSetUp} }

// RestartEvent tells Hooks.Restart what the restart policy decided after
// a server's process ended or failed to start.
type RestartEvent struct {
	Server string
	Scope  Scope
	// Reason is how the process ended or why it did not start.
	Reason string
	// GaveUp: the server stays down for this scope (restart: no, a clean
	// exit under on-failure, or the crash loop limit). Otherwise it starts
	// again after Delay, as restart Restart of Max.
	GaveUp       bool
	Why          string // with GaveUp: why no restart follows
	Restart, Max int
	Delay        time.Duration
}

// endReason is the text of a process's end for messages, to follow "it":
// its Describe ("exited with status 1", "killed: out of memory"), "failed
// to start: ...", or "ended (ERROR)" for the error that ended the session.
func endReason(err error) string {
	if err == nil {
		return "ended"
	}
	s := err.Error()
	for _, verb := range []string{"exited ", "killed", "failed ", "ended"} {
		if strings.HasPrefix(s, verb) {
			return s
		}
	}
	return "ended (" + s + ")"
}

// decideLocked applies the restart policy to an end that
// recordFailureLocked has counted. Called with u.mu held.
func (u *upstream) decideLocked(err error, clean bool) RestartEvent {
	ev := RestartEvent{Server: u.srv.Name, Scope: u.scope, Reason: endReason(err), Restart: len(u.crashes), Max: crashLoopMax}
	switch {
	case u.srv.Restart == RestartNo:
		ev.Why = "restart is off"
		u.failed = fmt.Errorf("server %s %s; restart is off (lifecycle.restart: no)", u.srv.Name, ev.Reason)
	case clean && u.srv.Restart == RestartOnFailure:
		ev.Why = "it exited with status 0 and restart is on-failure"
		u.failed = fmt.Errorf("server %s exited with status 0; restart is on-failure", u.srv.Name)
	case u.hangs >= hangMax && errors.Is(err, errNoAnswer):
		ev.Why = fmt.Sprintf("it did not answer initialize within %s, %d times in a row", u.startWait(), u.hangs)
		u.gaveUpAt = time.Now()
		u.failed = fmt.Errorf("server %s did not answer initialize within %s, %d times in a row; giving up on it for %s (a request after %s starts it again)",
			u.srv.Name, u.startWait(), u.hangs, giveUpFor, u.gaveUpAt.Add(giveUpFor).Format(time.TimeOnly))
	case u.hangs >= hangMax:
		ev.Why = fmt.Sprintf("its start failed only after %s or more, %d times in a row", slowFail, u.hangs)
		u.gaveUpAt = time.Now()
		u.failed = fmt.Errorf("server %s failed to start only after %s or more, %d times in a row; giving up on it for %s (a request after %s starts it again; last: it %s)",
			u.srv.Name, slowFail, u.hangs, giveUpFor, u.gaveUpAt.Add(giveUpFor).Format(time.TimeOnly), ev.Reason)
	case len(u.crashes) > crashLoopMax:
		ev.Why = fmt.Sprintf("it ended %d times within %s", len(u.crashes), crashWindow)
		u.gaveUpAt = time.Now()
		u.failed = fmt.Errorf("server %s ended %d times within %s; giving up on it for %s (a request after %s starts it again; last: it %s)",
			u.srv.Name, len(u.crashes), crashWindow, giveUpFor, u.gaveUpAt.Add(giveUpFor).Format(time.TimeOnly), ev.Reason)
	}
	ev.GaveUp = u.failed != nil
	if !ev.GaveUp {
		ev.Delay = max(u.backoff(), 0)
		u.restartAt = time.Now().Add(ev.Delay)
		u.restartErr = &RestartError{Server: u.srv.Name, Reason: ev.Reason, Restart: ev.Restart, Max: ev.Max}
	}
	return ev
}

// giveUpLapsedLocked reports whether a crash loop's give-up has run its
// giveUpFor, and if so forgets it and the ends that led to it, so that
// the caller starts the server afresh. Called with u.mu held.
func (u *upstream) giveUpLapsedLocked() bool {
	if u.gaveUpAt.IsZero() || time.Since(u.gaveUpAt) < giveUpFor {
		return false
	}
	u.failed, u.gaveUpAt, u.crashes, u.restartErr = nil, time.Time{}, nil, nil
	return true
}

// announce passes a restart decision to Hooks.Restart.
func (u *upstream) announce(ev RestartEvent) {
	if h := u.gw.opts.Hooks.Restart; h != nil {
		h(ev)
	}
}

// restartWaitMax is the longest restart delay a request waits out; a
// longer one (from the third restart in a row on) fails the request at
// once with a RestartError saying when to try again, rather than holding
// it while the client's own timeout runs.
const restartWaitMax = time.Second

// restartingLocked returns the error for a request that comes while the
// server waits out a restart delay longer than restartWaitMax, and makes
// sure a start is under way; nil when the request should go on (and wait
// for the start). Called with u.mu held.
func (u *upstream) restartingLocked() error {
	if u.stopped || u.failed != nil || u.restartErr == nil || (u.peer != nil && u.peer != u.stale) {
		return nil
	}
	wait := time.Until(u.restartAt)
	if wait <= restartWaitMax {
		return nil // get waits it out, or starts the server after it
	}
	if u.starting == nil {
		go u.restartNow()
	}
	e := *u.restartErr
	e.RetryAfter = wait
	return &e
}

// restartNow starts the server again after its restart delay, in the
// background: clients waiting for notifications need not send a request
// first, and a request that was told to try again finds it running.
func (u *upstream) restartNow() {
	ctx, cancel := context.WithTimeout(u.life, u.startWait()+restartMax)
	defer cancel()
	if _, err := u.get(ctx); err != nil && !errors.Is(err, errStopped) {
		u.log.Warn("restart failed", "err", err)
	}
}

// getNow is get for a client's request: while the server waits out its
// restart delay it fails at once with a RestartError instead of holding
// the request. A request whose server has just ended waits until that
// end is accounted for, so that it sees the decision.
func (u *upstream) getNow(ctx context.Context) (*peer, error) {
	u.mu.Lock()
	if p := u.peer; p != nil && p != u.stale {
		select {
		case <-p.done:
			watched := u.watched
			u.mu.Unlock()
			select {
			case <-watched:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			u.mu.Lock()
		default:
		}
	}
	err := u.restartingLocked()
	u.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return u.get(ctx)
}

// endError is the error of a request that was in flight on p when p's
// process ended: the restart policy's decision about that end, once it
// is made, or err as it was when p did not end by itself.
func (u *upstream) endError(ctx context.Context, p *peer, err error) error {
	select {
	case <-p.done:
	default:
		return err
	}
	if p.accounted == nil {
		return err
	}
	select {
	case <-p.accounted:
	case <-ctx.Done():
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.endedPeer != p {
		return err
	}
	if u.failed != nil {
		return u.failed
	}
	if u.restartErr != nil {
		e := *u.restartErr
		e.RetryAfter = max(time.Until(u.restartAt), 0)
		return &e
	}
	return err
}
