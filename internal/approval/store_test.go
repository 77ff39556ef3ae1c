package approval

import (
	"context"
	"testing"
	"time"
)

// TestOldRequestsPruned: decided requests (and their argument summaries)
// older than keepDecided are deleted when a broker opens the store;
// recent ones stay.
func TestOldRequestsPruned(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	s, err := openStore(ctx, db, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-keepDecided - time.Hour)
	for i, when := range []time.Time{old, time.Now()} {
		r := Request{ID: []string{"apr_old", "apr_new"}[i], Time: when, Kind: KindCall, Summary: "{path: string(9)}"}
		if err := s.insertPending(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// A restart expires both, then prunes the old one.
	if _, err := openStore(ctx, db, time.Now(), false); err != nil {
		t.Fatal(err)
	}
	var ids []string
	rows, err := db.QueryContext(ctx, `SELECT id FROM approval_requests ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		rows.Scan(&id)
		ids = append(ids, id)
	}
	if len(ids) != 1 || ids[0] != "apr_new" {
		t.Fatalf("requests left: %v, want [apr_new]", ids)
	}
}
