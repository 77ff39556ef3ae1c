package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

	gw atomic.Pointer[gateway.Gateway]

	// gen changes whenever what the List hook lets through may change
	// (a trust, a reload), so that remembered answers are not reused.
	gen atomic.Int64

	mu       sync.Mutex
	memo     map[memoKey]memoEntry          // guarded by mu
	scans    map[string][]integrity.Finding // definition sha256 → findings; guarded by mu
	names    map[string][]string            // server → its tools as the model sees them; guarded by mu
	reported map[string]bool                // pin changes already logged; guarded by mu
	asking   map[string]bool                // pin changes with a trust request open; guarded by mu
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
	stateDir string
	lockPath string // mcpbox.lock
	source   []byte // the config's text, for error positions inside rules
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
		limiter:  policy.NewLimiter(c, nil),
		pins:     pins,
		tracks:   newTracker(),
		servers:  map[string]*guardServer{},
		channels: map[string]bool{},
		payloads: c.Audit.IncludePayloads,
		memo:     map[memoKey]memoEntry{},
		scans:    map[string][]integrity.Finding{},
		names:    map[string][]string{},
		reported: map[string]bool{},
		asking:   map[string]bool{},
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
		Timeout:    time.Duration(c.Approvals.Timeout),
		OnDecision: g.approvalDecided,
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
	if d.Allow {
		decision = "approved"
	}
	g.record(audit.Record{
		Event: audit.EventApproval, Client: req.Client, Session: req.Session, Server: req.Server,
		Tool: req.Tool, Sandbox: req.Sandbox, Rule: req.Rule, Decision: decision, Approver: d.By,
		Detail: map[string]string{"id": req.ID, "kind": req.Kind, "scope": d.Scope, "reason": d.Reason},
	})
}

// sandboxEvent audits a sandbox starting, ending, pausing or resuming.
// A nil guard does nothing.
func (g *guard) sandboxEvent(event, launcher string, t *sandboxTrack, scope gateway.Scope, status string) {
	if g == nil {
		return
	}
	r := audit.Record{Event: event, Client: scope.Agent, Session: scope.Session, Server: launcher,
		Sandbox: t.id, Workspace: t.workspace, ExitStatus: status}
	if event == audit.EventSandboxStop || event == audit.EventSandboxCrash {
		r.Artifacts = t.artifacts
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
	}
	return ""
}

// list is the List hook: pins, scanner and policy decide what a client
// sees of a server's list. Answers are remembered per list and state.
func (g *guard) list(agent, server, kind string, items []gateway.Item) []gateway.Item {
	gs := g.servers[server]
	pk := pinKind(kind)
	if gs == nil || pk == "" || len(items) == 0 {
		return items
	}
	key := memoKey{agent, server, kind}
	gen := g.gen.Load()
	g.mu.Lock()
	if m, ok := g.memo[key]; ok && m.gen == gen && m.first == &items[0] && m.n == len(items) {
		g.mu.Unlock()
		return m.out
	}
	g.mu.Unlock()

	out := g.pinned(gs, pk, items)
	out = g.scanned(gs, pk, out)
	if kind == gateway.KindTools {
		out = slices.DeleteFunc(slices.Clone(out), func(it gateway.Item) bool {
			return !g.engine.Visible(policyClient(agent), server, it.Key)
		})
		g.noteNames(gs, items)
	}
	g.mu.Lock()
	g.memo[key] = memoEntry{gen: gen, first: &items[0], n: len(items), out: out}
	g.mu.Unlock()
	return out
}

// pinned applies the lock file; a failure hides everything (fail closed).
func (g *guard) pinned(gs *guardServer, kind string, items []gateway.Item) []gateway.Item {
	if gs.pin == config.PinOff {
		return items
	}
	in := make([]integrity.Item, len(items))
	for i, it := range items {
		in[i] = integrity.Item{Key: it.Key, Raw: it.Raw}
	}
	visible, changes, err := g.pins.Check(gs.name, gs.pin, kind, in)
	if err != nil {
		g.log.Error("checking pinned definitions; hiding the server's list", "server", gs.name, "kind", kind, "err", err)
		return nil
	}
	g.noteChanges(changes)
	keep := make(map[string]bool, len(visible))
	for _, it := range visible {
		keep[it.Key] = true
	}
	var out []gateway.Item
	for _, it := range items {
		if keep[it.Key] {
			out = append(out, it)
		}
	}
	return out
}

// noteChanges logs and audits each pin change once.
func (g *guard) noteChanges(changes []integrity.Change) {
	for _, ch := range changes {
		id := ch.Server + "\x00" + ch.Kind + "\x00" + ch.Key + "\x00" + ch.Status + "\x00" + ch.NewHash
		g.mu.Lock()
		seen := g.reported[id]
		g.reported[id] = true
		g.mu.Unlock()
		if seen {
			continue
		}
		level := slog.LevelWarn
		if ch.Status == "pinned" {
			level = slog.LevelInfo
		}
		g.log.Log(context.Background(), level, "tool definition "+ch.Status, "server", ch.Server, "kind", ch.Kind, "name", ch.Key,
			"hint", hintFor(ch))
		g.record(audit.Record{Event: audit.EventPin, Server: ch.Server, Tool: ch.Key,
			Decision: ch.Status, Detail: map[string]string{"kind": ch.Kind, "old": ch.OldHash, "new": ch.NewHash}})
	}
	g.offerTrust(changes)
}

func hintFor(ch integrity.Change) string {
	switch ch.Status {
	case "pinned", "removed":
		return ""
	}
	return fmt.Sprintf("hidden until `mcpbox trust %s/%s` (or `mcpbox approvals`)", ch.Server, ch.Key)
}

// scanned runs the description scanner; with scan: block, a definition
// with findings is hidden.
func (g *guard) scanned(gs *guardServer, kind string, items []gateway.Item) []gateway.Item {
	others := g.otherNames(gs)
	var out []gateway.Item
	for _, it := range items {
		findings := g.scanOne(gs, kind, it, others)
		if len(findings) > 0 && gs.scan == config.ScanBlock {
			continue
		}
		out = append(out, it)
	}
	return out
}

// scanOne scans a definition once per content and logs what it finds.
func (g *guard) scanOne(gs *guardServer, kind string, it gateway.Item, others []string) []integrity.Finding {
	h, err := integrity.Hash(kind, it.Raw)
	if err != nil {
		h = string(it.Raw)
	}
	g.mu.Lock()
	f, ok := g.scans[h]
	g.mu.Unlock()
	if ok {
		return f
	}
	f = integrity.ScanDefinition(kind, it.Raw, others)
	g.mu.Lock()
	g.scans[h] = f
	g.mu.Unlock()
	if len(f) > 0 {
		var rules []string
		for _, x := range f {
			rules = append(rules, x.Rule+"@"+x.Where)
		}
		g.log.Warn("description scanner findings", "server", gs.name, "kind", kind, "name", it.Key,
			"findings", strings.Join(rules, ","), "action", cmpOr(gs.scan, config.ScanWarn))
		g.record(audit.Record{Event: audit.EventScan, Server: gs.name, Tool: it.Key, Findings: rules,
			Decision: cmpOr(gs.scan, config.ScanWarn), Detail: map[string]string{"kind": kind}})
	}
	return f
}

// noteNames remembers a server's tool names, for the shadowing rule.
func (g *guard) noteNames(gs *guardServer, items []gateway.Item) {
	names := make([]string, 0, len(items))
	for _, it := range items {
		names = append(names, it.Key)
	}
	g.mu.Lock()
	g.names[gs.name] = names
	g.mu.Unlock()
}

// otherNames are the tool names of the other servers, bare and prefixed.
func (g *guard) otherNames(gs *guardServer) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for server, names := range g.names {
		if server == gs.name {
			continue
		}
		p := g.servers[server].prefix
		for _, n := range names {
			out = append(out, n)
			if p != "" {
				out = append(out, p+n)
			}
		}
	}
	return out
}

// changed tells the guard (and the clients) that what lists show changed.
func (g *guard) changed(server string) {
	g.gen.Add(1)
	if gw := g.gw.Load(); gw != nil {
		gw.ListChanged(server)
	}
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

// sandboxStarted registers a sandbox for call joins and audits its start;
// the returned func unregisters it. A nil guard does nothing.
func (g *guard) sandboxStarted(launcher string, scope gateway.Scope, t *sandboxTrack) func() {
	if g == nil {
		return func() {}
	}
	g.sandboxEvent(audit.EventSandboxStart, launcher, t, scope, "")
	return g.tracks.add(launcher, scope, t)
}

// sandboxEnded audits a sandbox's end: a stop, or a crash when it ended
// on its own with a failure.
func (g *guard) sandboxEnded(launcher string, scope gateway.Scope, t *sandboxTrack, status string, expected bool) {
	if g == nil {
		return
	}
	event := audit.EventSandboxStop
	if !expected {
		event = audit.EventSandboxCrash
	}
	g.sandboxEvent(event, launcher, t, scope, status)
}

// egressEvent audits one egress connection once it has ended.
func (g *guard) egressEvent(launcher string, scope gateway.Scope, t *sandboxTrack, ev egress.Event) {
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

// trust pins the pending definitions of server (key "" for all of them)
// and lets the clients see them.
func (g *guard) trust(server, key, who string) ([]integrity.Change, error) {
	if g.servers[server] == nil {
		return nil, fmt.Errorf("no server %q in this gateway", server)
	}
	changes, err := g.pins.Trust(server, key)
	if err != nil {
		return nil, err
	}
	for _, ch := range changes {
		g.record(audit.Record{Event: audit.EventTrust, Server: ch.Server, Tool: ch.Key, Approver: who, Decision: "trusted",
			Detail: map[string]string{"kind": ch.Kind, "old": ch.OldHash, "new": ch.NewHash}})
	}
	g.changed(server)
	return changes, nil
}

// offerTrust asks the approval channels about each pending change that
// is not being asked about already: a request that timed out is offered
// again at the next list, as long as the change is pending.
func (g *guard) offerTrust(changes []integrity.Change) {
	for _, ch := range changes {
		if ch.Status != "new" && ch.Status != "changed" {
			continue
		}
		id := ch.Server + "\x00" + ch.Kind + "\x00" + ch.Key + "\x00" + ch.NewHash
		g.mu.Lock()
		busy := g.asking[id]
		g.asking[id] = true
		g.mu.Unlock()
		if busy {
			continue
		}
		go func() {
			if !g.askTrust(ch) {
				return // decided: not asked again for this definition
			}
			g.mu.Lock()
			delete(g.asking, id)
			g.mu.Unlock()
			g.gen.Add(1) // the next list checks the pins again, and re-offers
		}()
	}
}

// askTrust offers a changed definition to the approval channels (the
// CLI and web: no client is calling): approved, it is trusted as by
// `mcpbox trust`; otherwise it stays hidden. It reports whether nobody
// answered (a timeout), so that it may be offered again.
func (g *guard) askTrust(ch integrity.Change) (unanswered bool) {
	key := ch.Key
	if ch.Kind != integrity.KindTool {
		key = ch.Kind + ":" + ch.Key
	}
	req := approval.Request{Kind: "trust", Server: ch.Server, Tool: key,
		Summary: fmt.Sprintf("%s definition %s (%s); `mcpbox trust %s/%s` shows the diff", ch.Kind, ch.Status, ch.NewHash, ch.Server, key)}
	d, err := g.broker.Ask(context.Background(), req, nil)
	if err != nil || !d.Allow {
		return err == nil && d.By == "timeout"
	}
	if _, err := g.trust(ch.Server, key, d.By); err != nil {
		g.log.Warn("trusting an approved definition", "server", ch.Server, "name", key, "err", err)
	}
	return false
}

// policyClient is the client name the policy knows an agent by: the
// stdio agent is "" (it is no configured client).
func policyClient(agent string) string {
	if agent == gateway.LocalAgent {
		return ""
	}
	return agent
}
