package guard

import (
	"fmt"

	"mcpbox/internal/audit"
	"mcpbox/internal/gateway"
)

// restarted audits the restart policy's decision after a server ended
// (its sandbox's end has its own sandbox_crash or sandbox_stop record).
func (g *Guard) restarted(ev gateway.RestartEvent) {
	r := audit.Record{Event: audit.EventRestart, Client: ev.Scope.Agent, Session: ev.Scope.Session,
		Server: ev.Server, Decision: "restart", Error: ev.Reason,
		Detail: map[string]string{"restart": fmt.Sprintf("%d of %d", ev.Restart, ev.Max), "delay": ev.Delay.String()}}
	if ev.GaveUp {
		r.Decision = "give_up"
		r.Detail = map[string]string{"why": ev.Why}
	}
	g.Record(r)
}
