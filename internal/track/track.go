package track

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"mcpbox/internal/audit"
	"mcpbox/internal/cgroup"
	"mcpbox/internal/egress"
	"mcpbox/internal/gateway"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/sandbox/initproc"
)

// Tracker knows the running sandboxes of a gateway, so that a call's
// audit record can name its sandbox and workspace and be joined with the
// files written and the connections opened while it ran.
type Tracker struct {
	mu    sync.Mutex
	byKey map[trackKey]*Sandbox // guarded by mu
	ended []*Sandbox            // the last maxEnded that ended; guarded by mu
}

// trackKey is a launcher (a server, or a group's supervisor) and scope.
type trackKey struct {
	launcher string
	scope    gateway.Scope
}

// Sandbox is one sandbox as the audit and `mcpbox ps` know it. The
// launcher fills its exported fields before the sandbox is added to a
// Tracker (Artifacts: before its end is reported) and does not change
// them afterwards; the rest is safe for concurrent use.
type Sandbox struct {
	ID        string // "sbx_" + random
	Workspace string // the workspace id: its path under workspaces/, or ""
	// Lower and Upper are the input and the overlay's upper dir, for
	// `mcpbox diff`, when the input is overlaid; "" otherwise.
	Lower, Upper string
	// Artifacts are the files copied out when it ended; set before it is
	// moved to the ended ones.
	Artifacts []string
	Started   time.Time
	Ready     time.Time // when it was up (set by the observer), for its start latency
	// Prepared: it started from a sandbox of its server's warm pool
	// (sandbox.warm_pool), not cold; set before Add.
	Prepared bool
	// Stats, if set, reads the sandbox's resource use.
	Stats func() (cgroup.Stats, error)
	// NetTries, if set, counts what the sandbox's processes tried of a
	// network it does not have (sandbox.Sandbox.NetTries); ok is false
	// when that cannot be read.
	NetTries func() (queries, noRoute uint64, ok bool)
	// netSeen are the NetTries counts TriedNetwork read last; guarded by mu.
	netSeen [2]uint64
	// Pod is the Kubernetes pod that runs it (kubernetes backend), and
	// Phase, if set, reads that pod's phase.
	Pod   string
	Phase func() string

	launcher string // the server (or "group:NAME") it runs; set by Add
	scope    gateway.Scope
	rw       []Dir // host dirs the sandbox may write
	// state is StateRunning, StatePaused, StateStopping, "stopped" or "failed".
	state atomic.Value
	// resumed is when it was last thawed (unix ns; 0: never), for the
	// wake span of the call that thawed it.
	resumed atomic.Int64

	mu     sync.Mutex
	active []*Call        // calls in flight; guarded by mu
	conns  []egress.Event // connections as they opened; guarded by mu
	ended  []egress.Event // connections as they ended (bytes, packages); guarded by mu
	exit   string         // how the sandbox ended, once it has; guarded by mu
	by     string         // who asked for the next pause, resume or stop ("admin"), if not idleness; guarded by mu
	// secrets are the proxy's substitutions (secrets.go); guarded by mu
	secrets []secretUse
	// placeholders are what the sandbox holds for its secrets added at
	// the proxy; guarded by mu
	placeholders []string
}

// SetPlaceholders keeps the placeholders the sandbox holds for its
// secrets added at the proxy (credinject.Set.Placeholders).
func (s *Sandbox) SetPlaceholders(ps []string) {
	s.mu.Lock()
	s.placeholders = ps
	s.mu.Unlock()
}

// Placeholders are those SetPlaceholders kept.
func (s *Sandbox) Placeholders() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.placeholders
}

// Dir is a writable mount: where it is on the host and in the sandbox.
type Dir struct{ Host, Target string }

// maxTrackedConns bounds the connection events a sandbox keeps for joins;
// older ones are dropped (a call longer than that many connections is
// marked ambiguous).
const maxTrackedConns = 1024

// New returns an empty Tracker.
func New() *Tracker { return &Tracker{byKey: map[trackKey]*Sandbox{}} }

// NewSandbox returns the record of a sandbox about to start, with a new
// id and its start time.
func NewSandbox() *Sandbox {
	return &Sandbox{ID: sandbox.NewID(), Started: time.Now()}
}

// StoppedByMcpbox begins the exit of a sandbox that mcpbox stopped (a
// stop, an idle timeout, the session's end, shutdown); the rest says how
// its server took it ("stopped by mcpbox (exited with status 0)"). Where
// a person asked for the stop, the guard names them instead.
const StoppedByMcpbox = "stopped by mcpbox"

// StateStopping is the state of a sandbox asked to stop that has not
// ended yet (the others are gateway.State*).
const StateStopping = "stopping"

// GroupLauncher is the tracker's name for the sandboxes of group grp
// (":" is not allowed in server names: no collision).
func GroupLauncher(grp string) string { return "group:" + grp }

// AddWritable notes a writable mount, whose files each call's record
// lists when it changed them. Call it before Add.
func (s *Sandbox) AddWritable(host, target string) { s.rw = append(s.rw, Dir{host, target}) }

// Writable are the writable mounts, as AddWritable noted them.
func (s *Sandbox) Writable() []Dir { return s.rw }

// Launcher is the server (or GroupLauncher) the sandbox runs, once added.
func (s *Sandbox) Launcher() string { return s.launcher }

// Scope is the scope the sandbox runs in, once added.
func (s *Sandbox) Scope() gateway.Scope { return s.scope }

// maxEnded is how many ended sandboxes `mcpbox ps` still shows.
const maxEnded = 64

// Add registers a started sandbox; the returned func moves it to the
// ended ones.
func (t *Tracker) Add(launcher string, scope gateway.Scope, s *Sandbox) func() {
	k := trackKey{launcher, scope}
	s.launcher, s.scope = launcher, scope
	s.SetState(gateway.StateRunning)
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

// All returns the running sandboxes and the last ended ones.
func (t *Tracker) All() []*Sandbox {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Sandbox, 0, len(t.byKey)+len(t.ended))
	for _, s := range t.byKey {
		out = append(out, s)
	}
	return append(out, t.ended...)
}

// Find returns the sandbox with id (running or ended), or nil.
func (t *Tracker) Find(id string) *Sandbox {
	for _, s := range t.All() {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// SetState sets the state: a gateway.State* or StateStopping.
func (s *Sandbox) SetState(st string) { s.state.Store(st) }

// MarkResumed records that it was thawed now.
func (s *Sandbox) MarkResumed() { s.resumed.Store(time.Now().UnixNano()) }

// Resumed is when it was last thawed (zero: never).
func (s *Sandbox) Resumed() time.Time {
	if ns := s.resumed.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// MarkStopping sets StateStopping if the sandbox is running or paused
// (a stop asked for; its end sets the final state).
func (s *Sandbox) MarkStopping() {
	if st := s.State(); st == gateway.StateRunning || st == gateway.StatePaused {
		s.SetState(StateStopping)
	}
}

// State is the state SetState set last.
func (s *Sandbox) State() string {
	st, _ := s.state.Load().(string)
	return st
}

// Get returns the current sandbox of a launcher and scope, or nil.
func (t *Tracker) Get(launcher string, scope gateway.Scope) *Sandbox {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byKey[trackKey{launcher, scope}]
}

// Opened and Closed take the egress proxy's events.
func (s *Sandbox) Opened(ev egress.Event) {
	s.mu.Lock()
	s.conns = appendBounded(s.conns, ev)
	s.mu.Unlock()
}

// Closed takes the egress proxy's event of a connection that ended.
func (s *Sandbox) Closed(ev egress.Event) {
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

// SetExit records how the sandbox ended.
func (s *Sandbox) SetExit(status string) {
	s.mu.Lock()
	s.exit = status
	s.mu.Unlock()
}

// Call is one call in flight in a sandbox.
type Call struct {
	start     time.Time
	ambiguous bool // another call ran in the same sandbox meanwhile; guarded by the track's mu
	before    fileSnapshot
}

// Begin marks a call's start; a call that overlaps another makes both
// ambiguous: the connections and files of either could be the other's.
func (s *Sandbox) Begin() *Call {
	m := &Call{start: time.Now(), before: snapshotDirs(s.rw)}
	s.mu.Lock()
	for _, o := range s.active {
		o.ambiguous = true
		m.ambiguous = true
	}
	s.active = append(s.active, m)
	s.mu.Unlock()
	return m
}

// Finish ends a call and fills rec with what the sandbox did meanwhile:
// files written, domains contacted, packages downloaded.
func (s *Sandbox) Finish(m *Call, rec *audit.Record) {
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
	refused := s.secretsDuring(m.start, end, rec)
	s.mu.Unlock()

	rec.Sandbox, rec.Workspace = s.ID, s.Workspace
	rec.Domains, rec.Packages = joinConns(conns, ended)
	for i, d := range rec.Domains {
		rec.Domains[i].Ambiguous = ambiguous
		if refused[fmt.Sprintf("%s:%d", d.Host, d.Port)] {
			rec.Domains[i].Decision = "deny" // a request in it was refused
		}
	}
	rec.DomainsAmbiguous = ambiguous && len(rec.Domains) > 0
	rec.Files = m.before.changed(s.rw)
	for i := range rec.Files {
		rec.Files[i].Ambiguous = m.ambiguous // the other call's writes land in the same dirs
	}
	rec.FilesAmbiguous = m.ambiguous && len(rec.Files) > 0
}

// TriedNetwork says what the sandbox's processes tried of a network it
// does not have since it was last asked, or since the sandbox started
// ("2 DNS queries, 1 packet with no route"); "" for nothing, for a
// sandbox with egress, or when the counters cannot be read. Reading them
// costs about 0.1 ms: the gateway asks after a failed call only.
func (s *Sandbox) TriedNetwork() string {
	if s.NetTries == nil {
		return ""
	}
	q, n, ok := s.NetTries()
	if !ok {
		return ""
	}
	s.mu.Lock()
	seen := s.netSeen
	s.netSeen = [2]uint64{q, n}
	s.mu.Unlock()
	if q < seen[0] || n < seen[1] {
		return "" // not the counters read before
	}
	return initproc.NetTried(q-seen[0], n-seen[1])
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

// TakeBy returns and clears who asked for the operation under way.
func (s *Sandbox) TakeBy() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	by := s.by
	s.by = ""
	return by
}

// Exit is how the sandbox ended, "" while it runs.
func (s *Sandbox) Exit() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exit
}

// SetBy says who asked for the next pause, resume or stop (TakeBy
// returns it to the record of that operation).
func (s *Sandbox) SetBy(who string) {
	s.mu.Lock()
	s.by = who
	s.mu.Unlock()
}
