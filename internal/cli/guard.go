package cli

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/gateway"
	"mcpbox/internal/integrity"
	"mcpbox/internal/policy"
	"mcpbox/internal/redact"
)

// guard is the policy layer of `serve` around the gateway: which tools a
// client sees (pins, scanner, policy), whether a call runs (rate limits,
// policy, human approval), and the audit record of everything.
type guard struct {
	c       *config.Config
	log     *slog.Logger
	book    *redact.Book
	engine  *policy.Engine
	limiter *policy.Limiter
	pins    *integrity.Pins
	store   *audit.Store
	broker  *approval.Broker
	tracks  *tracker
	servers map[string]*guardServer
	// channels are the approval channels in use (approvals.channels).
	channels map[string]bool
	payloads bool // audit.include_payloads
	// allowUnaudited passes calls on while the audit store cannot write
	// (audit.on_failure: allow); unaudited counts them.
	allowUnaudited bool
	unaudited      atomic.Int64
	// protected are host paths no sandbox may have a writable mount over
	// (or inside of): the lock file's dir, the config, the JSONL copy.
	protected []string

	gw atomic.Pointer[gateway.Gateway]

	// gen changes whenever what the List hook lets through may change
	// (a trust, a reload), so that remembered answers are not reused.
	gen atomic.Int64

	mu       sync.Mutex
	memo     map[memoKey]memoEntry          // guarded by mu
	scans    map[string][]integrity.Finding // definition sha256 → findings; guarded by mu
	names    map[string][]string            // server → its tools as the model sees them; guarded by mu
	reported map[string]bool                // pin changes already logged; guarded by mu
	asking   map[string]bool                // definitions (server, kind, key) with a trust request open; guarded by mu
	denied   map[string]string              // definition → the hash a human refused to trust; guarded by mu
}

// guardServer is one server's guard settings.
type guardServer struct {
	name, prefix string
	scope        string
	launcher     string // the tracker's name for its sandboxes (the group for members)
	pin          string
	scan         string
	results      string
	credentials  string
	builtin      bool
}

type memoKey struct{ agent, server, kind string }

type memoEntry struct {
	gen   int64
	first *gateway.Item
	n     int
	out   []gateway.Item
}

// guardOptions locate the guard's files.
type guardOptions struct {
	stateDir   string
	lockPath   string // mcpbox.lock
	configPath string // "" for the embedded default
	source     []byte // the config's text, for error positions inside rules
	// shared: other instances use the state dir (their pending approvals
	// in it are live).
	shared bool
}

// newGuard compiles c's policy and opens the lock file, the audit store
// and the approval broker.
func newGuard(c *config.Config, base string, o guardOptions, log *slog.Logger, book *redact.Book) (*guard, error) {
	engine, err := policy.CompileWith(c, policy.Options{Source: o.source})
	if err != nil {
		return nil, err
	}
	pins, err := integrity.OpenPins(o.lockPath)
	if err != nil {
		return nil, fmt.Errorf("opening the lock file: %w", err)
	}
	g := &guard{
		c: c, log: log, book: book, engine: engine,
		limiter:        policy.NewLimiter(c, nil),
		pins:           pins,
		tracks:         newTracker(),
		servers:        map[string]*guardServer{},
		channels:       map[string]bool{},
		payloads:       c.Audit.IncludePayloads,
		allowUnaudited: c.Audit.OnFailure == config.AuditAllow,
		memo:           map[memoKey]memoEntry{},
		scans:          map[string][]integrity.Finding{},
		names:          map[string][]string{},
		reported:       map[string]bool{},
		asking:         map[string]bool{},
		denied:         map[string]string{},
	}
	channels := c.Approvals.Channels
	if channels == nil {
		channels = []string{config.ChannelElicitation, config.ChannelCLI, config.ChannelWeb}
	}
	for _, ch := range channels {
		g.channels[ch] = true
	}
	for _, s := range c.Servers {
		gs := &guardServer{
			name: s.Name, prefix: c.EffectivePrefix(s), scope: s.Scope, launcher: s.Name,
			pin: s.Pin, scan: s.Scan, results: s.ResultsScan, credentials: s.Credentials,
			builtin: s.Builtin != "",
		}
		if grp, ok := strings.CutPrefix(s.Placement, config.PlacementGroup); ok {
			gs.launcher = groupLauncherName(grp)
		}
		if gs.scope == "" {
			gs.scope = gateway.ScopeAgent
		}
		switch {
		case gs.pin == "" && gs.builtin:
			// mcpbox's own server changes only with mcpbox itself.
			gs.pin = config.PinOff
		case gs.pin == "":
			gs.pin = config.PinTOFU
		}
		g.servers[s.Name] = gs
	}
	jsonl := c.Audit.JSONL
	if jsonl != "" {
		jsonl = resolve(base, jsonl)
	}
	// No sandbox may write these: the pins, the policy, the audit copy.
	g.protected = []string{filepath.Dir(o.lockPath), jsonl}
	if o.configPath != "" {
		g.protected = append(g.protected, o.configPath)
	}
	g.store, err = audit.Open(audit.Options{
		Path:            filepath.Join(o.stateDir, "audit.db"),
		JSONL:           jsonl,
		MaxAge:          time.Duration(c.Audit.Retention.MaxAge),
		MaxSize:         int64(c.Audit.Retention.MaxSize),
		IncludePayloads: c.Audit.IncludePayloads,
		Redact:          book.String,
		Logger:          log,
	})
	if err != nil {
		return nil, fmt.Errorf("opening the audit store: %w", err)
	}
	g.broker, err = approval.New(approval.Options{
		DB:         g.store.DB(),
		Timeout:    c.Approvals.EffectiveTimeout(),
		OnDecision: g.approvalDecided,
		Shared:     o.shared,
	})
	if err != nil {
		g.store.Close()
		return nil, fmt.Errorf("opening the approval store: %w", err)
	}
	return g, nil
}

// defaultLockPath is mcpbox.lock beside the config, or in the state dir
// for the embedded default.
func defaultLockPath(configPath, stateDir string) string {
	if configPath == "" {
		return filepath.Join(stateDir, "mcpbox.lock")
	}
	return filepath.Join(filepath.Dir(configPath), "mcpbox.lock")
}

// attach gives the guard its gateway (for list_changed after a trust).
func (g *guard) attach(gw *gateway.Gateway) { g.gw.Store(gw) }

// close stops the broker (pending calls are denied) and flushes the audit.
func (g *guard) close() {
	g.broker.Close()
	if err := g.store.Close(); err != nil {
		g.log.Warn("closing the audit store", "err", err)
	}
}

// hooks are the gateway hooks of the guard.
func (g *guard) hooks() gateway.Hooks {
	return gateway.Hooks{
		Filter:  func(_ string, raw []byte) []byte { return g.book.JSON(raw) },
		Call:    g.call,
		List:    g.list,
		Session: g.session,
		Restart: g.restarted,
	}
}

// record adds an audit record, stamped now if it has no time.
func (g *guard) record(r audit.Record) {
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	g.store.Add(r)
}

// session audits a session's start and end. Records name a session by
// the id its client knows (Mcp-Session-Id) when it has one; the start and
// end records also carry the gateway's own id, which session-scope
// sandbox records use.
func (g *guard) session(ev gateway.SessionEvent) {
	id := cmpOr(ev.MCPSession, ev.Session)
	r := audit.Record{Client: ev.Agent, Session: id, Event: audit.EventSessionStart,
		Detail: map[string]string{"gateway_session": ev.Session}}
	if ev.End {
		r.Event = audit.EventSessionEnd
		g.broker.EndSession(id)
	} else if ev.Client != "" {
		r.Detail["client_info"] = ev.Client
	}
	g.record(r)
}

func (g *guard) approvalDecided(req approval.Request, d approval.Decision) {
	decision := "denied"
	switch {
	case d.Allow:
		decision = "approved"
	case d.By == approval.ByCancelled:
		decision = "cancelled" // the call went away; Detail.reason says why
	}
	g.record(audit.Record{
		Event: audit.EventApproval, Client: req.Client, Session: req.Session, Server: req.Server,
		Tool: req.Tool, Name: req.Name, Sandbox: req.Sandbox, Rule: req.Rule, Decision: decision, Approver: d.By,
		Detail: map[string]string{"id": req.ID, "kind": req.Kind, "scope": d.Scope, "reason": d.Reason},
	})
}

// SandboxEvent audits a sandbox starting, ending, pausing or resuming.
// A nil guard does nothing.
func (g *guard) SandboxEvent(event, launcher string, t *sandboxTrack, scope gateway.Scope, status string) {
	if g == nil {
		return
	}
	r := audit.Record{Event: event, Client: scope.Agent, Session: scope.Session, Server: launcher,
		Sandbox: t.id, Workspace: t.workspace, ExitStatus: status}
	if event == audit.EventSandboxStop || event == audit.EventSandboxCrash {
		r.Artifacts = t.artifacts
	}
	if by := t.takeBy(); by != "" && event != audit.EventSandboxStart {
		r.Detail = map[string]string{"by": by}
	}
	g.record(r)
}

// scopeOf is the instance scope a call of agent/session runs in.
func (gs *guardServer) scopeOf(agent, session string) gateway.Scope {
	switch gs.scope {
	case gateway.ScopeShared:
		return gateway.Scope{}
	case gateway.ScopeSession:
		return gateway.Scope{Agent: agent, Session: session}
	}
	return gateway.Scope{Agent: agent}
}

// stateDirOwned makes sure dir is not shared with other users: the audit
// store and the lock file hold what an attacker should not edit.
func stateDirOwned(dir string) error {
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

// pinKind maps a gateway list kind to a pinned kind ("" for none).
func pinKind(kind string) string {
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
func (g *guard) SandboxStarted(launcher string, scope gateway.Scope, t *sandboxTrack) func() {
	if g == nil {
		return func() {}
	}
	g.SandboxEvent(audit.EventSandboxStart, launcher, t, scope, "")
	return g.tracks.add(launcher, scope, t)
}

// SandboxEnded audits a sandbox's end: a stop, or a crash when it ended
// on its own with a failure.
func (g *guard) SandboxEnded(launcher string, scope gateway.Scope, t *sandboxTrack, status string, expected bool) {
	if g == nil {
		return
	}
	event := audit.EventSandboxStop
	if !expected {
		event = audit.EventSandboxCrash
	}
	g.SandboxEvent(event, launcher, t, scope, status)
}

// EgressEvent audits one egress connection once it has ended.
func (g *guard) EgressEvent(launcher string, scope gateway.Scope, t *sandboxTrack, ev egress.Event) {
	if g == nil {
		return
	}
	d := audit.Domain{Host: ev.Host, Port: ev.Port, Decision: ev.Decision, BytesUp: ev.BytesUp, BytesDown: ev.BytesDown}
	r := audit.Record{Time: ev.Time, Event: audit.EventEgress, Client: scope.Agent, Session: scope.Session,
		Server: launcher, Sandbox: t.id, Workspace: t.workspace, Decision: ev.Decision, Rule: ev.Rule,
		Duration: ev.Duration, Domains: []audit.Domain{d}}
	if ev.Reason != "" {
		r.Detail = map[string]string{"reason": ev.Reason}
	}
	if ev.Package != "" {
		r.Packages = []audit.Package{{Name: ev.Package, Version: ev.Version, Host: ev.Host}}
	}
	g.record(r)
}

// groupLauncherName is the tracker's name of group grp's sandboxes (the
// name its sandboxLauncher has).
func groupLauncherName(grp string) string { return "group:" + grp }

// policyClient is the client name the policy knows an agent by: the
// stdio agent is "" (it is no configured client).
func policyClient(agent string) string {
	if agent == gateway.LocalAgent {
		return ""
	}
	return agent
}
