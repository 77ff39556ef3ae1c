//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The workload runs in a user namespace of its own, nested in the init's
// (as bubblewrap does): the init owns the sandbox's mount, network, pid,
// ipc and uts namespaces through the outer one and keeps capabilities
// there; the workload is only ever in the inner one, which owns none of
// them, so no capability it could come by counts over the sandbox's
// mounts, and its uid's RLIMIT_NPROC count (per user namespace) is its own.
//
// The inner namespace has to be made by the fork that creates the
// workload, and some walls can only go up after that fork: the seccomp
// filter refuses new user namespaces, and the new namespace gives the
// child a full bounding set. os/exec runs no code of ours between fork and
// execve, and re-executing this binary once more would double the start-up
// cost, so the init forks the workload itself: a raw clone on the walled
// thread (already no_new_privs, Landlock, no capabilities), after which the
// child, a copy of the init with one thread, makes raw system calls only —
// no allocation, no stack growth, no runtime — on memory the parent
// prepared: wait for its id maps (written by another init thread, outside
// the Landlock domain), empty its capability sets, set RLIMIT_NPROC, change
// directory, install the seccomp filter, reset signal handlers, unblock
// signals and execve. Its failures come back over a close-on-exec pipe as
// a step and an errno, the way os/exec reports a failed execve.

// forkSpec is everything the forked child uses, prepared by the parent.
type forkSpec struct {
	path, dir    *byte
	argv, envv   []*byte
	syncR, syncW uintptr // the parent's go-ahead
	errW         uintptr // the child's failure report
	lastCap      uintptr
	capHdr       unix.CapUserHeader
	capData      [2]unix.CapUserData // all zero
	nproc        unix.Rlimit
	setNproc     bool
	filter       []unix.SockFilter
	fprog        unix.SockFprog
	sigDefault   [4]uintptr // a struct sigaction: SIG_DFL, no flags, empty mask
	emptySigmask uint64
}

// The steps of the child, as it reports a failure.
const (
	stepSync = iota + 1
	stepBounding
	stepCaps
	stepNproc
	stepChdir
	stepSeccomp
	stepExec
)

var stepNames = map[uint32]string{
	stepSync: "waiting for the workload's id maps", stepBounding: "dropping capabilities from the bounding set",
	stepCaps: "dropping capabilities", stepNproc: "limiting processes", stepChdir: "changing to the working directory",
	stepSeccomp: "installing seccomp filter", stepExec: "executing",
}

func newForkSpec(path string, c *workloadConfig, syncR, syncW, errW *os.File) (*forkSpec, error) {
	fs := &forkSpec{syncR: syncR.Fd(), syncW: syncW.Fd(), errW: errW.Fd(), capHdr: unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}}
	var err error
	if fs.path, err = unix.BytePtrFromString(path); err != nil {
		return nil, err
	}
	if fs.dir, err = unix.BytePtrFromString(c.Dir); err != nil {
		return nil, err
	}
	if fs.argv, err = syscall.SlicePtrFromStrings(c.Args); err != nil {
		return nil, err
	}
	if fs.envv, err = syscall.SlicePtrFromStrings(c.Env); err != nil {
		return nil, err
	}
	last, err := lastCap()
	if err != nil {
		return nil, err
	}
	fs.lastCap = uintptr(last)
	if c.Nproc > 0 {
		fs.nproc = unix.Rlimit{Cur: uint64(c.Nproc), Max: uint64(c.Nproc)}
		fs.setNproc = true
	}
	if prog := unpackFilter(c.Seccomp); len(prog) > 0 {
		for _, in := range prog {
			fs.filter = append(fs.filter, unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K})
		}
		fs.fprog = unix.SockFprog{Len: uint16(len(fs.filter)), Filter: &fs.filter[0]}
	}
	return fs, nil
}

// forkWorkload clones the workload into new user and cgroup namespaces
// and returns its pid; the child waits on syncR before going on.
//
// Preconditions: the calling goroutine is locked to its thread, which
// ends afterwards.
func forkWorkload(fs *forkSpec) (int, error) {
	// Blocked for the child's sake (a Go signal handler must not run in
	// it), restored here at once; the child resets its handlers before it
	// unblocks them.
	var all, old uint64 = ^uint64(0), 0
	if _, _, e := syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&all)), uintptr(unsafe.Pointer(&old)), 8, 0, 0); e != 0 {
		return 0, fmt.Errorf("blocking signals: %w", e)
	}
	pid, errno := rawFork(fs)
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&old)), 0, 8, 0, 0)
	if errno != 0 {
		return 0, fmt.Errorf("creating the workload's user namespace: %w", errno)
	}
	return int(pid), nil
}

// rawFork is the fork and, in the child, everything up to execve. Only
// nosplit functions and raw system calls here: the child has a copy of
// the runtime's memory but none of its other threads.
//
//go:norace
//go:nocheckptr
//go:nosplit
func rawFork(fs *forkSpec) (uintptr, syscall.Errno) {
	// Flags come first on amd64 and arm64, the architectures the seccomp
	// filter knows. (Elsewhere, s390x, the namespace would be missing and
	// the id maps refused: the start fails.) No new stack: without
	// CLONE_VM the child has a copy of this one.
	pid, _, errno := syscall.RawSyscall6(unix.SYS_CLONE, uintptr(unix.CLONE_NEWUSER|unix.CLONE_NEWCGROUP|unix.SIGCHLD), 0, 0, 0, 0, 0)
	if errno != 0 || pid != 0 {
		return pid, errno
	}
	// The copy of the go-ahead's write end would keep the read below from
	// seeing the parent give up.
	syscall.RawSyscall6(unix.SYS_CLOSE, fs.syncW, 0, 0, 0, 0, 0)
	var b [1]byte
	n, _, errno := syscall.RawSyscall6(unix.SYS_READ, fs.syncR, uintptr(unsafe.Pointer(&b[0])), 1, 0, 0, 0)
	if errno != 0 || n != 1 {
		childFail(fs, stepSync, errno)
	}
	for c := uintptr(0); c <= fs.lastCap; c++ {
		if _, _, errno = syscall.RawSyscall6(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, c, 0, 0, 0, 0); errno != 0 && errno != unix.EINVAL {
			childFail(fs, stepBounding, errno)
		}
	}
	if _, _, errno = syscall.RawSyscall6(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&fs.capHdr)), uintptr(unsafe.Pointer(&fs.capData[0])), 0, 0, 0, 0); errno != 0 {
		childFail(fs, stepCaps, errno)
	}
	if fs.setNproc {
		if _, _, errno = syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NPROC, uintptr(unsafe.Pointer(&fs.nproc)), 0, 0, 0); errno != 0 {
			childFail(fs, stepNproc, errno)
		}
	}
	if _, _, errno = syscall.RawSyscall6(unix.SYS_CHDIR, uintptr(unsafe.Pointer(fs.dir)), 0, 0, 0, 0, 0); errno != 0 {
		childFail(fs, stepChdir, errno)
	}
	if fs.fprog.Len > 0 {
		if _, _, errno = syscall.RawSyscall6(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fs.fprog)), 0, 0, 0); errno != 0 {
			childFail(fs, stepSeccomp, errno)
		}
	}
	// Default dispositions (SIGKILL and SIGSTOP refuse, harmlessly), then
	// the empty mask the workload starts with.
	for sig := uintptr(1); sig <= 64; sig++ {
		syscall.RawSyscall6(unix.SYS_RT_SIGACTION, sig, uintptr(unsafe.Pointer(&fs.sigDefault[0])), 0, 8, 0, 0)
	}
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&fs.emptySigmask)), 0, 8, 0, 0)
	_, _, errno = syscall.RawSyscall6(unix.SYS_EXECVE, uintptr(unsafe.Pointer(fs.path)), uintptr(unsafe.Pointer(&fs.argv[0])), uintptr(unsafe.Pointer(&fs.envv[0])), 0, 0, 0)
	childFail(fs, stepExec, errno)
	return 0, 0
}

// childFail reports step and errno to the parent and exits the child.
//
//go:norace
//go:nocheckptr
//go:nosplit
func childFail(fs *forkSpec, step uint32, errno syscall.Errno) {
	msg := [2]uint32{step, uint32(errno)}
	syscall.RawSyscall6(unix.SYS_WRITE, fs.errW, uintptr(unsafe.Pointer(&msg[0])), 8, 0, 0, 0)
	for {
		syscall.RawSyscall6(unix.SYS_EXIT_GROUP, exitSetup, 0, 0, 0, 0, 0)
	}
}

// readForkReport reads the child's report: nil once it has executed the
// workload (the pipe closed empty), else the failed step and its errno.
func readForkReport(errR *os.File) (step uint32, errno syscall.Errno, err error) {
	var msg [8]byte
	n, err := io.ReadFull(errR, msg[:])
	if n == 0 && errors.Is(err, io.EOF) {
		return 0, 0, nil
	}
	if n != 8 {
		return 0, 0, fmt.Errorf("short report from the workload's fork: %d bytes", n)
	}
	m := (*[2]uint32)(unsafe.Pointer(&msg[0]))
	return m[0], syscall.Errno(m[1]), nil
}
