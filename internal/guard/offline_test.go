package guard

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
)

// TestRevokeWhileNoServeRuns: a decision remembered for always is listed
// and revoked from the state dir's store while no serve runs, with an
// audit record; a state dir without a store has none and gets none.
func TestRevokeWhileNoServeRuns(t *testing.T) {
	dir := t.TempDir()
	if m, err := RememberedAt(dir); err != nil || len(m) != 0 {
		t.Fatalf("a state dir without a store: %v, %v", m, err)
	}
	if err := RevokeAt(dir, "apr_aaaaaaaaaaaa", "cli:uid=0"); !errors.Is(err, approval.ErrUnknown) {
		t.Fatalf("revoking in a state dir without a store: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, auditFile)); err == nil {
		t.Fatal("listing or revoking made an audit store")
	}

	// A serve's broker remembers a decision for always, and stops.
	st, err := audit.Open(audit.Options{Path: filepath.Join(dir, auditFile)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := approval.New(approval.Options{DB: st.DB()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := b.Ask(ctx, approval.Request{Client: "_local", Session: "s1", Server: "fs", Tool: "write_file"}, nil)
		done <- err
	}()
	for len(b.Pending()) == 0 {
		if ctx.Err() != nil {
			t.Fatal("no pending request")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := b.Decide(b.Pending()[0].ID, approval.Decision{Allow: true, Scope: approval.ScopeAlways, By: "cli:uid=0"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	m, err := RememberedAt(dir)
	if err != nil || len(m) != 1 || m[0].Tool != "write_file" {
		t.Fatalf("remembered while no serve runs: %+v, %v", m, err)
	}
	if err := RevokeAt(dir, m[0].ID, "cli:uid=0"); err != nil {
		t.Fatal(err)
	}
	if m, err := RememberedAt(dir); err != nil || len(m) != 0 {
		t.Fatalf("remembered after the revoke: %+v, %v", m, err)
	}
	if err := RevokeAt(dir, m[0].ID, "cli:uid=0"); !errors.Is(err, approval.ErrUnknown) {
		t.Errorf("revoking it again: %v, want ErrUnknown", err)
	}
	r, err := audit.OpenReader(filepath.Join(dir, auditFile))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	recs, err := r.Query(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rec := range recs {
		found = found || rec.Event == audit.EventApproval && rec.Decision == "revoked" && rec.Detail["id"] == m[0].ID && rec.Approver == "cli:uid=0"
	}
	if !found {
		t.Errorf("no audit record of the revoke in %+v", recs)
	}
}

// TestOfflineStoreNotThroughLinks: a state dir shaped by someone else (a
// cloned repository's state_dir with its audit files planted as links)
// is not written through: revoking there is refused and the link's target
// stays as it was.
func TestOfflineStoreNotThroughLinks(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, auditFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, auditFile+".head")); err != nil {
		t.Fatal(err)
	}
	if err := RevokeAt(dir, "apr_aaaaaaaaaaaa", "cli:uid=0"); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("revoking through a planted link: %v, want a refusal", err)
	}
	RememberedAt(dir) // reads only, whatever it finds
	if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
		t.Errorf("the link's target now holds %q", b)
	}
	// A state dir others may write is refused as serve refuses it.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := RememberedAt(dir); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("a state dir writable by others: %v", err)
	}
}
