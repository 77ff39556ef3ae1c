package approval

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSharedStoreKeepsOthersPending: a second gateway on the same state
// dir opens its broker (Shared) while the first holds a call for review:
// the request stays pending in the store, and is decided by the first.
// A broker that opens alone (not Shared) expires what was left pending.
func TestSharedStoreKeepsOthersPending(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	a, _ := newBroker(t, db, wait)
	id, ans := holdOne(t, a, callReq())

	b, err := New(Options{DB: db, Timeout: wait, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if st, _, _, err := a.store.status(ctx, id); err != nil || st != statusPending {
		t.Fatalf("after a shared broker opened, %s is %q (%v), want pending", id, st, err)
	}
	// b cannot release a's call, and says where it waits (not that it
	// was decided).
	if err := b.Decide(id, Decision{Allow: true, By: "web:admin"}); !errors.Is(err, ErrElsewhere) {
		t.Errorf("deciding at the other broker: %v, want ErrElsewhere", err)
	}
	if err := a.Decide(id, Decision{Allow: true, By: "cli:uid=0"}); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, ans); got.Err != nil || !got.D.Allow {
		t.Fatalf("Ask: %+v", got)
	}

	// Left pending by a process that ended: expired by the next lone one.
	if err := a.store.insertPending(ctx, Request{ID: "apr_left", Kind: KindCall, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{DB: db, Timeout: wait})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if st, _, _, _ := c.store.status(ctx, "apr_left"); st != statusExpired {
		t.Errorf("a request left pending is %q after a lone broker opened, want expired", st)
	}
}
