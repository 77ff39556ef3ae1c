package egress

import (
	"errors"
	"net"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// A tunnel between two stream sockets moves its bytes with splice(2)
// through a pipe, so they never cross into this process: the relay costs
// syscalls, not copies. Byte limits, accounting, idle and duration
// deadlines are applied per chunk exactly as sessConn applies them per
// Read and Write.

// pipeSize is the capacity asked of each pipe: a chunk of a bulk
// transfer. More than the 64 KiB default halves the syscalls per MiB; the
// kernel caps it at /proc/sys/fs/pipe-max-size (1 MiB by default) and an
// unprivileged user's total at fs.pipe-user-pages-soft, below which a
// smaller pipe still works.
const pipeSize = 256 << 10

// pipe is a pipe(2) pair, empty whenever it is in the pool.
type pipe struct {
	r, w int
	cap  int
}

// pipePool keeps pipes for chunks in flight; a connection holds one only
// while its bytes keep coming, so idle connections hold no pipe (and no
// file descriptors beyond their sockets).
var pipePool = sync.Pool{New: func() any { return newPipe() }}

func newPipe() *pipe {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil
	}
	p := &pipe{r: fds[0], w: fds[1], cap: 64 << 10}
	// The pool drops pipes at garbage collections without a word.
	runtime.SetFinalizer(p, (*pipe).close)
	if n, err := unix.FcntlInt(uintptr(p.w), unix.F_SETPIPE_SZ, pipeSize); err == nil {
		p.cap = n
	}
	return p
}

func (p *pipe) close() {
	runtime.SetFinalizer(p, nil)
	unix.Close(p.r)
	unix.Close(p.w)
}

// putPipe returns an empty pipe to the pool; one that may still hold
// bytes (after an error) is closed instead.
func putPipe(p *pipe, empty bool) {
	if !empty {
		p.close()
		return
	}
	pipePool.Put(p)
}

// spliceable reports whether c is a stream socket splice can move bytes
// from and to.
func spliceable(c net.Conn) (syscall.RawConn, bool) {
	switch c := c.(type) {
	case *net.TCPConn:
		rc, err := c.SyscallConn()
		return rc, err == nil
	case *net.UnixConn:
		if a, ok := c.LocalAddr().(*net.UnixAddr); !ok || a.Net != "unix" {
			return nil, false // datagram or seqpacket
		}
		rc, err := c.SyscallConn()
		return rc, err == nil
	}
	return nil, false
}

// spliceRelay is relay for two spliceable connections; ok is false when
// they are not (then nothing was done).
func (s *session) spliceRelay(client, up net.Conn, buffered []byte) (ok bool) {
	crc, ok1 := spliceable(client)
	urc, ok2 := spliceable(up)
	if !ok1 || !ok2 {
		return false
	}
	errc := make(chan error, 1)
	go func() {
		err := writeAll(&sessConn{Conn: up, s: s, upstream: true}, buffered)
		if err == nil {
			err = s.spliceCopy(up, urc, client, crc, false)
		}
		s.endDirection(up, err)
		errc <- err
	}()
	err := s.spliceCopy(client, crc, up, urc, true)
	s.endDirection(s.client, err)
	s.noteEnd(err, <-errc)
	return true
}

// spliceCopy moves src to dst until EOF. fromUp tells the direction: bytes
// read from the upstream count as BytesDown, bytes written to it as
// BytesUp, and both against the byte limits.
func (s *session) spliceCopy(dst net.Conn, drc syscall.RawConn, src net.Conn, srcRC syscall.RawConn, fromUp bool) error {
	for {
		if err := s.waitReadable(src, srcRC); err != nil {
			return err
		}
		p, _ := pipePool.Get().(*pipe)
		if p == nil {
			return errors.New("creating a pipe for the relay")
		}
		eof, err := s.spliceChunks(dst, drc, srcRC, p, fromUp)
		if eof || err != nil {
			return err
		}
	}
}

// spliceChunks moves chunks through p while src has bytes ready, and
// gives p back once it has none (or on the end).
func (s *session) spliceChunks(dst net.Conn, drc, srcRC syscall.RawConn, p *pipe, fromUp bool) (eof bool, err error) {
	empty := true
	defer func() { putPipe(p, empty) }()
	for {
		grant := p.cap
		if fromUp {
			if grant = s.budget(grant); grant == 0 {
				return false, ErrByteLimit
			}
		}
		var n int
		var serr error
		if err := srcRC.Read(func(fd uintptr) bool {
			n, serr = splice(int(fd), p.w, grant)
			return true
		}); err != nil {
			return false, err
		}
		switch {
		case serr == unix.EAGAIN:
			return false, nil // drained for now: wait without the pipe
		case serr != nil:
			return false, serr
		case n == 0:
			return true, nil
		}
		empty = false
		s.touch()
		if fromUp {
			s.account(&s.down, n)
		}
		if err := s.spliceOut(dst, drc, p, n, fromUp); err != nil {
			return false, err
		}
		empty = true
	}
}

// spliceOut writes the n bytes in p to dst, within the byte limits when
// dst is the upstream; the bytes beyond them stay unsent.
func (s *session) spliceOut(dst net.Conn, drc syscall.RawConn, p *pipe, n int, fromUp bool) error {
	grant := n
	var endErr error
	if !fromUp {
		if grant = s.budget(n); grant < n {
			endErr = ErrByteLimit
		}
	}
	for written := 0; written < grant; {
		if err := s.arm(dst.SetWriteDeadline); err != nil {
			return err
		}
		var m int
		var serr error
		err := drc.Write(func(fd uintptr) bool {
			m, serr = splice(p.r, int(fd), grant-written)
			return serr != unix.EAGAIN
		})
		if err == nil {
			err = serr
		}
		if m > 0 {
			written += m
			s.touch()
			if !fromUp {
				s.account(&s.up, m)
			}
		}
		if err != nil {
			if isTimeout(err) {
				if err = s.idleErr(); err == nil {
					continue
				}
			}
			return err
		}
	}
	return endErr
}

// waitReadable blocks until src has bytes or its end to read, under the
// session's deadlines, without taking them (MSG_PEEK).
func (s *session) waitReadable(src net.Conn, rc syscall.RawConn) error {
	var b [1]byte
	for {
		if err := s.arm(src.SetReadDeadline); err != nil {
			return err
		}
		var serr error
		err := rc.Read(func(fd uintptr) bool {
			_, _, serr = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			return serr != unix.EAGAIN
		})
		if err == nil {
			if serr != nil && serr != unix.EAGAIN {
				return serr
			}
			return nil
		}
		if isTimeout(err) {
			if err = s.idleErr(); err == nil {
				continue
			}
		}
		return err
	}
}

// splice moves up to n bytes from fd in to fd out, retrying EINTR.
func splice(in, out, n int) (int, error) {
	for {
		m, err := unix.Splice(in, nil, out, nil, n, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		return int(m), nil
	}
}
