package cli

import (
	"crypto/rand"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"mcpbox/internal/audit"
	"mcpbox/internal/cgroup"
	"mcpbox/internal/egress"
	"mcpbox/internal/gateway"
)

// tracker knows the running sandboxes of a gateway, so that a call's
// audit record can name its sandbox and workspace and be joined with the
// files written and the connections opened while it ran.
type tracker struct {
	mu    sync.Mutex
	byKey map[trackKey]*sandboxTrack // guarded by mu
	ended []*sandboxTrack            // the last maxEnded that ended; guarded by mu
}

// trackKey is a launcher (a server, or a group's supervisor) and scope.
type trackKey struct {
	launcher string
	scope    gateway.Scope
}

// sandboxTrack is one running sandbox.
type sandboxTrack struct {
	id        string // "sbx_" + random
	launcher  string // the server (or "group:NAME") it runs
	scope     gateway.Scope
	workspace string  // the workspace id: its path under workspaces/, or ""
	rw        []rwDir // host dirs the sandbox may write
	// lower and upper are the input and the overlay's upper dir, for
	// `mcpbox diff`, when the input is overlaid.
	lower, upper string
	// artifacts are the files copied out when it ended; set before it is
	// moved to the ended ones.
	artifacts []string
	started   time.Time
	// stats, if set, reads the sandbox's resource use.
	stats func() (cgroup.Stats, error)
	// state is StateRunning, StatePaused, "stopping", "stopped" or "failed".
	state atomic.Value

	mu     sync.Mutex
	active []*callMark    // calls in flight; guarded by mu
	conns  []egress.Event // connections as they opened; guarded by mu
	ended  []egress.Event // connections as they ended (bytes, packages); guarded by mu
	exit   string         // how the sandbox ended, once it has; guarded by mu
	by     string         // who asked for the next pause, resume or stop ("admin"), if not idleness; guarded by mu
}

// rwDir is a writable mount: where it is on the host and in the sandbox.
type rwDir struct{ host, target string }

// maxTrackedConns bounds the connection events a sandbox keeps for joins;
// older ones are dropped (a call longer than that many connections is
// marked ambiguous).
const maxTrackedConns = 1024

func newTracker() *tracker { return &tracker{byKey: map[trackKey]*sandboxTrack{}} }

func newSandboxID() string { return "sbx_" + strings.ToLower(rand.Text()[:16]) }

// maxEnded is how many ended sandboxes `mcpbox ps` still shows.
const maxEnded = 64

// add registers a started sandbox; the returned func moves it to the
// ended ones.
func (t *tracker) add(launcher string, scope gateway.Scope, s *sandboxTrack) func() {
	k := trackKey{launcher, scope}
	s.launcher, s.scope = launcher, scope
	s.setState(gateway.StateRunning)
	t.mu.Lock()
	t.byKey[k] = s
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		if t.byKey[k] == s {
			delete(t.byKey, k)
		}
		if t.ended = append(t.ended, s); len(t.ended) > maxEnded {
			t.ended = t.ended[1:]
		}
		t.mu.Unlock()
	}
}

// all returns the running sandboxes and the last ended ones.
func (t *tracker) all() []*sandboxTrack {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*sandboxTrack, 0, len(t.byKey)+len(t.ended))
	for _, s := range t.byKey {
		out = append(out, s)
	}
	return append(out, t.ended...)
}

// find returns the sandbox with id (running or ended), or nil.
func (t *tracker) find(id string) *sandboxTrack {
	for _, s := range t.all() {
		if s.id == id {
			return s
		}
	}
	return nil
}

func (s *sandboxTrack) setState(st string) { s.state.Store(st) }

func (s *sandboxTrack) getState() string {
	st, _ := s.state.Load().(string)
	return st
}

// get returns the current sandbox of a launcher and scope, or nil.
func (t *tracker) get(launcher string, scope gateway.Scope) *sandboxTrack {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byKey[trackKey{launcher, scope}]
}

// opened and closed take the egress proxy's events.
func (s *sandboxTrack) opened(ev egress.Event) {
	s.mu.Lock()
	s.conns = appendBounded(s.conns, ev)
	s.mu.Unlock()
}

func (s *sandboxTrack) closed(ev egress.Event) {
	s.mu.Lock()
	s.ended = appendBounded(s.ended, ev)
	s.mu.Unlock()
}

func appendBounded(evs []egress.Event, ev egress.Event) []egress.Event {
	if len(evs) >= maxTrackedConns {
		evs = append(evs[:0], evs[len(evs)-maxTrackedConns/2:]...)
	}
	return append(evs, ev)
}

// setExit records how the sandbox ended.
func (s *sandboxTrack) setExit(status string) {
	s.mu.Lock()
	s.exit = status
	s.mu.Unlock()
}

// callMark is one call in flight in a sandbox.
type callMark struct {
	start     time.Time
	ambiguous bool // another call ran in the same sandbox meanwhile; guarded by the track's mu
	before    fileSnapshot
}

// begin marks a call's start; a call that overlaps another makes both
// ambiguous: the connections and files of either could be the other's.
func (s *sandboxTrack) begin() *callMark {
	m := &callMark{start: time.Now(), before: snapshotDirs(s.rw)}
	s.mu.Lock()
	for _, o := range s.active {
		o.ambiguous = true
		m.ambiguous = true
	}
	s.active = append(s.active, m)
	s.mu.Unlock()
	return m
}

// finish ends a call and fills rec with what the sandbox did meanwhile:
// files written, domains contacted, packages downloaded.
func (s *sandboxTrack) finish(m *callMark, rec *audit.Record) {
	end := time.Now()
	s.mu.Lock()
	for i, o := range s.active {
		if o == m {
			s.active = append(s.active[:i], s.active[i+1:]...)
			break
		}
	}
	ambiguous := m.ambiguous
	var conns, ended []egress.Event
	for _, ev := range s.conns {
		if !ev.Time.Before(m.start) && !ev.Time.After(end) {
			conns = append(conns, ev)
		}
	}
	for _, ev := range s.ended {
		if !ev.Time.Before(m.start) && !ev.Time.After(end) {
			ended = append(ended, ev)
		}
	}
	if len(s.conns) > 0 && s.conns[0].Time.After(m.start) && len(s.conns) >= maxTrackedConns/2 {
		ambiguous = true // events of this call may have been dropped
	}
	rec.ExitStatus = s.exit
	s.mu.Unlock()

	rec.Sandbox, rec.Workspace = s.id, s.workspace
	rec.Domains, rec.Packages = joinConns(conns, ended)
	for i := range rec.Domains {
		rec.Domains[i].Ambiguous = ambiguous
	}
	rec.DomainsAmbiguous = ambiguous && len(rec.Domains) > 0
	rec.Files = m.before.changed(s.rw)
}

// joinConns makes the audit's domain list from the connections a call
// opened, with the bytes of those that also ended during the call.
func joinConns(opened, ended []egress.Event) ([]audit.Domain, []audit.Package) {
	type key struct {
		host string
		port int
		t    time.Time
	}
	done := map[key]egress.Event{}
	for _, ev := range ended {
		done[key{ev.Host, ev.Port, ev.Time}] = ev
	}
	var ds []audit.Domain
	var ps []audit.Package
	for _, ev := range opened {
		d := audit.Domain{Host: ev.Host, Port: ev.Port, Decision: ev.Decision}
		if e, ok := done[key{ev.Host, ev.Port, ev.Time}]; ok {
			d.BytesUp, d.BytesDown, d.Decision = e.BytesUp, e.BytesDown, e.Decision
			if e.Package != "" {
				ps = append(ps, audit.Package{Name: e.Package, Version: e.Version, Host: e.Host})
			}
		}
		ds = append(ds, d)
	}
	return ds, ps
}

// takeBy returns and clears who asked for the operation under way.
func (s *sandboxTrack) takeBy() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	by := s.by
	s.by = ""
	return by
}
