package guard

// The calls the guard has in hand, for `mcpbox ps` and the dashboard's
// sandboxes page: the audit records a call only once it has ended.

import (
	"slices"
	"sync"
	"time"

	"mcpbox/internal/admin"
	"mcpbox/internal/gateway"
)

// runningCall is a call between the Call hook's start and its end.
type runningCall struct {
	launcher string // the sandbox's launcher: the server or its group
	scope    gateway.Scope
	tool     string
	started  time.Time
	waiting  string // "approval" while a human decides; guarded by the set's mu
}

// runningCalls is the set of calls in hand. Safe for concurrent use.
type runningCalls struct {
	mu    sync.Mutex
	calls map[*runningCall]struct{} // guarded by mu
}

// add notes a call and returns the func that forgets it.
func (s *runningCalls) add(c *runningCall) func() {
	s.mu.Lock()
	if s.calls == nil {
		s.calls = map[*runningCall]struct{}{}
	}
	s.calls[c] = struct{}{}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.calls, c)
		s.mu.Unlock()
	}
}

// wait marks c as waiting for why ("" when it no longer waits).
func (s *runningCalls) wait(c *runningCall, why string) {
	if c == nil {
		return
	}
	s.mu.Lock()
	c.waiting = why
	s.mu.Unlock()
}

// of lists the calls of launcher's sandbox for scope, oldest first.
func (s *runningCalls) of(launcher string, scope gateway.Scope) []admin.Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []admin.Call
	for c := range s.calls {
		if c.launcher == launcher && c.scope == scope {
			out = append(out, admin.Call{Tool: c.tool, Started: c.started, Waiting: c.waiting})
		}
	}
	slices.SortFunc(out, func(a, b admin.Call) int { return a.Started.Compare(b.Started) })
	return out
}
