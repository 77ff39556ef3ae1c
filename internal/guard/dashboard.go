package guard

import (
	"errors"
	"os"
	"slices"
	"sync"
	"time"

	"mcpbox/internal/admin"
	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/integrity"
)

// AuditStore is the guard's audit store, for readers of the trail (the
// dashboard's calls page, its live events, the metrics). They must only
// read it: every record is written by the guard.
func (g *Guard) AuditStore() *audit.Store { return g.store }

// KnownTool says whether server's last tool list held tool (as the
// server names it, as audit records do): a bound on the metrics' labels.
func (g *Guard) KnownTool(server, tool string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Contains(g.names[server], tool)
}

// WebAdmin is Admin for the dashboard: the same back-end, but a decision
// made there needs the web approval channel (approvals.channels: web)
// rather than the cli one.
func (g *Guard) WebAdmin(gw *gateway.Gateway) admin.Backend {
	return webBackend{adminBackend{gw: gw, g: g}}
}

type webBackend struct{ adminBackend }

// otherInstances reaches the state dir's serve instances but this one.
func (g *Guard) otherInstances() admin.Client {
	return admin.Client{StateDir: g.dir, Self: os.Getpid()}
}

// Approvals are this instance's pending requests and those waiting at
// the state dir's other instances (each with its Where): a stdio
// client's call waits at its own serve, whose dashboard nobody may have
// open.
func (w webBackend) Approvals() ([]approval.Request, []approval.Remembered) {
	pending, remembered := w.adminBackend.Approvals()
	return append(pending, w.g.othersPending()...), remembered
}

// Decide decides a request of this instance, or passes the decision on
// to the other instance that holds it, through its admin socket (its
// cli channel) for the dashboard's user, Via web: that instance's
// channels must allow both.
func (w webBackend) Decide(id string, d approval.Decision) error {
	if !w.g.ChannelOn(config.ChannelWeb) {
		return errors.New("the web approval channel is off (approvals.channels)")
	}
	err := w.g.Broker().Decide(id, d)
	if errors.Is(err, approval.ErrElsewhere) {
		_, err = w.g.otherInstances().DecideFor(id, d.Allow, d.Scope, config.ChannelWeb, d.By)
		w.g.others.decided(id)
	}
	return err
}

// Trust pins here, then has the state dir's other instances read the
// lock file again: their clients were hidden the same change, which
// mcpbox trust (sent to every instance) shows again everywhere, and the
// dashboard is this instance's. An instance that cannot be told is
// logged (its next start reads the pin).
func (w webBackend) Trust(server, key, by string, hashes []string) ([]admin.PinChange, error) {
	changes, err := w.adminBackend.Trust(server, key, by, hashes)
	if err != nil {
		return nil, err
	}
	if err := w.g.otherInstances().Reload(); err != nil && !errors.Is(err, admin.ErrNoInstance) {
		w.g.log.Warn("telling the other instances of the state dir to read the trusted pins", "err", err)
	}
	return changes, nil
}

// othersTTL is how long a listing of the other instances' requests is
// used before it is read again, in the background: every open dashboard
// page polls twice a second. One older than othersStale (a quiet spell:
// no page open) is read again before it is used.
const othersTTL, othersStale = 2 * time.Second, 10 * time.Second

// othersCache is the last listing of the other instances' requests.
type othersCache struct {
	mu         sync.Mutex
	at         time.Time // when pending was read
	refreshing bool      // a reading is under way
	pending    []approval.Request
}

// decided drops id, which this instance passed a decision on for, and
// has the listing read again.
func (c *othersCache) decided(id string) {
	c.mu.Lock()
	c.pending = slices.DeleteFunc(c.pending, func(p approval.Request) bool { return p.ID == id })
	c.at = time.Time{}
	c.mu.Unlock()
}

// othersPending are the requests waiting at the state dir's other
// instances, as last read: a listing older than othersTTL is read again
// in the background, so that an instance slow to answer (stopped, stuck:
// up to admin's listing wait) holds up no page and no event stream; one
// older than othersStale, before it is used.
func (g *Guard) othersPending() []approval.Request {
	c := &g.others
	c.mu.Lock()
	defer c.mu.Unlock()
	age := time.Since(c.at)
	if age < othersTTL || c.refreshing {
		return slices.Clone(c.pending)
	}
	c.refreshing = true
	read := func() {
		a, _ := g.otherInstances().Approvals() // none running: none
		var pending []approval.Request
		for _, p := range a.Pending {
			p.Where = a.Where[p.ID]
			pending = append(pending, p)
		}
		c.mu.Lock()
		c.pending, c.at, c.refreshing = pending, time.Now(), false
		c.mu.Unlock()
	}
	if age < othersStale {
		go read()
		return slices.Clone(c.pending)
	}
	c.mu.Unlock()
	read()
	c.mu.Lock()
	return slices.Clone(c.pending)
}

// Pinned is what the integrity page shows of the lock file: its path and
// the pins of each configured server, whoever made them (first use here
// or in another instance, mcpbox pin, a trust).
func (g *Guard) Pinned() (lock string, servers []integrity.ServerPins) {
	for _, s := range g.pins.Pinned() {
		if g.servers[s.Server] != nil {
			servers = append(servers, s)
		}
	}
	return g.pins.Path(), servers
}

// ToolInfo is what the approvals page shows of the tool a request calls:
// the annotations of its pinned definition (untrusted hints, as the
// server declared them; nil when none is pinned) and its pin state:
// "new" or "changed" while a change waits for trust, "pinned", or "off"
// (pin: off). It reads the lock file.
func (g *Guard) ToolInfo(server, tool string) (ann map[string]any, pin string) {
	gs := g.servers[server]
	if gs == nil {
		return nil, ""
	}
	for _, c := range g.pins.Pending(server) {
		if c.Kind == integrity.KindTool && c.Key == tool {
			pin = c.Status
		}
	}
	l, err := integrity.ReadLock(g.pins.Path())
	if err == nil && l.Servers[server] != nil {
		if p, ok := l.Servers[server].Tools[tool]; ok {
			ann = annotations(p.Definition)
			if pin == "" {
				pin = integrity.StatusPinned
			}
		}
	}
	if gs.pin == config.PinOff {
		pin = config.PinOff
	}
	return ann, pin
}
