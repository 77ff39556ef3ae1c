package cli

import (
	"errors"

	"mcpbox/internal/admin"
	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/integrity"
)

// pinChange is a definition change as the admin commands show it.
type pinChange = admin.PinChange

// showChanges renders pin changes with their diffs.
func showChanges(cs []integrity.Change) []pinChange { return admin.Changes(cs) }

// adminBackend is what the admin server (package admin) reaches of the
// running gateway: the guard's approvals, pins and sandboxes, and the
// gateway's controls.
type adminBackend struct {
	gw *gateway.Gateway
	g  *guard
}

var _ admin.Backend = adminBackend{}

func (a adminBackend) Approvals() ([]approval.Request, []approval.Remembered) {
	return a.g.approvals()
}

func (a adminBackend) Decide(id string, d approval.Decision) error {
	if !a.g.channels[config.ChannelCLI] {
		return errors.New("the cli approval channel is off (approvals.channels)")
	}
	return a.g.broker.Decide(id, d)
}

func (a adminBackend) Revoke(id, by string) error {
	if err := a.g.broker.Revoke(id); err != nil {
		return err
	}
	a.g.record(audit.Record{Event: audit.EventApproval, Decision: "revoked", Approver: by, Detail: map[string]string{"id": id}})
	return nil
}

func (a adminBackend) Pins(server string) []admin.PinChange {
	return a.g.namedChanges(a.g.pendingChanges(server))
}

func (a adminBackend) Trust(server, key, by string, hashes []string) ([]admin.PinChange, error) {
	changes, err := a.g.trust(server, key, by, hashes)
	if err != nil {
		return nil, err
	}
	return a.g.namedChanges(changes), nil
}

func (a adminBackend) Reload(by string) error {
	if err := a.g.pins.Reload(); err != nil {
		return err
	}
	a.g.changed("")
	a.g.record(audit.Record{Event: audit.EventPolicyReload, Approver: by, Detail: map[string]string{"what": "lock file"}})
	return nil
}

func (a adminBackend) Sandboxes() []admin.Sandbox { return a.g.sandboxRows(a.gw) }

func (a adminBackend) Control(op, id string) error { return a.g.control(a.gw, op, id) }

func (a adminBackend) Snapshot(id, path string) error { return a.g.snapshot(a.gw, id, path) }

func (a adminBackend) Overlay(id string) (lower, upper string, ok bool) {
	t := a.g.tracks.find(id)
	if t == nil {
		return "", "", false
	}
	return t.lower, t.upper, true
}

func (a adminBackend) Refresh(server string) int { return a.gw.Refresh(server) }
