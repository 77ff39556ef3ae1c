//go:build linux

package gateway

import (
	"io"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawFile reads and writes a non-blocking pipe or socket with raw system
// calls, waiting through Go's poller only when there is nothing to read
// or no room to write (issue 19: the gateway's CPU on a small call).
//
// Why: os.File's Read and Write enter the system call through the
// runtime's bookkeeping (entersyscall), which wakes the runtime's monitor
// (sysmon) from its deep sleep whenever the process was idle; once awake
// it polls every 20 µs until every processor is idle again. A proxied
// call makes four such calls after an idle gap (the client's request, the
// server's answer, each read and written), and the monitor's wake-ups
// were a quarter of `mcpbox run`'s CPU per call. A read or write of a
// non-blocking descriptor never blocks, so it needs none of that
// bookkeeping: RawSyscall skips it, and the monitor stays asleep.
//
// Only a descriptor with O_NONBLOCK set takes this path (a blocking one
// would hold its processor while it waits); anything unusual (an error,
// a closed file, a deadline) is handed to the os.File, so that errors
// keep their os wrapping and meaning.
//
// The mode belongs to the open file, which a socket shares with whoever
// else holds it (the client's standard input and output may be one
// socket, which the parent may hold too, and a session's end makes it
// blocking again: daemon.clientInput). A raw read or write of a socket
// made blocking since would hold its processor, unpreemptible, until the
// peer acts, and the runtime's stop-the-world would wait for it: so a
// socket is read and written with MSG_DONTWAIT, which never waits,
// whatever its mode. A pipe's mode is its own open file's; the gateway
// takes the raw path only on pipes it opened itself (os.Pipe, the
// daemon's reopened standard input and output).
type rawFile struct {
	f    *os.File
	rc   syscall.RawConn
	sock bool // recv and send with MSG_DONTWAIT
}

// newRawFile returns f's raw reader and writer, or nil if f is blocking
// or cannot be reached (then f is used as it is).
func newRawFile(f *os.File) *rawFile {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	nonblock, sock := false, false
	if rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nonblock = err == nil && fl&unix.O_NONBLOCK != 0
		var st unix.Stat_t
		sock = unix.Fstat(int(fd), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK
	}) != nil || !nonblock {
		return nil
	}
	return &rawFile{f: f, rc: rc, sock: sock}
}

// read is read(2), or recv(2) with MSG_DONTWAIT for a socket.
func (r *rawFile) read(fd uintptr, p []byte) (uintptr, syscall.Errno) {
	if r.sock {
		m, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), unix.MSG_DONTWAIT, 0, 0)
		return m, e
	}
	m, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return m, e
}

// write is write(2), or send(2) with MSG_DONTWAIT for a socket (and
// MSG_NOSIGNAL: a peer gone is EPIPE, as for the os.File).
func (r *rawFile) write(fd uintptr, p []byte) (uintptr, syscall.Errno) {
	if r.sock {
		m, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, 0, 0)
		return m, e
	}
	m, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return m, e
}

// Read reads as os.File.Read does.
func (r *rawFile) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return r.f.Read(p)
	}
	var n int
	var errno syscall.Errno
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			m, e := r.read(fd, p)
			if e == syscall.EINTR {
				continue
			}
			n, errno = int(m), e
			return e != syscall.EAGAIN // else wait for input through the poller
		}
	})
	switch {
	case err != nil || errno != 0:
		return r.f.Read(p) // the os.File's error (closed, a deadline, EIO ...)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// tryWrite writes what it can of p without waiting, and returns how
// much it wrote; an error is left for the os.File's Write to report.
func (r *rawFile) tryWrite(p []byte) int {
	n := 0
	r.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			m, e := r.write(fd, p[n:])
			if e == syscall.EINTR {
				continue
			}
			if e != 0 || m == 0 || int(m) > len(p)-n {
				break // the os.File's Write tells what it is
			}
			n += int(m)
		}
		return true // never wait here
	})
	return n
}

// Write writes as os.File.Write does: what does not fit at once (or
// fails) goes through the os.File, which waits for room through the
// poller, with its deadline, and reports its errors.
func (r *rawFile) Write(p []byte) (int, error) {
	n := r.tryWrite(p)
	if n == len(p) {
		return n, nil
	}
	m, err := r.f.Write(p[n:])
	return n + m, err
}

// hungUp reports whether the reader at w's other end is gone: a poll that
// asks for nothing still reports POLLERR for a pipe whose read end is
// closed, and POLLHUP for a socket or terminal hung up. A w that is not a
// file is taken as open.
func hungUp(w io.Writer) bool {
	var f *os.File
	switch x := w.(type) {
	case stdioFile:
		return hungUp(x.ReadWriter)
	case *rawFile:
		f = x.f
	case *os.File:
		f = x
	default:
		return false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd)}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
			gone = fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
		}
	})
	return gone
}
