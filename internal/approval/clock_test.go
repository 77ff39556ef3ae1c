package approval

import (
	"context"
	"sync"
	"testing"
	"time"
)

// jumpingClock is a wall clock that someone sets a day forward, or back,
// every time it is read.
func jumpingClock(step time.Duration) func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(step)
		return t
	}
}

// TestTimeoutIgnoresClockJumps: Options.Now stamps requests and
// decisions, and the wall clock it reads may jump; how long a request
// waits is measured on the monotonic clock, so a jump neither expires a
// pending request early nor keeps it past its timeout.
func TestTimeoutIgnoresClockJumps(t *testing.T) {
	const timeout = 400 * time.Millisecond
	for _, step := range []time.Duration{24 * time.Hour, -24 * time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			newB := func(timeout time.Duration) *Broker {
				b, err := New(Options{DB: openDB(t), Timeout: timeout, Now: jumpingClock(step), OnDecision: (&audit{}).hook})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(b.Close)
				return b
			}
			// Not expired early: still pending, and decidable, after the
			// stamp clock moved days. The timeout here is wait (10 s), not
			// 400 ms: a day's jump would still expire it, and a loaded
			// host's pause between holdOne and Decide cannot.
			b := newB(wait)
			id, ch := holdOne(t, b, callReq())
			time.Sleep(timeout / 4)
			if err := b.Decide(id, Decision{Allow: true, By: "test"}); err != nil {
				t.Fatalf("Decide %v into a %v timeout, the stamp clock jumping %v a read: %v", timeout/4, wait, step, err)
			}
			if a := recv(t, ch); a.Err != nil || !a.D.Allow {
				t.Fatalf("Ask = %+v, want the allow", a)
			}
			// Not kept: denied by timeout after about the timeout.
			b = newB(timeout)
			start := time.Now()
			d, err := b.Ask(context.Background(), callReq(), nil)
			took := time.Since(start)
			if err != nil || d.Allow || d.By != "timeout" {
				t.Fatalf("Ask = %+v, %v; want a deny by timeout", d, err)
			}
			if took < timeout || took > timeout+2*time.Second {
				t.Errorf("the timeout denied after %v, want about %v", took, timeout)
			}
		})
	}
}
