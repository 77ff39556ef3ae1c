package egress

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

func limitedSession(t *testing.T, l Limits) *session {
	t.Helper()
	p, err := New(Options{Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	c1, c2 := net.Pipe()
	t.Cleanup(func() { c1.Close(); c2.Close() })
	return newSession(p, c1, time.Now())
}

// spentOf is what s has spent or holds for writes, and the proxy's.
func spentOf(s *session) (conn, total int64) {
	s.p.meterMu.Lock()
	defer s.p.meterMu.Unlock()
	return s.meter.spent + s.meter.pending - s.meter.short, s.p.meter.spent + s.p.meter.pending - s.p.meter.short
}

// TestMeterNoDoubleSpend: directions of several connections race
// non-blocking transfers that move only part of their grants. None may
// overspend, and a direction told the budget is gone must find it spent,
// not merely held by a transfer that then gives part of it back (that
// would end its connection early).
func TestMeterNoDoubleSpend(t *testing.T) {
	const perConn, total = 40_000, 100_000
	s0 := limitedSession(t, Limits{MaxBytesPerConn: perConn, MaxBytesTotal: total})
	sessions := []*session{s0}
	for range 3 {
		c1, c2 := net.Pipe()
		t.Cleanup(func() { c1.Close(); c2.Close() })
		sessions = append(sessions, newSession(s0.p, c1, time.Now()))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(sessions))
	for _, s := range sessions {
		for dir := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				counter := &s.up
				if dir == 1 {
					counter = &s.down
				}
				for i := 1; ; i++ {
					want := 1 + (i*7919+dir*104729)%9000
					g := s.reserve(want, true)
					if g == 0 {
						conn, tot := spentOf(s)
						if conn != perConn && tot != total {
							errs <- errors.New("a direction found no room with budget unspent")
						}
						return
					}
					time.Sleep(time.Duration(i%3) * time.Microsecond) // the system call
					s.settle(g, g/(1+i%3), true, counter)             // a partial move
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var sum int64
	for i, s := range sessions {
		got := s.up.Load() + s.down.Load()
		if got > perConn {
			t.Errorf("connection %d moved %d bytes, limit %d", i, got, perConn)
		}
		sum += got
	}
	if sum != total || s0.p.total.Load() != total {
		t.Errorf("connections moved %d bytes, proxy total %d; want exactly %d", sum, s0.p.total.Load(), total)
	}
}

// TestMeterBlockedReadHoldsNothing: a read blocked on a silent upstream
// must not hold budget the other direction needs; the bytes that arrive
// after the other direction spent it all are dropped, not delivered.
func TestMeterBlockedReadHoldsNothing(t *testing.T) {
	const limit = 10_000
	s := limitedSession(t, Limits{MaxBytesPerConn: limit})
	upstream, target := net.Pipe()
	t.Cleanup(func() { upstream.Close(); target.Close() })
	uc := &sessConn{Conn: upstream, s: s, upstream: true}
	type result struct {
		n   int
		err error
	}
	read := make(chan result, 1)
	go func() {
		n, err := uc.Read(make([]byte, 2*limit))
		read <- result{n, err}
	}()
	time.Sleep(20 * time.Millisecond) // let the read block
	if g := s.reserve(limit, false); g != limit {
		t.Fatalf("the write's grant = %d while a read waits, want %d", g, limit)
	} else {
		s.settle(g, g, false, &s.up)
	}
	go target.Write(make([]byte, 500))
	select {
	case r := <-read:
		if r.n != 0 || !errors.Is(r.err, ErrByteLimit) {
			t.Errorf("read past the budget = %d, %v; want 0, ErrByteLimit", r.n, r.err)
		}
	case <-time.After(waitFor):
		t.Fatal("read did not return")
	}
	if up, down := s.up.Load(), s.down.Load(); up != limit || down != 0 {
		t.Errorf("BytesUp, BytesDown = %d, %d; want %d, 0", up, down, limit)
	}
}

// BenchmarkMeter: the cost of one reservation and its settling, as a
// splice pays it per call (per up to 256 KiB), limited against unlimited
// in the same run.
//
//	go test ./internal/egress -run '^$' -bench Meter
func BenchmarkMeter(b *testing.B) {
	var base float64
	for _, tc := range []struct {
		name string
		l    Limits
	}{
		{"unlimited", Limits{}},
		{"limited", Limits{MaxBytesPerConn: 1 << 62, MaxBytesTotal: 1 << 62}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p, err := New(Options{Limits: tc.l})
			if err != nil {
				b.Fatal(err)
			}
			s := newSession(p, nil, time.Now())
			start := time.Now()
			for b.Loop() {
				g := s.reserve(256<<10, true)
				s.settle(g, g, true, &s.down)
			}
			per := float64(time.Since(start).Nanoseconds()) / float64(b.N)
			if base == 0 {
				base = per
			}
			b.ReportMetric(per/base, "ratio")
		})
	}
}
