package guard

import (
	"errors"
	"slices"

	"mcpbox/internal/admin"
	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
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
