//go:build linux

package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// asHostID runs f on a locked OS thread whose effective uid and gid are
// id and whose supplementary groups are empty, then restores the thread.
//
// Host root starts the sandbox init through it: the user namespace the
// clone creates is then owned by the per-sandbox uid, not by root, so the
// kernel charges the sandbox's per-user counts (inotify instances,
// pending signals, ...) to that uid instead of exhausting root's. The real
// and saved ids stay 0, which is what lets the thread switch back.
//
// Preconditions: the process runs as root. Only raw syscalls are used:
// glibc-style setuid would change every thread of the process.
func asHostID(id int, f func() error) (err error) {
	runtime.LockOSThread()
	groups, err := threadGroups()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	// Changing the euid makes the whole process non-dumpable, and a
	// non-dumpable parent's children start with /proc files owned by
	// root, whose uid_map the id could not write. Put it back on both
	// sides.
	dumpable, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("reading dumpable: %w", err)
	}
	defer func() {
		if rerr := restoreRoot(groups, dumpable); rerr != nil {
			// The thread's credentials are unknown: it must not go back to
			// the runtime (it stays locked) nor the caller carry on.
			panic(fmt.Sprintf("sandbox: restoring thread credentials: %v", rerr))
		}
		runtime.UnlockOSThread()
	}()
	if err := setgroups(nil); err != nil {
		return err
	}
	if err := setresgid(-1, id, -1); err != nil {
		return err
	}
	if err := setresuid(-1, id, -1); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
		return err
	}
	return f()
}

// restoreRoot undoes asHostID's changes to the thread (uid first: it
// brings back the capabilities the others need).
func restoreRoot(groups []uint32, dumpable int) error {
	if err := setresuid(-1, 0, -1); err != nil {
		return err
	}
	if err := setresgid(-1, 0, -1); err != nil {
		return err
	}
	if err := setgroups(groups); err != nil {
		return err
	}
	return unix.Prctl(unix.PR_SET_DUMPABLE, uintptr(dumpable), 0, 0, 0)
}

func setresuid(r, e, s int) error {
	_, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(r), uintptr(e), uintptr(s))
	return errnoErr(errno, "setresuid")
}

func setresgid(r, e, s int) error {
	_, _, errno := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(r), uintptr(e), uintptr(s))
	return errnoErr(errno, "setresgid")
}

func setgroups(gs []uint32) error {
	var p unsafe.Pointer
	if len(gs) > 0 {
		p = unsafe.Pointer(&gs[0])
	}
	_, _, errno := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(gs)), uintptr(p), 0)
	return errnoErr(errno, "setgroups")
}

func threadGroups() ([]uint32, error) {
	n, _, errno := unix.RawSyscall(unix.SYS_GETGROUPS, 0, 0, 0)
	if errno != 0 || n == 0 {
		return nil, errnoErr(errno, "getgroups")
	}
	gs := make([]uint32, n)
	n, _, errno = unix.RawSyscall(unix.SYS_GETGROUPS, n, uintptr(unsafe.Pointer(&gs[0])), 0)
	if errno != 0 {
		return nil, errnoErr(errno, "getgroups")
	}
	return gs[:n], nil
}

func errnoErr(e unix.Errno, op string) error {
	if e == 0 {
		return nil
	}
	return fmt.Errorf("%s: %w", op, e)
}
