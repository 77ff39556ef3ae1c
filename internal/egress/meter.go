package egress

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// sessConn enforces a session's deadlines on a connection and, on the
// upstream side, counts and limits bytes: BytesUp are bytes written to the
// target, BytesDown bytes read from it and passed on.
type sessConn struct {
	net.Conn // only net.Conn's methods: io.Copy must not bypass Read/Write
	s        *session
	upstream bool
}

// Read takes bytes from the upstream within the byte limits. The read
// blocks, so it holds no reservation (the other direction could not move
// while it waits): it asks for at most what is left, then commits what
// arrived; if the other direction or another connection took part of that
// meanwhile, the excess is dropped, never passed on nor counted, and the
// connection ends with ErrByteLimit.
func (c *sessConn) Read(b []byte) (int, error) {
	for {
		want := len(b)
		if c.upstream {
			if want = c.s.room(len(b)); want == 0 {
				return 0, ErrByteLimit
			}
		}
		if err := c.s.arm(c.Conn.SetReadDeadline); err != nil {
			return 0, err
		}
		n, err := c.Conn.Read(b[:want])
		if n > 0 {
			c.s.touch()
			if c.upstream {
				if got := c.s.commit(n, &c.s.down); got < n {
					return got, ErrByteLimit
				}
			}
		}
		if n == 0 && isTimeout(err) {
			if err = c.s.idleErr(); err == nil {
				continue
			}
		}
		return n, err
	}
}

// Write sends b to the upstream within the byte limits: its bytes are in
// hand, so it reserves them up front, holds the reservation while the
// write blocks, and gives back what was not written.
func (c *sessConn) Write(b []byte) (int, error) {
	grant := len(b)
	var endErr error
	if c.upstream {
		if grant = c.s.reserve(len(b), false); grant < len(b) {
			endErr = ErrByteLimit
		}
	}
	written := 0
	for written < grant {
		if err := c.s.arm(c.Conn.SetWriteDeadline); err != nil {
			endErr = err
			break
		}
		n, err := c.Conn.Write(b[written:grant])
		written += n
		if n > 0 {
			c.s.touch()
		}
		if err != nil {
			if isTimeout(err) {
				if err = c.s.idleErr(); err == nil {
					continue
				}
			}
			endErr = err
			break
		}
	}
	if c.upstream {
		c.s.settle(grant, written, false, &c.s.up)
	}
	return written, endErr
}

// The byte limits are exact: the bytes counted against Limits.MaxBytesPerConn
// (BytesUp+BytesDown of a connection) and Limits.MaxBytesTotal (of all the
// proxy's connections) never exceed them. Every transfer to or from an
// upstream first takes its grant from the budget under the proxy's
// meterMu (only when a byte limit is set), so two directions or two
// connections can never both spend the same remainder:
//
//   - a splice (both directions) reserves its grant right before one
//     non-blocking splice(2) and settles right after it: a reservation lives
//     for one system call;
//   - a write of bytes in hand (sessConn.Write) reserves them all and
//     settles when the write returns;
//   - a blocking read (sessConn.Read) reserves nothing while it waits; it
//     commits what arrived and drops what no longer fits (see Read).
//
// A transfer that finds less room than it asks for while system-call
// reservations are outstanding waits for them to settle (they may give
// bytes back) rather than end its connection early. Bytes reserved by a
// blocked write count as spent until it returns.

// meter is a budget's state, guarded by Proxy.meterMu: for the proxy
// (MaxBytesTotal) and for each session (MaxBytesPerConn).
type meter struct {
	spent   int64 // bytes moved
	pending int64 // bytes reserved and not yet settled
	short   int64 // the part of pending held across one non-blocking call
}

func (s *session) limited() bool {
	return s.p.limits.MaxBytesPerConn > 0 || s.p.limits.MaxBytesTotal > 0
}

// roomLocked is how many of n bytes the limits leave unreserved, waiting
// while fewer are left and short reservations may still give some back.
func (s *session) roomLocked(n int) int {
	p, l := s.p, s.p.limits
	for {
		left := int64(n)
		if l.MaxBytesPerConn > 0 {
			left = min(left, l.MaxBytesPerConn-s.meter.spent-s.meter.pending)
		}
		if l.MaxBytesTotal > 0 {
			left = min(left, l.MaxBytesTotal-p.meter.spent-p.meter.pending)
		}
		left = max(left, 0)
		if left == int64(n) || s.meter.short == 0 && (l.MaxBytesTotal <= 0 || p.meter.short == 0) {
			return int(left)
		}
		p.meterWaiters++
		p.meterCond.Wait()
		p.meterWaiters--
	}
}

// room reports how many of n bytes the limits allow now, reserving none.
func (s *session) room(n int) int {
	if !s.limited() {
		return n
	}
	s.p.meterMu.Lock()
	defer s.p.meterMu.Unlock()
	return s.roomLocked(n)
}

// reserve takes up to n bytes of the budget for a transfer about to
// start; short: it settles right after one non-blocking system call. The
// caller must settle the grant, and must not reserve again before it did.
func (s *session) reserve(n int, short bool) int {
	if !s.limited() {
		return n
	}
	p := s.p
	p.meterMu.Lock()
	defer p.meterMu.Unlock()
	g := int64(s.roomLocked(n))
	s.meter.pending += g
	p.meter.pending += g
	if short {
		s.meter.short += g
		p.meter.short += g
	}
	return int(g)
}

// settle ends a reservation of grant bytes of which moved were
// transferred: those are counted in counter (BytesUp or BytesDown) and the
// proxy's total, the rest go back to the budget.
func (s *session) settle(grant, moved int, short bool, counter *atomic.Int64) {
	if moved > 0 {
		counter.Add(int64(moved))
		s.p.total.Add(int64(moved))
	}
	if !s.limited() {
		return
	}
	p := s.p
	p.meterMu.Lock()
	defer p.meterMu.Unlock()
	g, m := int64(grant), int64(moved)
	s.meter.pending -= g
	p.meter.pending -= g
	s.meter.spent += m
	p.meter.spent += m
	if short {
		s.meter.short -= g
		p.meter.short -= g
	}
	if p.meterWaiters > 0 {
		p.meterCond.Broadcast()
	}
}

// commit counts up to n bytes already transferred, as far as the limits
// allow, and returns how many it counted.
func (s *session) commit(n int, counter *atomic.Int64) int {
	g := s.reserve(n, false)
	s.settle(g, g, false, counter)
	return g
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

func (s *session) touch() { s.last.Store(int64(time.Since(s.start))) }

// arm sets the next deadline: the request head's fixed one, else the idle
// timeout capped by the connection's maximum duration.
func (s *session) arm(set func(time.Time) error) error {
	if !s.headerUntil.IsZero() {
		return set(s.headerUntil)
	}
	now := time.Now()
	var d time.Time
	if idle := s.p.limits.IdleTimeout; idle > 0 {
		d = now.Add(idle)
	}
	if max := s.p.limits.MaxDuration; max > 0 {
		end := s.start.Add(max)
		if !now.Before(end) {
			return ErrMaxDuration
		}
		if d.IsZero() || end.Before(d) {
			d = end
		}
	}
	return set(d)
}

// idleErr decides after a deadline expired: nil if bytes moved the other
// way recently (keep waiting), else why the connection ends.
func (s *session) idleErr() error { return s.idleErrAt(time.Now()) }

func (s *session) idleErrAt(now time.Time) error {
	if !s.headerUntil.IsZero() {
		return os.ErrDeadlineExceeded
	}
	if max := s.p.limits.MaxDuration; max > 0 && !now.Before(s.start.Add(max)) {
		return ErrMaxDuration
	}
	if idle := s.p.limits.IdleTimeout; idle > 0 && s.idleAt(now) >= idle {
		return ErrIdle
	}
	return nil
}

// headerReader caps the bytes read for a request head; lift removes the
// cap once the head is parsed.
type headerReader struct {
	r        io.Reader
	n        int // remaining; negative: no cap
	exceeded bool
}

func (h *headerReader) Read(b []byte) (int, error) {
	if h.n == 0 {
		h.exceeded = true
		return 0, errHeaderTooLarge
	}
	if h.n > 0 && len(b) > h.n {
		b = b[:h.n]
	}
	n, err := h.r.Read(b)
	if h.n > 0 {
		h.n -= n
	}
	return n, err
}

func (h *headerReader) lift() { h.n = -1 }

var errHeaderTooLarge = errors.New("request head larger than 64 KiB")

func describeReadErr(err error, hr *headerReader) string {
	switch {
	case hr.exceeded:
		return errHeaderTooLarge.Error()
	case isTimeout(err):
		return "request head not received within the header timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed before a complete request"
	}
	return err.Error()
}

// idleAt is how long no byte had moved at now. Both readings are offsets
// from start, so with start and now from time.Now the difference is taken
// on the monotonic clock whatever the wall clock did.
func (s *session) idleAt(now time.Time) time.Duration {
	return now.Sub(s.start) - time.Duration(s.last.Load())
}
