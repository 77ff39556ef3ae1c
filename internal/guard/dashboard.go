package guard

import (
	"errors"
	"slices"

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

func (w webBackend) Decide(id string, d approval.Decision) error {
	if !w.g.ChannelOn(config.ChannelWeb) {
		return errors.New("the web approval channel is off (approvals.channels)")
	}
	return w.g.Broker().Decide(id, d)
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
