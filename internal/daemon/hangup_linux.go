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
// images: minutes when a registry is slow or hung): a client that gave
// up, or an editor that crashed or restarted the server, left a serve
// behind that set up sandboxes for no one and held the package store's
// lock. The client is gone when nothing reads w, where the answers go (a
// pipe without a reader, a socket its peer closed): no answer could reach
// it, whatever it wrote (a client that timed out leaves its initialize
// unread). It is polled, never written. Input that merely ended is no
// sign: a script that wrote its requests, or none (serve --stdio <
// /dev/null, to see the start-up's errors), still reads what serve says.
// Anything but a pipe or a socket is not watched. stop ends the watch and
// waits for it; it may be called more than once.
func watchHangup(w io.Writer, gone func()) (stop func()) {
	out := pollable(w)
	if out < 0 {
		return func() {}
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Events 0: poll reports POLLERR (a pipe without a reader) and
		// POLLHUP (a socket shut down both ways) all the same.
		fds := []unix.PollFd{{Fd: int32(out)}, {Fd: int32(wake), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err == unix.EINTR {
				continue
			} else if err != nil || fds[1].Revents != 0 || fds[0].Revents&unix.POLLNVAL != 0 {
				return
			}
			if fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
				gone()
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
