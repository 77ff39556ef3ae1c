package daemon

import (
	"io"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// watchHangup calls gone when the client of a stdio gateway goes away
// while the gateway is still setting up (installing packages, pulling
// images: minutes when a registry is slow or hung) and reads nothing
// yet: a client that gave up, or an editor that crashed or restarted the
// server, left a serve behind that set up sandboxes for no one and held
// the package store's lock. It polls the client's pipes or sockets, r
// (its requests) and w (where the answers go), without reading or
// writing, so a client still there loses nothing. The client is gone
// when
//   - nothing reads w any more (a pipe without a reader, a socket whose
//     peer closed): no answer could reach it, whatever it wrote; or
//   - r hung up with nothing left to read.
//
// A client that wrote its requests and closed r but still reads w (input
// piped from a file) is not gone: the session reads and answers them.
// Anything but a pipe or a socket is not watched. stop ends the watch
// and waits for it; it must be called before the session reads r, and
// may be called more than once.
func watchHangup(r io.Reader, w io.Writer, gone func()) (stop func()) {
	in, out := pollable(r), pollable(w)
	if in < 0 && out < 0 {
		return func() {}
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Events 0 on w: poll reports its POLLERR (a pipe without a
		// reader) and POLLHUP (a socket shut down both ways) all the same.
		// A negative fd is one poll passes over.
		fds := []unix.PollFd{{Fd: int32(in), Events: unix.POLLRDHUP}, {Fd: int32(out)}, {Fd: int32(wake), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err == unix.EINTR {
				continue
			} else if err != nil || fds[2].Revents != 0 {
				return
			}
			if fds[1].Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
				gone()
				return
			}
			if fds[1].Revents&unix.POLLNVAL != 0 {
				fds[1].Fd = -1
			}
			if fds[0].Revents&(unix.POLLHUP|unix.POLLRDHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
				// Hung up: gone unless it left requests to read (TIOCINQ
				// is FIONREAD, for a pipe and a socket alike); then only
				// w tells.
				if n, err := unix.IoctlGetInt(in, unix.TIOCINQ); err != nil || n == 0 {
					gone()
					return
				}
				fds[0].Fd = -1
			}
			if fds[0].Fd < 0 && fds[1].Fd < 0 {
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			unix.Write(wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
			<-done
			unix.Close(wake)
			runtime.KeepAlive(r)
			runtime.KeepAlive(w)
		})
	}
}

// pollable is the descriptor of v when it is a pipe or a socket, else -1.
// It stays v's: v must stay open while it is polled.
func pollable(v any) int {
	f, ok := v.(*os.File)
	if !ok {
		return -1
	}
	sc, err := f.SyscallConn() // not f.Fd(), which would make it blocking
	if err != nil {
		return -1
	}
	var st unix.Stat_t
	fd := -1
	if cerr := sc.Control(func(u uintptr) {
		if unix.Fstat(int(u), &st) == nil {
			fd = int(u)
		}
	}); cerr != nil || fd < 0 {
		return -1
	}
	if m := st.Mode & unix.S_IFMT; m != unix.S_IFIFO && m != unix.S_IFSOCK {
		return -1
	}
	return fd
}
