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

// TestScopedAllowSettlesWaitingCalls: an allow for the session also
// allows the same tool's calls already waiting in that session (recorded
// once, by remembered:ID); always also those of other sessions of the
// client. Another tool's and another client's calls keep waiting.
func TestScopedAllowSettlesWaitingCalls(t *testing.T) {
	db := openDB(t)
	b, _ := newBroker(t, db, wait)
	reqs := map[string]Request{}
	for name, edit := range map[string]func(*Request){
		"first": func(*Request) {}, "same": func(*Request) {},
		"other-session": func(r *Request) { r.Session = "s2" },
		"other-tool":    func(r *Request) { r.Tool = "merge_pull_request" },
		"other-client":  func(r *Request) { r.Client = "cursor" },
	} {
		r := callReq()
		r.Summary = name
		edit(&r)
		reqs[name] = r
	}
	started := make(chan string, len(reqs))
	answers := map[string]<-chan answer{}
	for name, r := range reqs {
		answers[name] = askAsync(context.Background(), b, r, signal(started))
	}
	for range reqs {
		recv(t, started)
	}
	ids := map[string]string{}
	for _, p := range b.Pending() {
		ids[p.Summary] = p.ID
	}
	if len(ids) != len(reqs) {
		t.Fatalf("pending: %v", ids)
	}
	waiting := func(names ...string) {
		t.Helper()
		got := map[string]bool{}
		for _, p := range b.Pending() {
			got[p.Summary] = true
		}
		if len(got) != len(names) {
			t.Fatalf("waiting: %v, want %v", got, names)
		}
		for _, n := range names {
			if !got[n] {
				t.Fatalf("waiting: %v, want %v", got, names)
			}
		}
	}

	if err := b.Decide(ids["first"], Decision{Allow: true, Scope: ScopeSession, By: "web"}); err != nil {
		t.Fatal(err)
	}
	if a := recv(t, answers["same"]); !a.D.Allow || a.D.Scope != ScopeOnce || a.D.By != "remembered:"+ids["first"] {
		t.Fatalf("the same session's waiting call: %+v", a)
	}
	if st, by := storedStatus(t, db, ids["same"]); by != "remembered:"+ids["first"] {
		t.Errorf("stored %s by %s", st, by)
	}
	waiting("other-session", "other-tool", "other-client")

	id, ch := ids["other-session"], answers["other-session"]
	r := callReq()
	r.Session = "s3"
	ch3 := askAsync(context.Background(), b, r, signal(started))
	recv(t, started)
	if err := b.Decide(id, Decision{Allow: true, Scope: ScopeAlways, By: "web"}); err != nil {
		t.Fatal(err)
	}
	recv(t, ch)
	if a := recv(t, ch3); !a.D.Allow || a.D.By != "remembered:"+id {
		t.Fatalf("another session's waiting call after always: %+v", a)
	}
	waiting("other-tool", "other-client")
}
