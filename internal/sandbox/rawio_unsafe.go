//go:build linux

package sandbox

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A start waits twice: for the init's report (the root built, the
// workload executed) and, in Wait, for the init's exit. Waiting in a
// blocking system call leaves the caller's processor in the system call
// while another one idles, and then the runtime's monitor thread (sysmon)
// does not go back to its deep sleep: it polls every 20 µs, then at
// doubling intervals, for as long as the call blocks, about fifty
// wake-ups in the first millisecond (docs/performance.md, "... the host
// waits in the poller"). These waits go through Go's poller instead, on
// non-blocking descriptors, with the reads themselves made raw, as the
// gateway reads its pipes (internal/gateway/rawfile_unsafe.go): the
// goroutine parks, its processor is free, and the monitor sleeps.

// setNonblock makes fd non-blocking before os.NewFile, so that the file
// it becomes is waited for in the poller. Only the host's end of a
// socketpair: the init's end, another open file, stays blocking.
func setNonblock(fd int) error { return unix.SetNonblock(fd, true) }

// readRaw reads one message from f, a non-blocking socket or pipe, into
// b, and waits for it in the poller. Errors are as unix.Read's; a file
// that is blocking is read with unix.Read (a raw read of it would hold
// its processor while it waits).
func readRaw(f *os.File, b []byte) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil || len(b) == 0 {
		return 0, err
	}
	var n int
	var errno syscall.Errno
	blocking := false
	err = rc.Read(func(fd uintptr) bool {
		if fl, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0); e != 0 || fl&syscall.O_NONBLOCK == 0 {
			blocking = true
			return true
		}
		for {
			m, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
			if e == syscall.EINTR {
				continue
			}
			n, errno = int(m), e
			return e != syscall.EAGAIN // else wait for the message through the poller
		}
	})
	switch {
	case blocking:
		return unix.Read(int(f.Fd()), b)
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, errno
	}
	return n, nil
}

// awaitExit waits, in the poller, until the process pid has exited, so
// that the wait for its status that follows (os/exec's, a blocking
// system call) returns at once. It returns at once if pid's pidfd cannot
// be had: the blocking wait then waits, as before.
func awaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// Readable once the process has exited; the status is left for the
	// wait that follows (WNOWAIT).
	_ = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		for {
			_, _, e := syscall.RawSyscall6(unix.SYS_WAITID, unix.P_PIDFD, fd, uintptr(unsafe.Pointer(&info)), unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, 0, 0)
			if e == syscall.EINTR {
				continue
			}
			// Exited (si_pid set), or an error the blocking wait will
			// report: stop waiting here either way.
			return e != 0 || info.Signo != 0
		}
	})
}

// recvmsgWait is unix.Recvmsg of one message from f, waiting for it in
// the poller if f is non-blocking (the host's end of the control socket).
func recvmsgWait(f *os.File, p, oob []byte, flags int) (n, oobn int, err error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		for {
			n, oobn, _, _, rerr = unix.Recvmsg(int(fd), p, oob, flags)
			if rerr != unix.EINTR {
				return rerr != unix.EAGAIN
			}
		}
	}); err != nil {
		return 0, 0, err
	}
	return n, oobn, rerr
}

// dupControl duplicates f's descriptor, close-on-exec.
func dupControl(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	if err := rc.Control(func(s uintptr) { fd, err = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	return fd, err
}
