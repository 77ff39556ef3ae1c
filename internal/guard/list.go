package guard

// The List hook of the guard: what a client sees of a server's lists
// (pins, scanner, policy), and the trust of changed definitions.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/integrity"
)

// list is the List hook: pins, scanner and policy decide what a client
// sees of a server's list. Answers are remembered per list (gen, the
// gateway's number for it) and state.
func (g *Guard) list(agent, server, kind string, gen uint64, items []gateway.Item) []gateway.Item {
	gs := g.servers[server]
	pk := PinKind(kind)
	if gs == nil || pk == "" {
		return items
	}
	if kind == gateway.KindInstructions {
		// Asked once per session, and an empty list counts: it pins "no
		// instructions", so text that appears later is new.
		return g.scanned(gs, pk, items, g.pinned(gs, pk, items))
	}
	if len(items) == 0 {
		return items
	}
	key := memoKey{agent, server, kind}
	state := g.gen.Load()
	g.mu.Lock()
	if m, ok := g.memo[key]; ok && gen != 0 && m.state == state && m.list == gen {
		g.mu.Unlock()
		return m.out
	}
	g.mu.Unlock()

	out := g.scanned(gs, pk, items, g.pinned(gs, pk, items))
	if kind == gateway.KindTools {
		out = slices.DeleteFunc(slices.Clone(out), func(it gateway.Item) bool {
			return !g.engine.Visible(policyClient(agent), server, it.Key)
		})
		g.noteNames(gs, items)
		g.noteUnannotated(gs, out) // the tools clients see: not those hidden until trusted
	}
	g.mu.Lock()
	g.memo[key] = memoEntry{state: state, list: gen, out: out}
	g.mu.Unlock()
	return out
}

// pinned applies the lock file; a failure hides everything (fail closed).
func (g *Guard) pinned(gs *guardServer, kind string, items []gateway.Item) []gateway.Item {
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
	g.noteChanges(changes, gs.pin == config.PinWarn)
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

// noteChanges logs and audits each pin change once. Definitions pinned
// on first sight are one log line per server and kind (each is in the
// audit, and in the log at debug level); so are the ones hidden by one
// list when there are several (a new version of a package changes most of
// its tools at once), naming them; a single hidden change, or one that
// hides nothing, is a line of its own. shown: the server's pin is warn,
// which shows new and changed definitions, and the lines say so.
func (g *Guard) noteChanges(changes []integrity.Change, shown bool) {
	type scope struct{ server, kind string }
	var pinned, hiding []scope
	counts := map[scope]int{}
	hidden := map[scope][]integrity.Change{}
	var lines []integrity.Change // logged in the loop below, in order
	for _, ch := range changes {
		id := ch.Server + "\x00" + ch.Kind + "\x00" + ch.Key + "\x00" + ch.Status + "\x00" + ch.NewHash
		g.mu.Lock()
		if len(g.reported) >= maxRemembered {
			clear(g.reported)
		}
		seen := g.reported[id]
		g.reported[id] = true
		g.mu.Unlock()
		if seen {
			continue
		}
		k := scope{ch.Server, ch.Kind}
		switch ch.Status {
		case integrity.StatusPinned:
			if counts[k] == 0 {
				pinned = append(pinned, k)
			}
			counts[k]++
		case integrity.StatusNew, integrity.StatusChanged, integrity.StatusQuarantined:
			if len(hidden[k]) == 0 {
				hiding = append(hiding, k)
			}
			hidden[k] = append(hidden[k], ch)
		}
		lines = append(lines, ch)
		g.Record(audit.Record{Event: audit.EventPin, Server: ch.Server, Tool: ch.Key, Name: g.ItemName(ch.Server, ch.Kind, ch.Key),
			Decision: ch.Status, Detail: map[string]string{"kind": ch.Kind, "old": ch.OldHash, "new": ch.NewHash}})
	}
	for _, ch := range lines {
		level := slog.LevelWarn
		switch ch.Status {
		case integrity.StatusPinned:
			level = slog.LevelDebug
		case integrity.StatusRemoved, integrity.StatusVersion:
			// Nothing is hidden or changed for a client: the server no
			// longer lists it, or not to this client (servers list by
			// the client's capabilities); or it reports another version.
			level = slog.LevelInfo
		default:
			if len(hidden[scope{ch.Server, ch.Kind}]) > 1 {
				level = slog.LevelDebug // in the line below
			}
		}
		attrs := []any{"server", ch.Server, "kind", ch.Kind, "name", ch.Key}
		if h := hintFor(ch, shown); h != "" {
			attrs = append(attrs, "hint", h)
		}
		g.log.Log(context.Background(), level, ch.Kind+" definition "+ch.Status, attrs...)
	}
	for _, k := range pinned {
		g.log.Info("definitions pinned on first use", "server", k.server, "kind", k.kind, "count", counts[k], "lock", g.pins.Path())
	}
	for _, k := range hiding {
		chs := hidden[k]
		if len(chs) < 2 {
			continue
		}
		names := make([]string, 0, maxNamed)
		for _, ch := range chs[:min(len(chs), maxNamed)] {
			names = append(names, strconv.Quote(ch.Key)) // a name may hold ", "
		}
		if len(chs) > maxNamed {
			names = append(names, fmt.Sprintf("and %d more", len(chs)-maxNamed))
		}
		msg, hint := "hidden", fmt.Sprintf("hidden until trusted: `mcpbox trust %s --dry-run` shows them, `mcpbox trust %[1]s` trusts them all (or `mcpbox approvals`)", k.server)
		if shown {
			msg, hint = "shown (pin: warn)", fmt.Sprintf("`mcpbox trust %s --dry-run` shows them, `mcpbox trust %[1]s` records them", k.server)
		}
		g.log.Warn(k.kind+" definitions changed or new: "+msg, "server", k.server, "kind", k.kind, "count", len(chs),
			"names", strings.Join(names, ", "), "hint", hint)
	}
	g.offerTrust(changes)
}

// maxNamed bounds the names in a log line about several definitions.
const maxNamed = 10

// hintFor is what to do about ch; shown: the server's pin is warn, which
// shows it.
func hintFor(ch integrity.Change, shown bool) string {
	switch ch.Status {
	case integrity.StatusNew, integrity.StatusChanged, integrity.StatusQuarantined:
		key := integrity.TrustKey(ch.Kind, ch.Key)
		if shown {
			return fmt.Sprintf("shown (pin: warn); `mcpbox trust %s/%s` records it", ch.Server, key)
		}
		return fmt.Sprintf("hidden until `mcpbox trust %s/%s` (or `mcpbox approvals`)", ch.Server, key)
	}
	return ""
}

// scanned runs the description scanner over every definition the server
// offered, and returns those of visible without findings or, unless
// scan: block, with them. The hidden ones are scanned too: a change
// waiting for trust is logged and audited with its findings before a
// person decides, not after.
func (g *Guard) scanned(gs *guardServer, kind string, offered, visible []gateway.Item) []gateway.Item {
	others, othersKey := g.othersOf(gs)
	for _, it := range offered {
		g.scanOne(gs, kind, it, others, othersKey) // remembered for the loop below
	}
	var out []gateway.Item
	for _, it := range visible {
		findings := g.scanOne(gs, kind, it, others, othersKey)
		if len(findings) > 0 && gs.scan == config.ScanBlock {
			continue
		}
		out = append(out, it)
	}
	return out
}

// othersOf are the other servers' tool names (the shadowing rule's
// candidates) and a key of them: they come in as the servers are listed,
// so a scan's result holds only for the names it saw.
func (g *Guard) othersOf(gs *guardServer) ([]string, string) {
	others := g.otherNames(gs)
	sorted := slices.Sorted(slices.Values(others))
	sum := sha256.Sum256([]byte(strings.Join(sorted, "\x00")))
	return others, hex.EncodeToString(sum[:8])
}

// scanOne scans a definition once per content and logs what it finds.
func (g *Guard) scanOne(gs *guardServer, kind string, it gateway.Item, others []string, othersKey string) []integrity.Finding {
	sum := sha256.Sum256(it.Raw)
	h := kind + ":" + hex.EncodeToString(sum[:]) + ":" + othersKey
	g.mu.Lock()
	f, ok := g.scans[h]
	g.mu.Unlock()
	if ok {
		return f
	}
	f = integrity.ScanDefinition(kind, it.Raw, others)
	g.mu.Lock()
	if len(g.scans) >= maxRemembered {
		clear(g.scans) // a server churning definitions may not grow it
	}
	g.scans[h] = f
	reported := g.reported["scan\x00"+h]
	g.reported["scan\x00"+h] = true
	g.mu.Unlock()
	if len(f) > 0 && !reported {
		var rules []string
		for _, x := range f {
			rules = append(rules, x.Rule+"@"+x.Where)
		}
		g.log.Warn("description scanner findings", "server", gs.name, "kind", kind, "name", it.Key,
			"findings", strings.Join(rules, ","), "action", cmpOr(gs.scan, config.ScanWarn))
		g.Record(audit.Record{Event: audit.EventScan, Server: gs.name, Tool: it.Key, Name: ItemName(gs.name, gs.prefix, kind, it.Key), Findings: rules,
			Decision: cmpOr(gs.scan, config.ScanWarn), Detail: map[string]string{"kind": kind}})
	}
	return f
}

// noteUnannotated warns, once per tool, of the tools a server shows whose
// calls wait for review only because they leave an annotation of
// approve_annotations unset, which MCP takes as true
// (policy.Engine.Unannotated): the tools of one list in one line. A
// server written before annotations (server-github) has every call held
// so; the warning says why and how to let the harmless ones run.
func (g *Guard) noteUnannotated(gs *guardServer, items []gateway.Item) {
	g.mu.Lock()
	full := len(g.unannotated[gs.name]) >= maxWarnedTools
	g.mu.Unlock()
	if full {
		return
	}
	tools := make(map[string]map[string]any, len(items))
	for _, it := range items {
		var def struct {
			Annotations map[string]any `json:"annotations"`
		}
		_ = json.Unmarshal(it.Raw, &def)
		tools[it.Key] = def.Annotations
	}
	names, anns := g.engine.Unannotated(gs.name, tools)
	if len(names) == 0 {
		return
	}
	// Only the tools not warned of yet: a tool a server adds later gets a
	// warning of its own.
	g.mu.Lock()
	warned := g.unannotated[gs.name]
	if warned == nil {
		warned = map[nameHash]bool{}
		g.unannotated[gs.name] = warned
	}
	before := len(warned)
	names = slices.DeleteFunc(names, func(n string) bool { return warned[hashName(n)] })
	for _, n := range names[:min(len(names), maxWarnedTools-len(warned))] {
		warned[hashName(n)] = true
	}
	g.mu.Unlock()
	if len(names) == 0 {
		return
	}
	shown := slices.Clone(names[:min(len(names), maxNamed)])
	for i, n := range shown {
		shown[i] = strconv.Quote(n) // a name may hold ", "
	}
	if len(names) > maxNamed {
		shown = append(shown, fmt.Sprintf("and %d more", len(names)-maxNamed))
	}
	more := ""
	if before > 0 {
		more = "more "
	}
	which := fmt.Sprintf("%d %stools of server %s leave", len(names), more, gs.name)
	if len(names) == 1 {
		which = fmt.Sprintf("1 %stool of server %s leaves", more, gs.name)
	}
	g.log.Warn(which+" "+strings.Join(anns, " or ")+" unset, which MCP then takes as true, so calls of them wait for review",
		"server", gs.name, "names", strings.Join(shown, ", "),
		"hint", fmt.Sprintf("let the harmless ones run with rules under servers.%s.tools ({tool: NAME, action: allow}), or set approve_annotations: [] there to trust the server", gs.name))
}

// maxWarnedTools bounds the tools of one server noteUnannotated
// remembers having warned of: a server that lists ever new names does not
// grow the guard's memory. Past it, that server's tools get no warning.
const maxWarnedTools = 4096

// nameHash stands for a tool name in a set: its size does not depend on
// the name's.
type nameHash [16]byte

func hashName(name string) nameHash {
	sum := sha256.Sum256([]byte(name))
	return nameHash(sum[:16])
}

// noteNames remembers a server's tool names, for the shadowing rule.
// It warns, once each, of the server's allow and approve globs that
// match none of them (policy.Engine.Unmatched): a typo there is silent
// otherwise, the tool meant simply never shows.
func (g *Guard) noteNames(gs *guardServer, items []gateway.Item) {
	names := make([]string, 0, len(items))
	for _, it := range items {
		names = append(names, it.Key)
	}
	unmatched := g.engine.Unmatched(gs.name, names)
	g.mu.Lock()
	g.names[gs.name] = names
	var news []string
	for _, u := range unmatched {
		if !g.unmatched[u] {
			g.unmatched[u] = true
			news = append(news, u)
		}
	}
	g.mu.Unlock()
	if len(news) == 0 {
		return
	}
	shown := slices.Sorted(slices.Values(names))
	if len(shown) > 10 {
		shown = append(shown[:10], "...")
	}
	for i, n := range shown {
		if len(n) > 64 { // a server's name, of any length
			shown[i] = n[:64] + "..."
		}
	}
	for _, u := range news {
		g.log.Warn(fmt.Sprintf("%s matches none of server %s's %d tools (a typo, or a tool it does not offer yet?): %s", u, gs.name, len(names), strings.Join(shown, ", ")), "server", gs.name)
	}
}

// otherNames are the tool names of the other servers, bare and prefixed.
func (g *Guard) otherNames(gs *guardServer) []string {
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
func (g *Guard) changed(server string) {
	g.gen.Add(1)
	if gw := g.gw.Load(); gw != nil {
		gw.ListChanged(server)
	}
}

// trust pins the pending definitions of server (key "" for all of them)
// whose hashes are in want (what was shown to who decided), and lets the
// clients see them.
func (g *Guard) trust(server, key, who string, want []string) ([]integrity.Change, error) {
	if g.servers[server] == nil {
		return nil, fmt.Errorf("no server %q in this gateway", server)
	}
	if want == nil {
		want = []string{} // trust only what was shown
	}
	changes, err := g.pins.Trust(server, key, want)
	if err != nil {
		return nil, err
	}
	for _, ch := range changes {
		g.Record(audit.Record{Event: audit.EventTrust, Server: ch.Server, Tool: ch.Key, Name: g.ItemName(ch.Server, ch.Kind, ch.Key),
			Approver: who, Decision: "trusted",
			Detail: map[string]string{"kind": ch.Kind, "old": ch.OldHash, "new": ch.NewHash}})
	}
	g.withdrawStale()
	g.changed(server)
	return changes, nil
}

// trustAsk is an open trust request: the hash of the definition it
// offers, and what withdraws it.
type trustAsk struct {
	hash   string
	cancel context.CancelCauseFunc
}

// errTrustWithdrawn withdraws a trust request whose change is no longer
// pending as offered.
var errTrustWithdrawn = errors.New("the definition was trusted meanwhile, or changed again")

func trustID(ch integrity.Change) string { return ch.Server + "\x00" + ch.Kind + "\x00" + ch.Key }

// offerTrust asks the approval channels about each pending change that
// is not being asked about already. A trust request has no timeout (no
// call waits on it): it stays until someone decides it, or is withdrawn
// when its change is no longer pending as offered (withdrawStale).
func (g *Guard) offerTrust(changes []integrity.Change) {
	if !g.channels[config.ChannelCLI] && !g.channels[config.ChannelWeb] {
		return // a trust request goes to neither client: nobody could answer
	}
	g.withdrawStale()
	for _, ch := range changes {
		switch ch.Status {
		case integrity.StatusNew, integrity.StatusChanged, integrity.StatusQuarantined:
		default:
			continue
		}
		id := trustID(ch)
		g.mu.Lock()
		open := 0
		for k := range g.asking {
			if strings.HasPrefix(k, ch.Server+"\x00") {
				open++
			}
		}
		// One request per definition, a few per server: a server that
		// churns its definitions must not bury the calls waiting for review.
		skip := g.asking[id] != nil || g.denied[id] == ch.NewHash || open >= maxTrustRequests
		var ask *trustAsk
		var ctx context.Context
		if !skip {
			ask = &trustAsk{hash: ch.NewHash}
			ctx, ask.cancel = context.WithCancelCause(context.Background())
			g.asking[id] = ask
		}
		g.mu.Unlock()
		if skip {
			continue
		}
		go func() {
			outcome := g.askTrust(ctx, ch)
			ask.cancel(nil)
			g.mu.Lock()
			if g.asking[id] == ask {
				delete(g.asking, id)
			}
			if outcome == trustDenied {
				if len(g.denied) >= maxRemembered {
					clear(g.denied)
				}
				g.denied[id] = ch.NewHash
			}
			g.mu.Unlock()
			switch outcome {
			case trustAgain:
				g.gen.Add(1) // the next list checks the pins again, and re-offers
			case trustWithdrawn:
				g.offerTrust(g.pins.Pending(ch.Server)) // what is pending now, if anything
			}
		}()
	}
}

// withdrawStale withdraws the open trust requests whose definition is no
// longer pending with the hash they offer: trusted by `mcpbox trust`, the
// dashboard or another gateway, or changed again. Their requests leave
// `mcpbox approvals`, audited as cancelled, rather than linger until
// someone approves a change that is gone.
func (g *Guard) withdrawStale() {
	pending := map[string]string{}
	for _, ch := range g.pins.Pending("") {
		pending[trustID(ch)] = ch.NewHash
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, a := range g.asking {
		if pending[id] != a.hash {
			a.cancel(errTrustWithdrawn)
		}
	}
}

// changeFindings are the description scanner's findings in a change's
// new definition, for the person who decides on it; blocked says that
// the server's scan: block hides it even once trusted.
func (g *Guard) changeFindings(ch integrity.Change) (findings []string, blocked bool) {
	gs := g.servers[ch.Server]
	if gs == nil || ch.New == nil {
		return nil, false
	}
	// Remembered, as scanOne's results are: every view of the pending
	// changes (the dashboard refreshes on each approval event) asks.
	others, othersKey := g.othersOf(gs)
	h := "change:" + ch.Kind + ":" + ch.NewHash + ":" + othersKey
	g.mu.Lock()
	found, ok := g.scans[h]
	g.mu.Unlock()
	if !ok {
		found = integrity.ScanDefinition(ch.Kind, ch.New, others)
		g.mu.Lock()
		if len(g.scans) >= maxRemembered {
			clear(g.scans)
		}
		g.scans[h] = found
		g.mu.Unlock()
	}
	for _, f := range found {
		// Where and Message come escaped (the definition's own property
		// names included): fit for a terminal.
		findings = append(findings, fmt.Sprintf("%s [%s] at %s: %s", f.Rule, f.Severity, f.Where, f.Message))
	}
	return findings, len(findings) > 0 && gs.scan == config.ScanBlock
}

// maxTrustRequests bounds the open trust requests of one server.
const maxTrustRequests = 16

// Outcomes of a trust request.
const (
	trustDone      = iota // trusted
	trustDenied           // a human said no: not asked again for this definition
	trustAgain            // nobody answered, or the definition changed meanwhile
	trustWithdrawn        // its change is no longer pending as offered
)

// askTrust offers a changed definition to the approval channels (the
// CLI and web: no client is calling): approved, it is trusted as by
// `mcpbox trust`, if it is still the definition offered; otherwise it
// stays hidden.
func (g *Guard) askTrust(ctx context.Context, ch integrity.Change) int {
	key := integrity.TrustKey(ch.Kind, ch.Key)
	summary := fmt.Sprintf("%s definition %s (%s); `mcpbox trust %s/%s` shows the diff", ch.Kind, ch.Status, ch.NewHash, ch.Server, key)
	if findings, blocked := g.changeFindings(ch); len(findings) > 0 {
		summary += "; the description scanner finds: " + strings.Join(findings, "; ")
		if blocked {
			summary += " (scan: block: it stays hidden even if trusted)"
		}
	}
	req := approval.Request{Kind: "trust", Server: ch.Server, Tool: key, Name: g.ItemName(ch.Server, ch.Kind, ch.Key), Summary: summary}
	d, err := g.broker.Ask(ctx, req, nil)
	switch {
	case err == nil && d.By == approval.ByCancelled && errors.Is(context.Cause(ctx), errTrustWithdrawn):
		return trustWithdrawn
	case err == nil && !d.Allow && (d.By == "timeout" || d.By == approval.ByCancelled):
		return trustAgain
	case err != nil || !d.Allow:
		return trustDenied
	}
	if _, err := g.trust(ch.Server, key, d.By, []string{ch.NewHash}); err != nil {
		g.log.Warn("trusting an approved definition", "server", ch.Server, "name", key, "err", err)
		return trustAgain
	}
	return trustDone
}

// maxRemembered bounds the guard's memory of scanned definitions and of
// changes already logged: past it they are forgotten (and logged again).
const maxRemembered = 10000
