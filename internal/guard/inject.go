package guard

import (
	"strconv"

	"mcpbox/internal/audit"
	"mcpbox/internal/credinject"
	"mcpbox/internal/gateway"
	"mcpbox/internal/track"
)

// secretEvents maps a credinject.Event's Kind to its audit event.
var secretEvents = map[string]string{
	"inject":       audit.EventSecretInject,
	"exfiltration": audit.EventSecretExfiltration,
	"refused":      audit.EventSecretRefused,
}

// SecretEvent audits one substitution or refusal of a secret added at the
// egress proxy (launch.SecretObserver): the secret's name, host, port and
// where, never a value: the launcher redacted the event's host, where
// and reason, in any case (launch.redactSecretEvent), as it does an
// egress event's. Refusals are recorded with Decision "deny". A nil
// guard does nothing.
func (g *Guard) SecretEvent(launcher string, scope gateway.Scope, t *track.Sandbox, ev credinject.Event) {
	if g == nil {
		return
	}
	event, ok := secretEvents[ev.Kind]
	if !ok {
		event = audit.EventSecretRefused
	}
	decision := "allow"
	switch {
	case event != audit.EventSecretInject:
		decision = "deny"
		if t != nil {
			// The call in flight lists it, and the domain as denied
			// (track.DetailSecretsRefused).
			t.SecretRefused(ev.Credential, ev.Host, ev.Port, ev.Time)
		}
	case t != nil:
		// The call in flight lists it too (track.DetailSecrets).
		t.SecretInjected(ev.Credential, ev.Host, ev.Port, ev.Time)
	}
	d := map[string]string{"secret": ev.Credential, "host": ev.Host, "port": strconv.Itoa(ev.Port)}
	if ev.Where != "" {
		d["where"] = ev.Where
	}
	if ev.Reason != "" {
		d["reason"] = ev.Reason
	}
	g.Record(audit.Record{Time: ev.Time, Event: event, Client: scope.Agent, Session: scope.Session,
		Server: launcher, Sandbox: t.ID, Workspace: t.Workspace, Decision: decision,
		Domains: []audit.Domain{{Host: ev.Host, Port: ev.Port, Decision: decision}}, Detail: d})
}
