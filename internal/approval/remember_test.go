package approval

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSessionRemembered(t *testing.T) {
	b, a := newBroker(t, openDB(t), wait)
	id, ch := holdOne(t, b, callReq())
	if err := b.Decide(id, Decision{Allow: true, Scope: ScopeSession, By: "cli:uid=1000"}); err != nil {
		t.Fatal(err)
	}
	recv(t, ch)

	d, err := b.Ask(context.Background(), callReq(), nil)
	want := Decision{Allow: true, Scope: ScopeSession, By: "remembered:" + id}
	if err != nil || d != want {
		t.Fatalf("second Ask = %+v, %v; want %+v", d, err, want)
	}
	got := a.list()
	if len(got) != 2 || got[1].D != want || got[1].Req.ID == id || got[1].Req.Tool != "create_pull_request" {
		t.Errorf("audit = %+v", got)
	}

	other := callReq()
	other.Session = "s2"
	mustPend(t, b, other)
	other = callReq()
	other.Tool = "merge_pull_request"
	mustPend(t, b, other)

	b.EndSession("s1")
	mustPend(t, b, callReq())
}

func TestSessionScopeWithoutSessionIsOnce(t *testing.T) {
	b, _ := newBroker(t, openDB(t), wait)
	req := callReq()
	req.Session = ""
	id, ch := holdOne(t, b, req)
	if err := b.Decide(id, Decision{Allow: true, Scope: ScopeSession, By: "web"}); err != nil {
		t.Fatal(err)
	}
	recv(t, ch)
	mustPend(t, b, req)
}

func TestAlwaysSurvivesNewBrokerAndRevoke(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	db := openDBAt(t, path)
	b, _ := newBroker(t, db, wait)
	id, ch := holdOne(t, b, callReq())
	if err := b.Decide(id, Decision{Allow: true, Scope: ScopeAlways, By: "cli:uid=1000"}); err != nil {
		t.Fatal(err)
	}
	recv(t, ch)
	b.Close()

	b2, a2 := newBroker(t, openDBAt(t, path), wait)
	req := callReq()
	req.Session = "another session"
	d, err := b2.Ask(context.Background(), req, nil)
	if want := (Decision{Allow: true, Scope: ScopeAlways, By: "remembered:" + id}); err != nil || d != want {
		t.Fatalf("Ask on a new broker = %+v, %v; want %+v", d, err, want)
	}
	if n := len(a2.list()); n != 1 {
		t.Errorf("OnDecision called %d times for a remembered answer, want 1", n)
	}
	rem := b2.Remembered()
	want := []Remembered{{ID: id, Client: "claude-desktop", Server: "github", Tool: "create_pull_request", Scope: ScopeAlways, By: "cli:uid=1000"}}
	if diff := cmp.Diff(want, rem, cmpIgnoreTime); diff != "" {
		t.Errorf("Remembered() (-want +got):\n%s", diff)
	}
	other := callReq()
	other.Client = "cursor"
	mustPend(t, b2, other)

	if err := b2.Revoke(id); err != nil {
		t.Fatal(err)
	}
	if err := b2.Revoke(id); !errors.Is(err, ErrUnknown) {
		t.Errorf("second Revoke = %v, want ErrUnknown", err)
	}
	mustPend(t, b2, callReq())
}

var cmpIgnoreTime = cmp.Comparer(func(x, y time.Time) bool { return true })

func TestRevokeSession(t *testing.T) {
	b, _ := newBroker(t, openDB(t), wait)
	id, ch := holdOne(t, b, callReq())
	if err := b.Decide(id, Decision{Allow: true, Scope: ScopeSession, By: "web"}); err != nil {
		t.Fatal(err)
	}
	recv(t, ch)
	rem := b.Remembered()
	if len(rem) != 1 || rem[0].ID != id || rem[0].Session != "s1" || rem[0].Scope != ScopeSession {
		t.Fatalf("Remembered() = %+v", rem)
	}
	if err := b.Revoke(id); err != nil {
		t.Fatal(err)
	}
	mustPend(t, b, callReq())
}

func TestDenyNotRemembered(t *testing.T) {
	b, _ := newBroker(t, openDB(t), wait)
	id, ch := holdOne(t, b, callReq())
	if err := b.Decide(id, Decision{Allow: false, Scope: ScopeAlways, By: "web", Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	want := Decision{Scope: ScopeOnce, By: "web", Reason: "no"}
	if got := recv(t, ch); got.D != want {
		t.Fatalf("Ask = %+v, want %+v", got.D, want)
	}
	if got := b.Remembered(); len(got) != 0 {
		t.Errorf("Remembered() = %+v, want none", got)
	}
	mustPend(t, b, callReq())
}

// TestTrustNotRemembered: a trust request is allowed once; a session or
// always allow is refused and leaves the request for a right answer, and
// nothing is remembered either way.
func TestTrustNotRemembered(t *testing.T) {
	b, _ := newBroker(t, openDB(t), wait)
	req := callReq()
	req.Kind = KindTrust
	id, ch := holdOne(t, b, req)
	for _, scope := range []string{ScopeSession, ScopeAlways} {
		if err := b.Decide(id, Decision{Allow: true, Scope: scope, By: "web"}); !errors.Is(err, ErrBadScope) {
			t.Fatalf("Decide(%s) = %v, want ErrBadScope", scope, err)
		}
	}
	if p := b.Pending(); len(p) != 1 || p[0].ID != id {
		t.Fatalf("Pending() = %+v after refused scopes, want %s still", p, id)
	}
	if err := b.Decide(id, Decision{Allow: true, By: "web"}); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, ch); !got.D.Allow || got.D.Scope != ScopeOnce {
		t.Fatalf("Ask = %+v, want an allow once", got.D)
	}
	mustPend(t, b, req)
	mustPend(t, b, callReq()) // nor does it allow calls

	// A call allowed always does not make its definition trusted.
	id, ch = holdOne(t, b, callReq())
	if err := b.Decide(id, Decision{Allow: true, Scope: ScopeAlways, By: "web"}); err != nil {
		t.Fatal(err)
	}
	recv(t, ch)
	mustPend(t, b, req)
}
