package approval

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestDecideOnceAsksAgain(t *testing.T) {
	db := openDB(t)
	b, a := newBroker(t, db, wait)
	id, ch := holdOne(t, b, callReq())
	if !regexp.MustCompile(`^apr_[a-z2-7]{12}$`).MatchString(id) {
		t.Errorf("id %q is not apr_ and 12 base32 characters", id)
	}
	if err := b.Decide(id, Decision{Allow: true, By: "cli:uid=1000"}); err != nil {
		t.Fatal(err)
	}
	want := Decision{Allow: true, Scope: ScopeOnce, By: "cli:uid=1000"}
	if got := recv(t, ch); got.Err != nil || got.D != want {
		t.Fatalf("Ask = %+v, want %+v", got, want)
	}
	if st, by := storedStatus(t, db, id); st != statusAllowed || by != "cli:uid=1000" {
		t.Errorf("stored %q by %q", st, by)
	}
	mustPend(t, b, callReq()) // once is not remembered
	if got := b.Remembered(); len(got) != 0 {
		t.Errorf("Remembered() = %+v, want none", got)
	}
	if n := len(a.list()); n != 2 {
		t.Errorf("OnDecision called %d times, want 2", n)
	}
}

func TestTimeoutDenies(t *testing.T) {
	db := openDB(t)
	b, a := newBroker(t, db, 50*time.Millisecond)
	d, err := b.Ask(context.Background(), callReq(), nil)
	if err != nil || d.Allow || d.By != "timeout" {
		t.Fatalf("Ask = %+v, %v; want a deny by timeout", d, err)
	}
	got := a.list()
	if len(got) != 1 || got[0].D != d {
		t.Fatalf("audit = %+v", got)
	}
	if st, by := storedStatus(t, db, got[0].Req.ID); st != statusDenied || by != "timeout" {
		t.Errorf("stored %q by %q", st, by)
	}
	// Deciding it after says it timed out, not only "already decided".
	if err := b.Decide(got[0].Req.ID, Decision{Allow: true, By: "web"}); !errors.Is(err, ErrDecided) || !strings.Contains(err.Error(), " timed out (no decision within 50ms) and its call was denied") {
		t.Errorf("Decide after timeout = %v, want ErrDecided saying it timed out", err)
	}
	if err := b.Decide("", Decision{Allow: true, By: "web"}); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "no request ID given") {
		t.Errorf("Decide of no ID = %v", err)
	}
}

func TestContextCancelDenies(t *testing.T) {
	b, a := newBroker(t, openDB(t), wait)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan string, 1)
	ch := askAsync(ctx, b, callReq(), signal(started))
	recv(t, started)
	cancel()
	if got := recv(t, ch); got.Err != nil || got.D.Allow || got.D.By != "cancelled" {
		t.Fatalf("Ask = %+v, want a deny by cancelled", got)
	}
	if n := len(a.list()); n != 1 {
		t.Errorf("OnDecision called %d times, want 1", n)
	}
	if p := b.Pending(); len(p) != 0 {
		t.Errorf("Pending() = %+v after cancel", p)
	}
}

func TestCloseDenies(t *testing.T) {
	b, a := newBroker(t, openDB(t), wait)
	_, ch := holdOne(t, b, callReq())
	b.Close()
	if got := recv(t, ch); got.D.Allow || got.D.By != "cancelled" {
		t.Fatalf("Ask = %+v, want a deny by cancelled", got)
	}
	d, err := b.Ask(context.Background(), callReq(), nil)
	if err != nil || d.Allow || d.By != "cancelled" {
		t.Fatalf("Ask after Close = %+v, %v", d, err)
	}
	if n := len(a.list()); n != 2 {
		t.Errorf("OnDecision called %d times, want 2", n)
	}
}

// answerWith is an elicitor that answers choice (or fails with err) and
// checks what it was offered.
func answerWith(t *testing.T, choice string, err error) Elicitor {
	return func(_ context.Context, msg string, choices []string) (string, error) {
		if diff := cmp.Diff([]string{"once", "session", "deny"}, choices); diff != "" {
			t.Errorf("choices (-want +got):\n%s", diff)
		}
		if !strings.HasPrefix(msg, "Allow github.create_pull_request (client claude-desktop)") {
			t.Errorf("message %q", msg)
		}
		return choice, err
	}
}

func TestElicitorAnswers(t *testing.T) {
	for _, tc := range []struct {
		choice     string
		allow      bool
		scope      string
		remembered bool
	}{
		{"once", true, ScopeOnce, false},
		{"session", true, ScopeSession, true},
		{"deny", false, ScopeOnce, false},
	} {
		t.Run(tc.choice, func(t *testing.T) {
			b, a := newBroker(t, openDB(t), wait)
			d, err := b.Ask(context.Background(), callReq(), answerWith(t, tc.choice, nil))
			want := Decision{Allow: tc.allow, Scope: tc.scope, By: "elicitation:claude-desktop"}
			if err != nil || d != want {
				t.Fatalf("Ask = %+v, %v; want %+v", d, err, want)
			}
			if n := len(a.list()); n != 1 {
				t.Errorf("OnDecision called %d times", n)
			}
			if got := len(b.Remembered()) == 1; got != tc.remembered {
				t.Errorf("remembered = %v, want %v", got, tc.remembered)
			}
		})
	}
}

// An elicitor that fails or answers nothing leaves the decision to the
// other channels.
func TestElicitorNoAnswerFallsBackToDecide(t *testing.T) {
	for _, tc := range []struct {
		name   string
		choice string
		err    error
	}{
		{"error", "", errors.New("client does not support elicitation")},
		{"empty", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := newBroker(t, openDB(t), wait)
			answered := make(chan struct{})
			e := func(ctx context.Context, msg string, c []string) (string, error) {
				defer close(answered)
				return answerWith(t, tc.choice, tc.err)(ctx, msg, c)
			}
			ch := askAsync(context.Background(), b, callReq(), e)
			<-answered
			p := b.Pending()
			if len(p) != 1 {
				t.Fatalf("Pending() = %+v after the elicitor gave no answer", p)
			}
			if err := b.Decide(p[0].ID, Decision{Allow: true, By: "cli:uid=1000"}); err != nil {
				t.Fatal(err)
			}
			if got := recv(t, ch); !got.D.Allow || got.D.By != "cli:uid=1000" {
				t.Fatalf("Ask = %+v", got)
			}
			if len(b.Remembered()) != 0 {
				t.Errorf("something was remembered")
			}
		})
	}
}

// An answer that is not one of the choices ("always" was not offered;
// garbage) denies at once, with the answer in the reason, rather than
// leaving the person who gave it without word until the timeout.
func TestElicitorAnswerOutsideChoicesDenies(t *testing.T) {
	for _, choice := range []string{"always", "yes please", "null", "once\x1b[2J"} {
		t.Run(choice, func(t *testing.T) {
			b, a := newBroker(t, openDB(t), wait)
			start := time.Now()
			got := recv(t, askAsync(context.Background(), b, callReq(), answerWith(t, choice, nil)))
			if got.Err != nil || got.D.Allow || got.D.By != "elicitation:claude-desktop" ||
				!strings.Contains(got.D.Reason, "which is not one of once, session, deny") {
				t.Fatalf("Ask = %+v, want a deny by the elicitation naming the choices", got)
			}
			if strings.ContainsRune(got.D.Reason, 0x1b) {
				t.Errorf("reason %q carries the answer's control character", got.D.Reason)
			}
			if el := time.Since(start); el > wait/2 {
				t.Errorf("denied after %v: waited for the timeout", el)
			}
			if n := len(a.list()); n != 1 {
				t.Errorf("OnDecision called %d times, want 1", n)
			}
			if len(b.Remembered()) != 0 {
				t.Errorf("something was remembered")
			}
		})
	}
}

// With the client's elicitation as the only channel, a request nobody can
// answer is denied at once, not after the timeout (wait, 10 s here).
func TestElicitationOnlyDeniesWithoutAnswer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		elicit   Elicitor
		by, why  string
		recorded bool // stored as a request (the client was asked)
	}{
		{"no elicitor", nil, ByNoChannel, "no approval channel", false},
		{"error", answerWith(t, "", errors.New("client went away")), "elicitation:claude-desktop", NoAnswer, true},
		{"dismissed", answerWith(t, "", nil), "elicitation:claude-desktop", NoAnswer, true},
		{"always is not offered", answerWith(t, "always", nil), "elicitation:claude-desktop", `answered "always", which is not one of once, session, deny`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			a := &audit{}
			b, err := New(Options{DB: db, Timeout: wait, OnDecision: a.hook, ElicitationOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(b.Close)
			start := time.Now()
			got := recv(t, askAsync(context.Background(), b, callReq(), tc.elicit))
			if got.Err != nil || got.D.Allow || got.D.By != tc.by || !strings.Contains(got.D.Reason, tc.why) {
				t.Fatalf("Ask = %+v, want a deny by %s (%s)", got, tc.by, tc.why)
			}
			if el := time.Since(start); el > wait/2 {
				t.Errorf("denied after %v: waited for the timeout", el)
			}
			if n := len(a.list()); n != 1 {
				t.Errorf("OnDecision called %d times, want 1", n)
			}
			var rows int
			if err := db.QueryRow(`SELECT count(*) FROM approval_requests WHERE status = ?`, statusDenied).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if (rows == 1) != tc.recorded {
				t.Errorf("%d requests stored as denied, want recorded %v", rows, tc.recorded)
			}
		})
	}
	// An answer still counts.
	b, err := New(Options{DB: openDB(t), Timeout: wait, ElicitationOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if got := recv(t, askAsync(context.Background(), b, callReq(), answerWith(t, ScopeOnce, nil))); !got.D.Allow {
		t.Errorf("Ask with an answer = %+v", got)
	}
}

// The elicitor and Decide answer at the same moment: exactly one wins, the
// audit hook runs once, and the loser learns it lost.
func TestRaceElicitorDecide(t *testing.T) {
	b, a := newBroker(t, openDB(t), wait)
	for i := range 30 {
		release := make(chan struct{})
		started := make(chan struct{})
		e := func(ctx context.Context, _ string, _ []string) (string, error) {
			close(started)
			<-release
			return "deny", nil
		}
		req := callReq()
		req.Session = fmt.Sprint("race", i)
		ch := askAsync(context.Background(), b, req, e)
		<-started
		id := b.Pending()[0].ID
		var decideErr error
		var wg sync.WaitGroup
		wg.Go(func() { decideErr = b.Decide(id, Decision{Allow: true, By: "cli:uid=1000"}) })
		close(release)
		wg.Wait()
		got := recv(t, ch)
		switch {
		case decideErr == nil && (!got.D.Allow || got.D.By != "cli:uid=1000"):
			t.Fatalf("Decide won but Ask = %+v", got)
		case errors.Is(decideErr, ErrDecided) && (got.D.Allow || got.D.By != "elicitation:claude-desktop"):
			t.Fatalf("elicitor won but Ask = %+v", got)
		case decideErr != nil && !errors.Is(decideErr, ErrDecided):
			t.Fatalf("Decide = %v", decideErr)
		}
		if n := len(a.list()); n != i+1 {
			t.Fatalf("after %d requests OnDecision was called %d times", i+1, n)
		}
	}
}

func TestDecideErrors(t *testing.T) {
	b, _ := newBroker(t, openDB(t), wait)
	if err := b.Decide("apr_nosuchthing0", Decision{Allow: true, By: "web"}); !errors.Is(err, ErrUnknown) {
		t.Errorf("unknown id: %v", err)
	}
	id, ch := holdOne(t, b, callReq())
	if err := b.Decide(id, Decision{Allow: true, Scope: "forever", By: "web"}); !errors.Is(err, ErrBadScope) {
		t.Errorf("bad scope: %v", err)
	}
	if err := b.Decide(id, Decision{Allow: true}); !errors.Is(err, ErrNoDecider) {
		t.Errorf("no By: %v", err)
	}
	if err := b.Decide(id, Decision{By: "web"}); err != nil {
		t.Fatal(err)
	}
	recv(t, ch)
	if err := b.Decide(id, Decision{Allow: true, By: "web"}); !errors.Is(err, ErrDecided) {
		t.Errorf("second decision: %v", err)
	}
}

func TestAskRejectsBadKind(t *testing.T) {
	b, a := newBroker(t, openDB(t), wait)
	req := callReq()
	req.Kind = "exec"
	d, err := b.Ask(context.Background(), req, nil)
	if !errors.Is(err, ErrBadKind) || d.Allow {
		t.Fatalf("Ask = %+v, %v", d, err)
	}
	if len(a.list()) != 0 {
		t.Errorf("an undecided request was audited")
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := New(Options{}); !errors.Is(err, ErrNoDB) {
		t.Errorf("no DB: %v", err)
	}
	if _, err := New(Options{DB: openDB(t), Timeout: -time.Second}); err == nil {
		t.Errorf("negative timeout accepted")
	}
}

// A broker that died with a request pending: the next one expires it.
func TestPendingExpiredOnNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	crashed, _ := newBroker(t, openDBAt(t, path), wait)
	id, _ := holdOne(t, crashed, callReq())

	db := openDBAt(t, path)
	if st, _ := storedStatus(t, db, id); st != statusPending {
		t.Fatalf("before New: %q", st)
	}
	b, _ := newBroker(t, db, wait)
	if st, by := storedStatus(t, db, id); st != statusExpired || by != "restart" {
		t.Errorf("after New: %q by %q, want expired", st, by)
	}
	if err := b.Decide(id, Decision{Allow: true, By: "web"}); !errors.Is(err, ErrDecided) || !strings.Contains(err.Error(), "expired (the process that held the call ended)") {
		t.Errorf("Decide of an expired request = %v, want ErrDecided saying why", err)
	}
	if p := b.Pending(); len(p) != 0 {
		t.Errorf("new broker has pending %+v", p)
	}
}

func TestRequestCleanedAndCut(t *testing.T) {
	db := openDB(t)
	b, _ := newBroker(t, db, wait)
	req := callReq()
	req.Client = "evil\x1b[2J\u202eclient\n"
	req.Summary = strings.Repeat("é", 2*MaxSummary)
	id, ch := holdOne(t, b, req)
	p := b.Pending()[0]
	if p.Client != "evil?[2J?client?" {
		t.Errorf("Client = %q", p.Client)
	}
	if n := utf8.RuneCountInString(p.Summary); n != MaxSummary || !strings.HasSuffix(p.Summary, "…") {
		t.Errorf("Summary has %d characters, want %d ending in …", n, MaxSummary)
	}
	var stored string
	if err := db.QueryRow(`SELECT summary FROM approval_requests WHERE id = ?`, id).Scan(&stored); err != nil || stored != p.Summary {
		t.Errorf("stored summary %d bytes, %v", len(stored), err)
	}
	if m := b.Message(p); strings.ContainsAny(m, "\n\x1b\u202e") {
		t.Errorf("Message %q is not one clean line", m)
	}
	b.Decide(id, Decision{By: "test"})
	recv(t, ch)
}

// TestDeciderCleanedAndCut: who decided is recorded and told without
// control, format or separator characters, and cut (a dashboard user's
// name comes from elsewhere when another instance passes a decision on).
func TestDeciderCleanedAndCut(t *testing.T) {
	db := openDB(t)
	b, _ := newBroker(t, db, wait)
	id, ch := holdOne(t, b, callReq())
	if err := b.Decide(id, Decision{Allow: true, By: "cli:uid=0 for web:a\u2028b\x1b[2Jc\u202e\u2029d" + strings.Repeat("é", MaxDecider)}); err != nil {
		t.Fatal(err)
	}
	got := recv(t, ch)
	want := "cli:uid=0 for web:a?b?[2Jc??d"
	if !strings.HasPrefix(got.D.By, want) || utf8.RuneCountInString(got.D.By) != MaxDecider || !strings.HasSuffix(got.D.By, "…") {
		t.Fatalf("By = %q, want %q and é cut to %d characters", got.D.By, want, MaxDecider)
	}
	if _, by := storedStatus(t, db, id); by != got.D.By {
		t.Errorf("stored by %q, told %q", by, got.D.By)
	}
}

func TestMessage(t *testing.T) {
	b, _ := newBroker(t, openDB(t), wait)
	for _, tc := range []struct {
		req  Request
		want string
	}{
		{callReq(), `Allow github.create_pull_request (client claude-desktop) — {repo: "octo/x"}? Rule: servers.github.tools.approve`},
		{Request{Kind: KindTrust, Server: "fs", Tool: "read"}, `Trust the changed definition of fs.read?`},
		{Request{Server: "a", Tool: "b\nc", Client: "x"}, `Allow a.b?c (client x)?`},
	} {
		if got := b.Message(tc.req); got != tc.want {
			t.Errorf("Message(%+v)\n got %q\nwant %q", tc.req, got, tc.want)
		}
	}
}

// 50 calls held at once, all decided through Decide, under -race.
func TestConcurrentAsks(t *testing.T) {
	const n = 50
	b, a := newBroker(t, openDB(t), wait)
	started := make(chan string, n)
	answers := make([]<-chan answer, n)
	for i := range n {
		req := callReq()
		req.Tool = fmt.Sprint("tool", i)
		answers[i] = askAsync(context.Background(), b, req, signal(started))
	}
	for range n {
		recv(t, started)
	}
	pending := b.Pending()
	if len(pending) != n {
		t.Fatalf("Pending() = %d, want %d", len(pending), n)
	}
	allowTool := map[string]bool{}
	var wg sync.WaitGroup
	for i, p := range pending {
		allow := i%2 == 0
		allowTool[p.Tool] = allow
		wg.Go(func() {
			if err := b.Decide(p.ID, Decision{Allow: allow, By: "cli:uid=1000"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i, ch := range answers {
		got := recv(t, ch)
		if want := allowTool[fmt.Sprint("tool", i)]; got.Err != nil || got.D.Allow != want {
			t.Errorf("tool%d: Ask = %+v, want allow %v", i, got, want)
		}
	}
	if got := len(a.list()); got != n {
		t.Errorf("OnDecision called %d times, want %d", got, n)
	}
	if p := b.Pending(); len(p) != 0 {
		t.Errorf("still pending: %d", len(p))
	}
}

// When the decision cannot be recorded the call is denied, whoever allowed
// it, and both sides learn why.
func TestStorageFailureDenies(t *testing.T) {
	db := openDB(t)
	b, a := newBroker(t, db, wait)
	id, ch := holdOne(t, b, callReq())
	db.Close()
	err := b.Decide(id, Decision{Allow: true, Scope: ScopeAlways, By: "cli:uid=1000"})
	if err == nil || errors.Is(err, ErrUnknown) || errors.Is(err, ErrDecided) {
		t.Fatalf("Decide with a closed database = %v, want the storage error", err)
	}
	got := recv(t, ch)
	if got.Err == nil || got.D.Allow {
		t.Fatalf("Ask = %+v, want a deny with an error", got)
	}
	if audited := a.list(); len(audited) != 1 || audited[0].D.Allow {
		t.Errorf("audit = %+v, want one deny", audited)
	}
	if d, err := b.Ask(context.Background(), callReq(), nil); err == nil || d.Allow {
		t.Errorf("Ask with a closed database = %+v, %v", d, err)
	}
}

// TestCancelledCannotBeApproved attacks an approval that outlives its
// request: once the call's context ends (its client cancelled it, its
// session ended), an approve must fail and say the request is gone, and
// the request is stored as cancelled with the reason.
func TestCancelledCannotBeApproved(t *testing.T) {
	sessionEnded := errors.New("the client ended its session")
	for _, tc := range []struct {
		name   string
		cancel func(context.CancelCauseFunc)
		reason string
	}{
		{"client cancel", func(c context.CancelCauseFunc) { c(nil) }, "the client cancelled the request"},
		{"session end", func(c context.CancelCauseFunc) { c(sessionEnded) }, sessionEnded.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			b, a := newBroker(t, db, wait)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			started := make(chan string, 1)
			ch := askAsync(ctx, b, callReq(), signal(started))
			recv(t, started)
			id := b.Pending()[0].ID
			tc.cancel(cancel)
			if got := recv(t, ch); got.Err != nil || got.D.Allow || got.D.By != ByCancelled || got.D.Reason != tc.reason {
				t.Fatalf("Ask = %+v, want a deny by %s for %q", got, ByCancelled, tc.reason)
			}
			err := b.Decide(id, Decision{Allow: true, By: "cli:uid=0"})
			if !errors.Is(err, ErrCancelled) || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("Decide after cancel = %v, want %v naming %s and %q", err, ErrCancelled, id, tc.reason)
			}
			if st, by := storedStatus(t, db, id); st != statusCancelled || by != ByCancelled {
				t.Errorf("stored %s by %s, want %s by %s", st, by, statusCancelled, ByCancelled)
			}
			if got := a.list(); len(got) != 1 || got[0].D.Allow || got[0].D.Reason != tc.reason {
				t.Errorf("OnDecision saw %+v, want one cancel with its reason", got)
			}
		})
	}
}

// TestDecideWhileCancelling: an approve that comes while a cancelled
// request is being recorded (out of the pending list, not yet stored as
// cancelled) waits for that, and fails saying it was cancelled, not
// "already decided" (the window TestGuardApprovalCancelledByClient hit).
func TestDecideWhileCancelling(t *testing.T) {
	db := openDB(t)
	var armed atomic.Bool
	inFinish, release := make(chan struct{}), make(chan struct{})
	b, err := New(Options{DB: db, Timeout: wait, Now: func() time.Time {
		if armed.CompareAndSwap(true, false) {
			close(inFinish) // the cancellation's finish: the store not yet written
			<-release
		}
		return time.Now()
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan string, 1)
	ch := askAsync(ctx, b, callReq(), signal(started))
	recv(t, started)
	id := b.Pending()[0].ID
	armed.Store(true)
	cancel()
	select {
	case <-inFinish:
	case <-time.After(wait):
		t.Fatal("the cancellation did not reach its finish")
	}
	decided := make(chan error, 1)
	go func() { decided <- b.Decide(id, Decision{Allow: true, By: "cli:uid=0"}) }()
	time.Sleep(50 * time.Millisecond) // let Decide find the request settling
	close(release)
	select {
	case err := <-decided:
		if !errors.Is(err, ErrCancelled) {
			t.Fatalf("Decide during the cancellation = %v, want %v", err, ErrCancelled)
		}
	case <-time.After(wait):
		t.Fatal("Decide did not return")
	}
	if got := recv(t, ch); got.D.Allow || got.D.By != ByCancelled {
		t.Fatalf("Ask = %+v, want the cancellation", got)
	}
}

// TestTrustRequestHasNoTimeout: no call waits on a trust request, so it
// stays until decided (here: past several call timeouts).
func TestTrustRequestHasNoTimeout(t *testing.T) {
	b, _ := newBroker(t, openDB(t), 20*time.Millisecond)
	req := Request{Kind: KindTrust, Server: "github", Tool: "create_issue", Summary: "tool definition changed"}
	ch := askAsync(context.Background(), b, req, nil)
	time.Sleep(200 * time.Millisecond)
	p := b.Pending()
	if len(p) != 1 {
		t.Fatalf("Pending() = %+v after 10 call timeouts, want the trust request", p)
	}
	if err := b.Decide(p[0].ID, Decision{Allow: true, By: "cli:uid=0"}); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, ch); !got.D.Allow || got.D.By != "cli:uid=0" {
		t.Fatalf("Ask = %+v", got)
	}
}
