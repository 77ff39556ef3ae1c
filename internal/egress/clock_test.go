package egress

import (
	"strings"
	"testing"
	"time"
)

// TestIdleClockIsMonotonic: the idle timeout is decided from offsets on
// the monotonic clock. A stored wall-clock reading (time.Now().UnixNano()
// read back with time.Unix, as before) compares wall times, so that
// setting the system clock forward ends busy connections as idle and
// setting it back keeps idle ones open for as long as it went back. The
// system clock cannot be set in a test (other processes share it), so
// this checks what makes a jump harmless: the last-activity mark is an
// offset from the start, and the decision compares times that carry a
// monotonic reading.
func TestIdleClockIsMonotonic(t *testing.T) {
	p := &Proxy{limits: Limits{IdleTimeout: time.Minute, MaxDuration: time.Hour}}
	start := time.Now()
	if !strings.Contains(start.String(), " m=") {
		t.Fatalf("time.Now() = %s has no monotonic reading", start)
	}
	s := newSession(p, nil, start)
	time.Sleep(10 * time.Millisecond)
	s.touch()
	since := time.Since(start)
	off := time.Duration(s.last.Load())
	if off < 10*time.Millisecond || off > since {
		t.Fatalf("last activity = %v after %v: want an offset from the start, within the time elapsed", off, since)
	}
	if err := s.idleErr(); err != nil {
		t.Errorf("idleErr() right after activity = %v, want nil", err)
	}
	last := start.Add(off) // keeps start's monotonic reading
	for _, tt := range []struct {
		at   time.Duration // after the last activity
		want error
	}{
		{-time.Second, nil},
		{time.Minute - time.Millisecond, nil},
		{time.Minute, ErrIdle},
		{59 * time.Minute, ErrIdle},
		{time.Hour, ErrMaxDuration},
	} {
		if got := s.idleErrAt(last.Add(tt.at)); got != tt.want {
			t.Errorf("idleErrAt(last%+v) = %v, want %v", tt.at, got, tt.want)
		}
	}
}
