package e2e

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// The Linux calls of the tests, apart so that the package still builds
// (go vet) for macOS, where none of these tests can run.

func inotifyInit() (int, error) { return syscall.InotifyInit1(syscall.IN_CLOEXEC) }

func mountTmpfs(dir, opts string) error { return syscall.Mount("tmpfs", dir, "tmpfs", 0, opts) }

func unmountDetach(dir string) error { return syscall.Unmount(dir, syscall.MNT_DETACH) }

func setSubreaper(on bool) error {
	v := 0
	if on {
		v = 1
	}
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, uintptr(v), 0, 0, 0)
}

// waitAll is __WALL: wait for clone children too.
const waitAll = unix.WALL

// killPid kills a process this test started inside a sandbox, found by a
// scan of /proc, if still() holds once pid is open as a pidfd: by then the
// process may have ended and its number gone to another program, which
// still() (the same start time, the marker in the command line) tells
// apart. A process that ends after the check takes the signal with it.
func killPid(pid int, still func() bool) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if !still() {
		return syscall.ESRCH
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
}
