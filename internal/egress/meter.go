package egress

import (
	"errors"
	"io"
	"net"
	"os"
	"time"
)

// sessConn enforces a session's deadlines on a connection and, on the
// upstream side, counts and limits bytes: BytesUp are bytes written to the
// target, BytesDown bytes read from it.
type sessConn struct {
	net.Conn // only net.Conn's methods: io.Copy must not bypass Read/Write
	s        *session
	upstream bool
}

func (c *sessConn) Read(b []byte) (int, error) {
	for {
		grant := len(b)
		if c.upstream {
			if grant = c.s.budget(len(b)); grant == 0 {
				return 0, ErrByteLimit
			}
		}
		if err := c.s.arm(c.Conn.SetReadDeadline); err != nil {
			return 0, err
		}
		n, err := c.Conn.Read(b[:grant])
		if n > 0 {
			c.s.touch()
			if c.upstream {
				c.s.account(&c.s.down, n)
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

func (c *sessConn) Write(b []byte) (int, error) {
	grant := len(b)
	var endErr error
	if c.upstream {
		if grant = c.s.budget(len(b)); grant < len(b) {
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
			if c.upstream {
				c.s.account(&c.s.up, n)
			}
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
	return written, endErr
}

// budget returns how many of n bytes the byte limits still allow. Two
// directions, and other connections for the total, may transfer at once,
// so a limit can be overshot by at most one such concurrent transfer each.
func (s *session) budget(n int) int {
	l := s.p.limits
	left := int64(n)
	if l.MaxBytesPerConn > 0 {
		left = min(left, l.MaxBytesPerConn-s.up.Load()-s.down.Load())
	}
	if l.MaxBytesTotal > 0 {
		left = min(left, l.MaxBytesTotal-s.p.total.Load())
	}
	return int(max(left, 0))
}

func (s *session) account(counter interface{ Add(int64) int64 }, n int) {
	counter.Add(int64(n))
	s.p.total.Add(int64(n))
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
