package guard

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"

	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/gateway"
	"mcpbox/internal/integrity"
	"mcpbox/internal/policy"
	"mcpbox/internal/redact"
	"mcpbox/internal/track"
)

// Guard is the policy layer of `serve` around the gateway: which tools a
// client sees (pins, scanner, policy), whether a call runs (rate limits,
// policy, human approval), and the audit record of everything.
type Guard struct {
	c       *config.Config
	log     *slog.Logger
	book    *redact.Book
	engine  *policy.Engine
	limiter *policy.Limiter
	tracer  trace.Tracer // the calls' spans (trace.go); nil: none
	pins    *integrity.Pins
	store   *audit.Store
	broker  *approval.Broker
	tracks  *track.Tracker
	running runningCalls // the calls in hand, for ps and the dashboard
	servers map[string]*guardServer
	// channels are the approval channels in use (approvals.channels).
	channels map[string]bool
	payloads bool // audit.include_payloads
	// allowUnaudited passes calls on while the audit store cannot write
	// (audit.on_failure: allow); unaudited counts them.
	allowUnaudited bool
	unaudited      atomic.Int64

	gw atomic.Pointer[gateway.Gateway]
	// dir is the state dir, which the admin commands are pointed at.
	dir string
	// dashboard is the dashboard's URL once it listens (SetDashboard).
	dashboard atomic.Pointer[string]
	// others caches what waits at the state dir's other instances, for
	// the dashboard (othersPending).
	others othersCache

	// handle is the call pipeline (see pipeline), built once by New.
	handle handler
	// readOnly tells of a server's writes refused as read-only.
	readOnly *ReadOnlyHint

	// gen changes whenever what the List hook lets through may change
	// (a trust, a reload), so that remembered answers are not reused.
	gen atomic.Int64

	mu        sync.Mutex
	memo      map[memoKey]memoEntry          // guarded by mu
	scans     map[string][]integrity.Finding // definition sha256 → findings; guarded by mu
	names     map[string][]string            // server → its tools as the model sees them; guarded by mu
	reported  map[string]bool                // pin changes already logged; guarded by mu
	unmatched map[string]bool                // tools globs matching no tool already warned of; guarded by mu
	// unannotated are, by server, the tools already warned of as held
	// for review only because they leave an annotation out
	// (noteUnannotated): a hash of each name (a server chooses names of
	// any length), at most maxWarnedTools each. guarded by mu
	unannotated map[string]map[nameHash]bool
	asking      map[string]*trustAsk // definitions (server, kind, key) with a trust request open; guarded by mu
	denied      map[string]string    // definition → the hash a human refused to trust; guarded by mu
}

// guardServer is one server's guard settings.
type guardServer struct {
	name, prefix string
	launcher     string // the tracker's name for its sandboxes (the group for members)
	pin          string
	scan         string
	results      string
	credentials  string
	builtin      bool
	// remote is a remote server's origin (scheme://host:port), which ps
	// shows; "" for a server mcpbox runs. Never the path or the query:
	// some services put their key there.
	remote string
}

type memoKey struct{ agent, server, kind string }

// memoEntry is the answer of list for one list of a server: its gen
// (gateway.Hooks.List) while the guard's own gen was state.
type memoEntry struct {
	state int64
	list  uint64
	out   []gateway.Item
}

// Options locate the guard's files.
type Options struct {
	// StateDir holds the audit store (audit.db) and the approvals; it
	// must be set.
	StateDir string
	// LockPath is the lock file of the pins; it must be set
	// (LockPath).
	LockPath string
	// Source is the config's text, for error positions inside rules; nil:
	// errors name no position.
	Source []byte
	// JSONL is the audit's JSONL copy (c.Audit.JSONL, resolved against
	// the config's dir); "": none.
	JSONL string
	// Shared says other instances use the state dir (their pending
	// approvals in it are live); false: this one alone.
	Shared bool
	// Tracer, if set, gives every call a span (trace.go); nil: none.
	Tracer trace.Tracer
}

// New compiles c's policy and opens the lock file, the audit store and
// the approval broker. Close releases them.
func New(c *config.Config, o Options, log *slog.Logger, book *redact.Book) (*Guard, error) {
	engine, err := policy.CompileWith(c, policy.Options{Source: o.Source})
	if err != nil {
		return nil, err
	}
	pins, err := integrity.OpenPins(o.LockPath)
	if err != nil {
		return nil, fmt.Errorf("opening the lock file: %w", err)
	}
	g := &Guard{
		c: c, log: log, book: book, engine: engine,
		limiter:        policy.NewLimiter(c, nil),
		pins:           pins,
		tracks:         track.New(),
		servers:        map[string]*guardServer{},
		channels:       map[string]bool{},
		payloads:       c.Audit.IncludePayloads,
		allowUnaudited: c.Audit.OnFailure == config.AuditAllow,
		memo:           map[memoKey]memoEntry{},
		scans:          map[string][]integrity.Finding{},
		names:          map[string][]string{},
		reported:       map[string]bool{},
		unmatched:      map[string]bool{},
		unannotated:    map[string]map[nameHash]bool{},
		asking:         map[string]*trustAsk{},
		denied:         map[string]string{},
		tracer:         o.Tracer,
		dir:            o.StateDir,
		readOnly:       NewReadOnlyHint(log),
	}
	g.handle = g.pipeline()
	channels := c.Approvals.Channels
	if channels == nil {
		channels = []string{config.ChannelElicitation, config.ChannelCLI, config.ChannelWeb}
	}
	for _, ch := range channels {
		g.channels[ch] = true
	}
	for _, s := range c.Servers {
		g.servers[s.Name] = newGuardServer(c, s)
	}
	if err := g.openStores(c, o); err != nil {
		return nil, err
	}
	return g, nil
}

// newGuardServer is the guard's settings of server s of c.
func newGuardServer(c *config.Config, s *config.Server) *guardServer {
	gs := &guardServer{
		name: s.Name, prefix: c.EffectivePrefix(s), launcher: s.Name,
		pin: s.PinMode(), scan: s.Scan, results: s.ResultsScan, credentials: s.Credentials,
		builtin: s.Builtin != "",
	}
	if grp, ok := strings.CutPrefix(s.Placement, config.PlacementGroup); ok {
		gs.launcher = track.GroupLauncher(grp)
	}
	if u, err := url.Parse(s.URL); err == nil && s.URL != "" {
		gs.remote = u.Scheme + "://" + u.Host
	}
	return gs
}

// auditFile is the audit store's file in the state dir, which holds the
// approvals too.
const auditFile = "audit.db"

// openStores opens the audit store and the approval broker on it.
func (g *Guard) openStores(c *config.Config, o Options) error {
	var err error
	g.store, err = audit.Open(audit.Options{
		Path:            filepath.Join(o.StateDir, auditFile),
		JSONL:           o.JSONL,
		MaxAge:          time.Duration(c.Audit.Retention.MaxAge),
		MaxSize:         int64(c.Audit.Retention.MaxSize),
		IncludePayloads: c.Audit.IncludePayloads,
		Redact:          g.book.String,
		Logger:          g.log,
	})
	if err != nil {
		return fmt.Errorf("opening the audit store: %w", err)
	}
	g.broker, err = approval.New(approval.Options{
		DB:         g.store.DB(),
		Timeout:    c.Approvals.EffectiveTimeout(),
		OnDecision: g.approvalDecided,
		Waiting:    g.approvalWaiting,
		Shared:     o.Shared,
		// Nobody but the calling client can decide: do not wait out the
		// timeout when it cannot or did not answer.
		ElicitationOnly: !g.channels[config.ChannelCLI] && !g.channels[config.ChannelWeb],
	})
	if err != nil {
		g.store.Close()
		return fmt.Errorf("opening the approval store: %w", err)
	}
	return nil
}

// Attach gives the guard its gateway (for list_changed after a trust).
func (g *Guard) Attach(gw *gateway.Gateway) { g.gw.Store(gw) }

// Close stops the broker (pending calls are denied) and flushes the audit.
func (g *Guard) Close() {
	g.broker.Close()
	if err := g.store.Close(); err != nil {
		g.log.Warn("closing the audit store", "err", err)
	}
}

// Hooks are the gateway hooks of the guard.
func (g *Guard) Hooks() gateway.Hooks {
	return gateway.Hooks{
		Filter:  g.filter,
		Call:    g.call,
		List:    g.list,
		Session: g.session,
		Restart: g.restarted,
		Unknown: g.unknown,
	}
}

// filter redacts every payload a server sends before anything else sees
// it, and looks at it for writes the sandbox refused (ReadOnlyHint).
func (g *Guard) filter(server string, raw []byte) []byte {
	raw = g.book.JSON(raw)
	g.readOnly.See(server, raw)
	return raw
}

// Record adds an audit record, stamped now if it has no time.
func (g *Guard) Record(r audit.Record) {
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	g.store.Add(r)
}

// session audits a session's start and end. Records name a session by
// the id its client knows (Mcp-Session-Id) when it has one; the start and
// end records also carry the gateway's own id, which session-scope
// sandbox records use.
func (g *Guard) session(ev gateway.SessionEvent) {
	id := cmpOr(ev.MCPSession, ev.Session)
	r := audit.Record{Client: ev.Agent, Session: id, Event: audit.EventSessionStart,
		Detail: map[string]string{"gateway_session": ev.Session}}
	if ev.End {
		r.Event = audit.EventSessionEnd
		g.broker.EndSession(id)
	} else if ev.Client != "" {
		r.Detail["client_info"] = ev.Client
	}
	g.Record(r)
}

func (g *Guard) approvalDecided(req approval.Request, d approval.Decision) {
	decision := "denied"
	switch {
	case d.Allow:
		decision = "approved"
	case d.By == approval.ByCancelled:
		decision = "cancelled" // the call went away; Detail.reason says why
	}
	g.Record(audit.Record{
		Event: audit.EventApproval, Client: req.Client, Session: req.Session, Server: req.Server,
		Tool: req.Tool, Name: req.Name, Sandbox: req.Sandbox, Rule: req.Rule, Decision: decision, Approver: d.By,
		Detail:   map[string]string{"id": req.ID, "kind": req.Kind, "scope": d.Scope, "reason": d.Reason},
		Duration: approvalWait(req),
	})
}

// approvalWait is how long a request waited for its decision (0 if the
// broker did not stamp it).
func approvalWait(req approval.Request) time.Duration {
	if req.Time.IsZero() {
		return 0
	}
	return max(time.Since(req.Time), 0)
}

// SandboxEvent audits a sandbox starting, ending, pausing or resuming.
// A nil guard does nothing.
func (g *Guard) SandboxEvent(event, launcher string, scope gateway.Scope, t *track.Sandbox, status string) {
	if g == nil {
		return
	}
	r := audit.Record{Event: event, Client: scope.Agent, Session: scope.Session, Server: launcher,
		Sandbox: t.ID, Workspace: t.Workspace, ExitStatus: status}
	if event == audit.EventSandboxResume {
		t.MarkResumed() // the wake span's end (trace.go)
	}
	if event == audit.EventSandboxStart && !t.Ready.IsZero() {
		r.Duration = t.Ready.Sub(t.Started) // the start latency
	}
	if event == audit.EventSandboxStop || event == audit.EventSandboxCrash {
		r.Artifacts = t.Artifacts
	}
	if by := t.TakeBy(); by != "" && event != audit.EventSandboxStart {
		r.Detail = map[string]string{"by": by}
		if rest, ok := strings.CutPrefix(t.Exit(), track.StoppedByMcpbox); ok && event == audit.EventSandboxStop && g.adminStopped(launcher, scope) {
			// ps says who asked for the stop ("stopped by cli:uid=1000
			// (exited with status 0)"), not only that mcpbox stopped it.
			t.SetExit("stopped by " + by + rest)
		}
	}
	g.Record(r)
}

// adminStopped reports whether the gateway's last stop of launcher's
// instance for scope was an admin's (Gateway.Stop), not an idle timeout
// that came between the admin's request and the stop.
func (g *Guard) adminStopped(launcher string, scope gateway.Scope) bool {
	gw := g.gw.Load()
	if gw == nil {
		return false
	}
	servers := g.serversOf(launcher)
	for _, in := range gw.Instances() {
		if in.Scope == scope && slices.Contains(servers, in.Server) && in.Reason == gateway.ReasonAdminStop {
			return true
		}
	}
	return false
}

// StateDirOwned makes sure dir is not shared with other users: the audit
// store and the lock file hold what an attacker should not edit.
func StateDirOwned(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("the state dir %s is writable by others (mode %v)", dir, fi.Mode().Perm())
	}
	// A dir another user made for us (in /tmp, say) is theirs to swap
	// files in: the audit, the pins, the admin socket.
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("the state dir %s belongs to uid %d, not to this user (%d)", dir, st.Uid, os.Geteuid())
	}
	return nil
}

// PinKind maps a gateway list kind to a pinned kind ("" for none).
func PinKind(kind string) string {
	switch kind {
	case gateway.KindTools:
		return integrity.KindTool
	case gateway.KindPrompts:
		return integrity.KindPrompt
	case gateway.KindTemplates:
		return integrity.KindTemplate
	case gateway.KindInstructions:
		return integrity.KindInstructions
	}
	return ""
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// decodeArgs decodes a call's arguments for the policy; not an object: nil.
func decodeArgs(raw json.RawMessage) map[string]any {
	var m map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

// annotations are a tool definition's annotations (untrusted).
func annotations(def json.RawMessage) map[string]any {
	var d struct {
		Annotations map[string]any `json:"annotations"`
	}
	if len(def) == 0 || json.Unmarshal(def, &d) != nil {
		return nil
	}
	return d.Annotations
}

// SandboxStarted registers a sandbox for call joins and audits its start;
// the returned func unregisters it. A nil guard does nothing.
func (g *Guard) SandboxStarted(launcher string, scope gateway.Scope, t *track.Sandbox) func() {
	if g == nil {
		return func() {}
	}
	t.Ready = time.Now()
	g.SandboxEvent(audit.EventSandboxStart, launcher, scope, t, "")
	return g.tracks.Add(launcher, scope, t)
}

// SandboxEnded audits a sandbox's end: a stop, or a crash when it ended
// on its own with a failure. A nil guard does nothing.
func (g *Guard) SandboxEnded(launcher string, scope gateway.Scope, t *track.Sandbox, status string, expected bool) {
	if g == nil {
		return
	}
	event := audit.EventSandboxStop
	if !expected {
		event = audit.EventSandboxCrash
	}
	g.SandboxEvent(event, launcher, scope, t, status)
}

// EgressEvent audits one egress connection once it has ended. A nil
// guard does nothing.
func (g *Guard) EgressEvent(launcher string, scope gateway.Scope, t *track.Sandbox, ev egress.Event) {
	if g == nil {
		return
	}
	d := audit.Domain{Host: ev.Host, Port: ev.Port, Decision: ev.Decision, BytesUp: ev.BytesUp, BytesDown: ev.BytesDown}
	r := audit.Record{Time: ev.Time, Event: audit.EventEgress, Client: scope.Agent, Session: scope.Session,
		Server: launcher, Sandbox: t.ID, Workspace: t.Workspace, Decision: ev.Decision, Rule: ev.Rule,
		Duration: ev.Duration, Domains: []audit.Domain{d}}
	if ev.Reason != "" {
		r.Detail = map[string]string{"reason": ev.Reason}
		if strings.HasPrefix(ev.Reason, egress.ErrRefused.Error()) {
			// The connection was let through, a request in it was not
			// (a placeholder bound elsewhere): the dashboard counts it
			// as refused.
			r.Detail["refused"] = "request"
		}
	}
	if ev.Package != "" {
		r.Packages = []audit.Package{{Name: ev.Package, Version: ev.Version, Host: ev.Host}}
	}
	g.Record(r)
}

// policyClient is the client name the policy knows an agent by: the
// stdio agent is "" (it is no configured client).
func policyClient(agent string) string {
	if agent == gateway.LocalAgent {
		return ""
	}
	return agent
}

// Broker is the approval broker: the admin socket decides and revokes
// through it, the web channel serves its handler.
func (g *Guard) Broker() *approval.Broker { return g.broker }

// ChannelOn says whether approval channel ch (config.Channel*) is in use
// (approvals.channels).
func (g *Guard) ChannelOn(ch string) bool { return g.channels[ch] }

// ReloadPins reads the lock file again and tells the clients their lists
// may have changed.
func (g *Guard) ReloadPins() error {
	if err := g.pins.Reload(); err != nil {
		return err
	}
	g.withdrawStale()
	g.changed("")
	return nil
}

// Trust pins the pending definitions of server (key "" for all of them)
// whose hashes are in want (what was shown to who decided), and lets the
// clients see them.
func (g *Guard) Trust(server, key, who string, want []string) ([]integrity.Change, error) {
	return g.trust(server, key, who, want)
}
