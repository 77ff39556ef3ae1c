package guard

import (
	"errors"
	"fmt"

	"mcpbox/internal/admin"
	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/integrity"
)

// Admin returns what the admin server (package admin) and the dashboard
// reach of a running gateway: the guard's approvals, pins and sandboxes,
// and the gateway's controls.
func (g *Guard) Admin(gw *gateway.Gateway) admin.Backend { return adminBackend{gw: gw, g: g} }

// adminBackend is the admin.Backend over a guard and its gateway.
type adminBackend struct {
	gw *gateway.Gateway
	g  *Guard
}

var _ admin.Backend = adminBackend{}

func (a adminBackend) Approvals() ([]approval.Request, []approval.Remembered) {
	return a.g.Approvals()
}

func (a adminBackend) Decide(id string, d approval.Decision) error {
	if !a.g.ChannelOn(config.ChannelCLI) {
		return errors.New("the cli approval channel is off (approvals.channels)")
	}
	if d.Via != "" && !a.g.ChannelOn(d.Via) {
		return fmt.Errorf("the %s approval channel is off at the instance that holds the request (its approvals.channels)", d.Via)
	}
	return a.g.Broker().Decide(id, d)
}

func (a adminBackend) Revoke(id, by string) error {
	if err := a.g.Broker().Revoke(id); err != nil {
		return err
	}
	a.g.Record(audit.Record{Event: audit.EventApproval, Decision: "revoked", Approver: by, Detail: map[string]string{"id": id}})
	return nil
}

func (a adminBackend) Pins(name string) ([]admin.PinChange, error) {
	changes, ok := a.g.PendingChanges(name)
	if !ok {
		return nil, fmt.Errorf("no server or tool %q in this gateway", name)
	}
	return a.named(changes), nil
}

func (a adminBackend) Trust(server, key, by string, hashes []string) ([]admin.PinChange, error) {
	changes, err := a.g.Trust(server, key, by, hashes)
	if err != nil {
		return nil, err
	}
	return a.named(changes), nil
}

// named renders pin changes with their diffs, client-visible names and
// the scanner's findings in them.
func (a adminBackend) named(cs []integrity.Change) []admin.PinChange {
	out := admin.Changes(cs)
	for i := range out {
		out[i].Name = a.g.ItemName(out[i].Server, out[i].Kind, out[i].Key)
		out[i].Findings, out[i].Blocked = a.g.changeFindings(cs[i])
	}
	return out
}

func (a adminBackend) Reload(by string) error {
	if err := a.g.ReloadPins(); err != nil {
		return err
	}
	a.g.Record(audit.Record{Event: audit.EventPolicyReload, Approver: by, Detail: map[string]string{"what": "lock file"}})
	return nil
}

func (a adminBackend) Sandboxes() []admin.Sandbox { return a.g.SandboxRows(a.gw) }

func (a adminBackend) Control(op, id, by string) error { return a.g.Control(a.gw, op, id, by) }

func (a adminBackend) Snapshot(id, path string) error { return a.g.Snapshot(a.gw, id, path) }

func (a adminBackend) Overlay(id string) (lower, upper string, ok bool) {
	t := a.g.Sandbox(id)
	if t == nil {
		return "", "", false
	}
	return t.Lower, t.Upper, true
}

func (a adminBackend) Refresh(server string) int { return a.gw.Refresh(server) }
