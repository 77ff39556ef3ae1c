package approval

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// wait bounds every blocking step of a test.
const wait = 10 * time.Second

func openDB(t testing.TB) *sql.DB {
	t.Helper()
	return openDBAt(t, filepath.Join(t.TempDir(), "a.db"))
}

func openDBAt(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// audit records OnDecision calls.
type audit struct {
	mu  sync.Mutex
	got []decided // guarded by mu
}

type decided struct {
	Req Request
	D   Decision
}

func (a *audit) hook(r Request, d Decision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, decided{r, d})
}

func (a *audit) list() []decided {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]decided(nil), a.got...)
}

// newBroker opens a broker whose decisions go to the returned audit.
func newBroker(t testing.TB, db *sql.DB, timeout time.Duration) (*Broker, *audit) {
	t.Helper()
	a := &audit{}
	b, err := New(Options{DB: db, Timeout: timeout, OnDecision: a.hook})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, a
}

type answer struct {
	D   Decision
	Err error
}

// askAsync runs Ask in a goroutine.
func askAsync(ctx context.Context, b *Broker, req Request, e Elicitor) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		d, err := b.Ask(ctx, req, e)
		ch <- answer{d, err}
	}()
	return ch
}

// signal is an elicitor that reports on started when it is asked (so the
// request is pending) and then gives no answer until the Ask ends.
func signal(started chan<- string) Elicitor {
	return func(ctx context.Context, msg string, _ []string) (string, error) {
		started <- msg
		<-ctx.Done()
		return "", ctx.Err()
	}
}

func recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("nothing received within %v", wait)
		panic("unreachable")
	}
}

// holdOne asks req and returns its ID once it is pending, and its answer.
func holdOne(t testing.TB, b *Broker, req Request) (string, <-chan answer) {
	t.Helper()
	started := make(chan string, 1)
	ch := askAsync(context.Background(), b, req, signal(started))
	recv(t, started)
	p := b.Pending()
	if len(p) != 1 {
		t.Fatalf("Pending() = %d requests, want 1", len(p))
	}
	return p[0].ID, ch
}

// mustPend checks that req is not answered at once but pends; it denies it
// and returns.
func mustPend(t testing.TB, b *Broker, req Request) {
	t.Helper()
	id, ch := holdOne(t, b, req)
	if err := b.Decide(id, Decision{By: "test"}); err != nil {
		t.Fatal(err)
	}
	if a := recv(t, ch); a.Err != nil || a.D.Allow {
		t.Fatalf("after deny: %+v", a)
	}
}

func callReq() Request {
	return Request{Kind: KindCall, Client: "claude-desktop", Session: "s1", Server: "github", Tool: "create_pull_request",
		Sandbox: "sb1", Rule: "servers.github.tools.approve", Summary: `{repo: "octo/x"}`}
}

// storedStatus reads a request's row.
func storedStatus(t testing.TB, db *sql.DB, id string) (status, by string) {
	t.Helper()
	if err := db.QueryRow(`SELECT status, decided_by FROM approval_requests WHERE id = ?`, id).Scan(&status, &by); err != nil {
		t.Fatalf("reading %s: %v", id, err)
	}
	return status, by
}
