package daemon

import (
	"io"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// watchHangup calls gone when the client of a stdio gateway hangs up
// while the gateway is still setting up (installing packages, pulling
// images: minutes when a registry is slow or hung) and reads nothing
// yet: a client that gave up, or an editor that restarted the server,
// left a serve behind that set up sandboxes for no one and held the
// package store's lock. It polls r's pipe or socket for the hang-up
// without reading, so a client still there loses nothing; a client
// that wrote its messages and then closed its end (input piped from a
// file) is not gone: the session reads them first. Anything but a pipe
// or a socket is not watched. stop ends the watch and waits for it; it
// must be called before the session reads r, and may be called more
// than once.
func watchHangup(r io.Reader, gone func()) (stop func()) {
	f, ok := r.(*os.File)
	if !ok {
		return func() {}
	}
	sc, err := f.SyscallConn() // not f.Fd(), which would make it blocking
	if err != nil {
		return func() {}
	}
	var st unix.Stat_t
	var fd int
	if cerr := sc.Control(func(u uintptr) {
		fd = int(u)
		err = unix.Fstat(fd, &st)
	}); cerr != nil || err != nil {
		return func() {}
	}
	if m := st.Mode & unix.S_IFMT; m != unix.S_IFIFO && m != unix.S_IFSOCK {
		return func() {}
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}, {Fd: int32(wake), Events: unix.POLLIN}}
			if _, err := unix.Poll(fds, -1); err == unix.EINTR {
				continue
			} else if err != nil || fds[1].Revents != 0 {
				return
			}
			if fds[0].Revents&(unix.POLLHUP|unix.POLLRDHUP|unix.POLLERR|unix.POLLNVAL) == 0 {
				continue
			}
			// Hung up: gone unless it left messages to read.
			// (TIOCINQ is FIONREAD, for a pipe and a socket alike.)
			if n, err := unix.IoctlGetInt(fd, unix.TIOCINQ); err != nil || n == 0 {
				gone()
			}
			return
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			unix.Write(wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
			<-done
			unix.Close(wake)
			runtime.KeepAlive(f)
		})
	}
}
