package egress

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// A tunnel between two stream sockets moves its bytes with splice(2)
// through a pipe, so they never cross into this process: the relay costs
// syscalls, not copies. Idle and duration deadlines apply per chunk as
// sessConn applies them per Read and Write; the byte limits per splice(2)
// call, each reserving its grant of the budget just before and settling
// it just after (meter.go).

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
	down, ok := newSpliceDir(up, client, true, -1)
	if !ok {
		return false
	}
	upward, _ := newSpliceDir(client, up, false, -1)
	errc := make(chan error, 1)
	go func() {
		err := writeAll(&sessConn{Conn: up, s: s, upstream: true}, buffered)
		if err == nil {
			err = s.spliceCopy(upward)
		}
		s.endDirection(up, err)
		errc <- err
	}()
	err := s.spliceCopy(down)
	s.endDirection(s.client, err)
	s.noteEnd(err, <-errc)
	return true
}

// spliceDir is one direction of a spliced relay.
type spliceDir struct {
	src, dst     net.Conn
	srcRC, dstRC syscall.RawConn
	// fromUp: src is the upstream. Bytes read from the upstream count as
	// BytesDown, bytes written to it as BytesUp, both against the limits.
	fromUp bool
	left   int64 // bytes still to move; negative: until EOF
	moved  int64
}

func newSpliceDir(src, dst net.Conn, fromUp bool, limit int64) (*spliceDir, bool) {
	srcRC, ok1 := spliceable(src)
	dstRC, ok2 := spliceable(dst)
	if !ok1 || !ok2 {
		return nil, false
	}
	return &spliceDir{src: src, dst: dst, srcRC: srcRC, dstRC: dstRC, fromUp: fromUp, left: limit}, true
}

// spliceCopy moves d's bytes until EOF or, with a limit, until it is
// reached.
func (s *session) spliceCopy(d *spliceDir) error {
	for d.left != 0 {
		if err := s.waitReadable(d.src, d.srcRC); err != nil {
			return err
		}
		p, _ := pipePool.Get().(*pipe)
		if p == nil {
			return errors.New("creating a pipe for the relay")
		}
		eof, err := s.spliceChunks(d, p)
		if err != nil {
			return err
		}
		if eof {
			if d.left > 0 {
				return io.ErrUnexpectedEOF
			}
			return nil
		}
	}
	return nil
}

// spliceChunks moves chunks through p while src has bytes ready, and
// gives p back once it has none (or on the end).
func (s *session) spliceChunks(d *spliceDir, p *pipe) (eof bool, err error) {
	empty := true
	defer func() { putPipe(p, empty) }()
	for d.left != 0 {
		want := p.cap
		if d.left > 0 {
			want = int(min(int64(want), d.left))
		}
		var n int
		var serr error
		spent := false
		if err := d.srcRC.Read(func(fd uintptr) bool {
			// From the upstream the grant is reserved for this one
			// non-blocking splice only (meter.go).
			grant := want
			if d.fromUp {
				if grant = s.reserve(want, true); grant == 0 {
					spent = true
					return true
				}
			}
			n, serr = splice(int(fd), p.w, grant)
			if d.fromUp {
				s.settle(grant, n, true, &s.down)
			}
			return true
		}); err != nil {
			if isTimeout(err) {
				// The read deadline is the one waitReadable set before
				// the first chunk; a transfer that kept src readable
				// since has outlived it without being idle. Wait again:
				// waitReadable sets a new one (or ends the connection
				// at its maximum duration) and sees the bytes ready.
				return false, nil
			}
			return false, err
		}
		switch {
		case spent:
			return false, ErrByteLimit
		case serr == unix.EAGAIN:
			return false, nil // drained for now: wait without the pipe
		case serr != nil:
			return false, serr
		case n == 0:
			return true, nil
		}
		empty = false
		s.touch()
		if err := s.spliceOut(d, p, n); err != nil {
			return false, err
		}
		empty = true
		if d.left > 0 {
			d.left -= int64(n)
		}
	}
	return false, nil
}

// spliceOut writes the n bytes in p to dst, within the byte limits when
// dst is the upstream; the bytes beyond them stay unsent.
func (s *session) spliceOut(d *spliceDir, p *pipe, n int) error {
	toUp := !d.fromUp
	for written := 0; written < n; {
		if err := s.arm(d.dst.SetWriteDeadline); err != nil {
			return err
		}
		var m int
		var serr error
		spent := false
		err := d.dstRC.Write(func(fd uintptr) bool {
			// To the upstream the grant is reserved for this one
			// non-blocking splice only, not while waiting to write.
			grant := n - written
			if toUp {
				if grant = s.reserve(grant, true); grant == 0 {
					spent = true
					return true
				}
			}
			m, serr = splice(p.r, int(fd), grant)
			if toUp {
				s.settle(grant, m, true, &s.up)
			}
			return serr != unix.EAGAIN
		})
		if err == nil {
			err = serr
		}
		if m > 0 {
			written += m
			d.moved += int64(m)
			s.touch()
		}
		if spent {
			return ErrByteLimit
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
	return nil
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

// plainBody is the body of a plain-HTTP response whose bytes after those
// already read may be spliced: Response.Write hands it, or a LimitedReader
// over it, to spliceWriter.ReadFrom.
type plainBody struct {
	io.ReadCloser      // the body as http.ReadResponse framed it
	spliced       bool // the rest went by splice: nothing more to read
}

func (b *plainBody) Read(p []byte) (int, error) {
	if b.spliced {
		return 0, io.EOF
	}
	return b.ReadCloser.Read(p)
}

// Close leaves a spliced body alone: draining it would read the upstream
// past the response.
func (b *plainBody) Close() error {
	if b.spliced {
		return nil
	}
	return b.ReadCloser.Close()
}

// spliceWriter is the client side of a plain-HTTP response: the head and
// anything it does not recognize are written as they come, its own body
// is spliced from the upstream.
type spliceWriter struct {
	io.Writer // the client (a sessConn)
	s         *session
	body      *plainBody
	ubr       *bufio.Reader // the upstream as read so far
	up        net.Conn      // the upstream itself
}

// responseWriter returns where roundTrip writes resp: a spliceWriter, with
// resp.Body wrapped, when its body is framed by length or by the end of
// the connection (not chunked, no trailers) and both connections are
// stream sockets; else cc.
func (s *session) responseWriter(cc net.Conn, uc *sessConn, ubr *bufio.Reader, resp *http.Response) io.Writer {
	if len(resp.TransferEncoding) > 0 || resp.Trailer != nil || resp.Body == nil || resp.Body == http.NoBody {
		return cc
	}
	if _, ok := newSpliceDir(uc.Conn, s.client, true, -1); !ok {
		return cc
	}
	b := &plainBody{ReadCloser: resp.Body}
	resp.Body = b
	return &spliceWriter{Writer: cc, s: s, body: b, ubr: ubr, up: uc.Conn}
}

func (w *spliceWriter) ReadFrom(r io.Reader) (int64, error) {
	limit, ours := int64(-1), r == io.Reader(w.body)
	if lr, ok := r.(*io.LimitedReader); ok && lr.R == io.Reader(w.body) {
		limit, ours = lr.N, true // a Content-Length
	}
	if !ours {
		return io.Copy(struct{ io.Writer }{w.Writer}, r)
	}
	// What the head's reader already holds goes as a copy, through the
	// body's own framing.
	var n int64
	for w.ubr.Buffered() > 0 && n != limit {
		k := int64(w.ubr.Buffered())
		if limit >= 0 {
			k = min(k, limit-n)
		}
		buf := make([]byte, k)
		m, err := io.ReadFull(w.body, buf)
		if m > 0 {
			if _, werr := w.Writer.Write(buf[:m]); werr != nil {
				return n, werr
			}
			n += int64(m)
		}
		if err != nil {
			return n, err
		}
	}
	if n == limit {
		return n, nil
	}
	rest := int64(-1)
	if limit >= 0 {
		rest = limit - n
	}
	d, _ := newSpliceDir(w.up, w.s.client, true, rest)
	w.body.spliced = true
	err := w.s.spliceCopy(d)
	return n + d.moved, err
}
