package policy

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mcpbox/internal/config"
)

const limitYAML = `version: 1
servers:
  a:
    command: [a]
    tools: {rate_limit: {per_minute: 60, burst: 3}}
  b:
    command: [b]
    tools: {rate_limit: {per_client_tool: 6}}
  c:
    command: [c]
    tools: {rate_limit: {per_minute: 60, per_client_tool: 30, burst: 1}}
  e:
    command: [e]
    tools: {rate_limit: {per_client_tool: 1}}
  free:
    command: [free]
`

// clock is a settable time source for the limiter.
type clock struct{ t atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.t.Load()) }
func (c *clock) advance(d time.Duration) { c.t.Add(int64(d)) }

func newTestLimiter(t testing.TB) (*Limiter, *clock) {
	t.Helper()
	c, err := config.Load("l.yaml", []byte(limitYAML))
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{}
	clk.t.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return NewLimiter(c, clk.now), clk
}

type allowResult struct {
	ok    bool
	retry time.Duration
	limit string
}

func allow(l *Limiter, client, server, tool string) allowResult {
	ok, retry, limit := l.Allow(client, server, tool)
	return allowResult{ok, retry, limit}
}

func expect(t *testing.T, what string, got, want allowResult) {
	t.Helper()
	if got != want {
		t.Errorf("%s: Allow = %+v, want %+v", what, got, want)
	}
}

var okResult = allowResult{ok: true}

func TestLimiterBurstAndRefill(t *testing.T) {
	l, clk := newTestLimiter(t)
	const pm = "servers.a.tools.rate_limit.per_minute"
	for i := range 3 {
		expect(t, fmt.Sprintf("burst call %d", i), allow(l, "x", "a", "t"), okResult)
	}
	// 60 a minute is one a second: the empty bucket has a token in 1s.
	expect(t, "4th call", allow(l, "y", "a", "u"), allowResult{false, time.Second, pm})
	clk.advance(400 * time.Millisecond)
	expect(t, "after 0.4s", allow(l, "x", "a", "t"), allowResult{false, 600 * time.Millisecond, pm})
	clk.advance(600 * time.Millisecond)
	expect(t, "after 1s", allow(l, "x", "a", "t"), okResult)
	expect(t, "one token only", allow(l, "x", "a", "t"), allowResult{false, time.Second, pm})
	// Refill stops at the burst size.
	clk.advance(time.Hour)
	for i := range 3 {
		expect(t, fmt.Sprintf("refilled call %d", i), allow(l, "x", "a", "t"), okResult)
	}
	expect(t, "capped at burst", allow(l, "x", "a", "t"), allowResult{false, time.Second, pm})
}

func TestLimiterPerClientIsolation(t *testing.T) {
	l, clk := newTestLimiter(t)
	const pct = "servers.b.tools.rate_limit.per_client_tool"
	for i := range 6 { // burst 0: the per-minute figure
		expect(t, fmt.Sprintf("call %d", i), allow(l, "x", "b", "t"), okResult)
	}
	// 6 a minute is one per 10s.
	expect(t, "7th", allow(l, "x", "b", "t"), allowResult{false, 10 * time.Second, pct})
	expect(t, "other client", allow(l, "y", "b", "t"), okResult)
	expect(t, "other tool", allow(l, "x", "b", "u"), okResult)
	expect(t, "other server", allow(l, "x", "free", "t"), okResult)
	expect(t, "unknown server", allow(l, "x", "nope", "t"), okResult)
	clk.advance(10 * time.Second)
	expect(t, "after 10s", allow(l, "x", "b", "t"), okResult)
}

// TestLimiterAtomic: a call refused by one bucket takes no token from the
// other. Server c: both buckets hold 1 token; the server's refills in 1s,
// each client's in 2s.
func TestLimiterAtomic(t *testing.T) {
	const (
		pm  = "servers.c.tools.rate_limit.per_minute"
		pct = "servers.c.tools.rate_limit.per_client_tool"
	)
	t.Run("server empty", func(t *testing.T) {
		l, clk := newTestLimiter(t)
		expect(t, "y", allow(l, "y", "c", "t"), okResult)
		expect(t, "x refused by server", allow(l, "x", "c", "t"), allowResult{false, time.Second, pm})
		clk.advance(time.Second)
		// Had the refused call taken x's token, x would wait another second.
		expect(t, "x after 1s", allow(l, "x", "c", "t"), okResult)
	})
	t.Run("client empty", func(t *testing.T) {
		l, clk := newTestLimiter(t)
		expect(t, "x", allow(l, "x", "c", "t"), okResult)
		// Both empty: the longer wait is reported.
		expect(t, "x both empty", allow(l, "x", "c", "t"), allowResult{false, 2 * time.Second, pct})
		clk.advance(time.Second)
		expect(t, "x refused by client", allow(l, "x", "c", "t"), allowResult{false, time.Second, pct})
		// Had the refused call taken the server's token, y would be refused.
		expect(t, "y", allow(l, "y", "c", "t"), okResult)
	})
}

func TestLimiterEviction(t *testing.T) {
	l, clk := newTestLimiter(t)
	sl := l.servers["e"]
	for i := range MaxClientToolBuckets + 5 {
		expect(t, "first call", allow(l, fmt.Sprint("c", i), "e", "t"), okResult)
	}
	if n := len(sl.clients); n != MaxClientToolBuckets || sl.lru.Len() != n {
		t.Errorf("%d buckets (%d in the list), want %d", n, sl.lru.Len(), MaxClientToolBuckets)
	}
	// The most recent client is still limited.
	last := fmt.Sprint("c", MaxClientToolBuckets+4)
	if r := allow(l, last, "e", "t"); r.ok {
		t.Errorf("%s not limited after eviction of others", last)
	}
	// Once every bucket is full again, a new key drops the idle ones.
	clk.advance(time.Minute)
	expect(t, "new key", allow(l, "new", "e", "t"), okResult)
	if n := len(sl.clients); n != 1 {
		t.Errorf("%d buckets after idling, want 1", n)
	}
}

func TestLimiterConcurrent(t *testing.T) {
	l, _ := newTestLimiter(t) // the clock stands still: no refill
	var wg sync.WaitGroup
	var granted atomic.Int32
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, _, _ := l.Allow(fmt.Sprint("c", i%5), "a", "t"); ok {
				granted.Add(1)
			}
		}()
	}
	wg.Wait()
	if g := granted.Load(); g != 3 {
		t.Errorf("%d calls granted, want the burst of 3", g)
	}
}

func TestLimiterRealClock(t *testing.T) {
	c, err := config.Load("l.yaml", []byte(limitYAML))
	if err != nil {
		t.Fatal(err)
	}
	l := NewLimiter(c, nil)
	if ok, _, _ := l.Allow("x", "b", "t"); !ok {
		t.Error("first call refused")
	}
}
