package guard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
)

// The remembered approvals of a state dir while no serve runs on it: a
// decision remembered for always lives in the state dir's audit store and
// the next serve honours it, so it must be possible to see and revoke it
// without starting the gateway that would honour it first. Decisions
// remembered for a session end with their serve.

// RememberedAt lists the decisions remembered for always in the state
// dir, oldest first; none when it has no audit store yet. It only reads:
// the store is opened read-only.
func RememberedAt(stateDir string) ([]approval.Remembered, error) {
	path := filepath.Join(stateDir, auditFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err := StateDirOwned(stateDir); err != nil {
		return nil, err
	}
	r, err := audit.OpenReader(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return approval.RememberedIn(context.Background(), r.DB())
}

// RevokeAt forgets the decision id remembered in the state dir, with the
// audit record a serve's revoke writes (by: who revoked, "cli:uid=N");
// approval.ErrUnknown if there is none.
func RevokeAt(stateDir, id, by string) error {
	err := withStores(stateDir, func(st *audit.Store, b *approval.Broker) error {
		if err := b.Revoke(id); err != nil {
			return err
		}
		st.Add(audit.Record{Event: audit.EventApproval, Decision: "revoked", Approver: by, Detail: map[string]string{"id": id, "while": "no serve ran"}})
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("revoking %s: %w", id, approval.ErrUnknown)
	}
	return err
}

// withStores opens the state dir's audit store (never making one: an
// os.ErrNotExist error when it has none) and an approval broker on it
// that, as one of several, expires no pending request, runs f and closes
// both.
func withStores(stateDir string, f func(*audit.Store, *approval.Broker) error) error {
	path := filepath.Join(stateDir, auditFile)
	if _, err := os.Stat(path); err != nil {
		return err
	}
	// As serve does: not a state dir others may write (audit.Open also
	// refuses its files as links).
	if err := StateDirOwned(stateDir); err != nil {
		return err
	}
	st, err := audit.Open(audit.Options{Path: path})
	if err != nil {
		return fmt.Errorf("opening the audit store: %w", err)
	}
	b, err := approval.New(approval.Options{DB: st.DB(), Shared: true})
	if err != nil {
		st.Close()
		return fmt.Errorf("opening the approval store: %w", err)
	}
	err = f(st, b)
	b.Close()
	return errors.Join(err, st.Close())
}
