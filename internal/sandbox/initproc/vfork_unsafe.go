//go:build linux && amd64

package initproc

import (
	"fmt"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"mcpbox/internal/landlock"
)

// A cold start forks the workload with a clone that shares the init's
// address space (CLONE_VM|CLONE_VFORK), from the init's main goroutine,
// instead of the copy startWalled makes on a walled thread: no page
// tables copied, no copy-on-write faults in the init afterwards, no
// thread made and ended for the walls (docs/performance.md, "The
// workload's clone shares the init's address space").
//
// The init's thread waits, stopped, until the child has executed the
// workload or exited, so the child does what other threads did for the
// copy: on cgroup v1 it moves itself into the workload's pids cgroup and
// only then makes its cgroup namespace (childMoveSelf), it writes its
// own id maps (one line mapping its own effective
// ids, setgroups denied: what the namespace's creator may write), and it
// puts up no_new_privs and Landlock on itself, then empties its
// capabilities, sets its process limit, changes directory, installs the
// seccomp filter and executes, as rawFork's child does. No thread of the
// init ever enters the workload's Landlock domain. The child runs on the
// caller's stack, so only nosplit functions and raw system calls, on
// memory prepared here, with every signal blocked until its handlers are
// back at their defaults. A failure is left in fs.report, which the
// parent reads once the clone returns.

// forksInPlace tells whether startCold forks the workload without a
// walled thread.
const forksInPlace = true

// rawVfork is syscall.rawVforkSyscall (vfork_linux_amd64.s).
func rawVfork(trap, a1, a2, a3 uintptr) (r1, errno uintptr)

// startCold starts the workload of a cold start, which the init then
// reaps; it returns once the workload has executed its command.
//
// Preconditions: the calling goroutine is the init's main goroutine
// (runInit), and the root is built. It need not be on the main thread, as
// no thread enters the workload's Landlock domain; vforkWorkload keeps
// to whichever thread it starts on until the child is gone.
func startCold(c *workloadConfig) (int, *workloadError) {
	path, werr := findCommand(c)
	if werr != nil {
		return 0, werr
	}
	fail := func(layer Layer, err error) (int, *workloadError) {
		return 0, &workloadError{Msg: err.Error(), Layer: layer, Code: exitSetup}
	}
	fs, err := newForkSpec(path, c)
	if err != nil {
		return fail("", fmt.Errorf("preparing the workload: %w", err))
	}
	fs.vfork, fs.landlockFD = true, ^uintptr(0) // no Landlock
	fs.setgroupsPath, _ = unix.BytePtrFromString("/proc/self/setgroups")
	fs.uidMapPath, _ = unix.BytePtrFromString("/proc/self/uid_map")
	fs.gidMapPath, _ = unix.BytePtrFromString("/proc/self/gid_map")
	// The sandbox uid, mapped to itself (writeIDMaps's lines): our own
	// effective ids are the only ones the child may map.
	fs.deny = []byte("deny")
	fs.uidMap = []byte(strconv.Itoa(sandboxUID) + " " + strconv.Itoa(unix.Geteuid()) + " 1\n")
	fs.gidMap = []byte(strconv.Itoa(sandboxUID) + " " + strconv.Itoa(unix.Getegid()) + " 1\n")
	if n := c.FileSize; n > 0 {
		// Process-wide, as startWorkload sets it: the child inherits it.
		if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: uint64(n), Max: uint64(n)}); err != nil {
			return fail("", fmt.Errorf("limiting file size to %d bytes: %w", n, err))
		}
	}
	if !c.NoLandlock {
		fd, _, err := landlock.Ruleset(landlockPolicy(c.Landlock))
		if err != nil {
			return fail(LayerLandlock, fmt.Errorf("applying landlock: %w", err))
		}
		defer unix.Close(fd)
		fs.landlockFD = uintptr(fd)
	}
	if fs.clone3 {
		// v2: born in the workload's cgroup (walls set cloneArgs).
		fs.cloneArgs.flags |= unix.CLONE_VM | unix.CLONE_VFORK
	}
	if c.Cgroup == cgroupMoveThread {
		// v1: no thread of the init ever enters the workload's pids
		// cgroup here, so it needs no room for one: its own limit goes
		// on now, while it is empty, and the child moves itself in
		// (vforkChild). A vfork-style parent could step out only once
		// the workload runs, its limit one off until then.
		if _, err := unix.Write(c.CgroupMaxFD, []byte(strconv.FormatInt(c.CgroupPids, 10))); err != nil {
			return fail(LayerCgroups, fmt.Errorf("limiting the workload's processes: %w", err))
		}
		fs.moveSelf, fs.cgroupTasks, fs.self = true, uintptr(c.CgroupFD), [1]byte{'0'}
	}
	pid, err := vforkWorkload(fs)
	if err != nil {
		return fail(LayerUserns, err)
	}
	if step := fs.report[0]; step != 0 {
		// The child has exited; the init reaps nothing more and exits.
		return 0, forkFailure(c, step, syscall.Errno(fs.report[1]))
	}
	return int(pid), nil
}

// vforkWorkload blocks every signal on the thread, clones and, in the
// child, runs vforkChild; the parent restores its mask once the child has
// executed or exited. Locked to its thread meanwhile: nothing between the
// two masks may let the goroutine move today (raw, nosplit calls, with
// the runtime's preemption signal blocked), and the lock keeps it so.
func vforkWorkload(fs *forkSpec) (uintptr, error) {
	runtime.LockOSThread() // nested in runInit's lock where that is held
	defer runtime.UnlockOSThread()
	all := ^uint64(0)
	if _, _, e := syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&all)), uintptr(unsafe.Pointer(&fs.oldMask)), 8, 0, 0); e != 0 {
		return 0, fmt.Errorf("blocking signals: %w", e)
	}
	pid, errno := vforkClone(fs)
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&fs.oldMask)), 0, 8, 0, 0)
	if errno != 0 {
		return 0, fmt.Errorf("creating the workload's user namespace: %w", errno)
	}
	return pid, nil
}

// vforkClone is the clone and, in the child, everything up to execve.
// The parent returns at once, not to share a frame with the child beyond
// rawVfork's results, which it writes after the child is gone.
//
// Never inlined: the child must not run in vforkWorkload's live frame.
//
//go:noinline
//go:norace
//go:nocheckptr
//go:nosplit
func vforkClone(fs *forkSpec) (uintptr, syscall.Errno) {
	// Flags first on amd64 (a stack of 0: the caller's, shared).
	var pid, errno uintptr
	if fs.clone3 {
		pid, errno = rawVfork(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&fs.cloneArgs)), unsafe.Sizeof(fs.cloneArgs), 0)
	} else if fs.moveSelf {
		// The cgroup namespace once the child is in its cgroup.
		pid, errno = rawVfork(unix.SYS_CLONE, unix.CLONE_VM|unix.CLONE_VFORK|unix.CLONE_NEWUSER|uintptr(unix.SIGCHLD), 0, 0)
	} else {
		pid, errno = rawVfork(unix.SYS_CLONE, unix.CLONE_VM|unix.CLONE_VFORK|unix.CLONE_NEWUSER|unix.CLONE_NEWCGROUP|uintptr(unix.SIGCHLD), 0, 0)
	}
	if errno != 0 || pid != 0 {
		return pid, syscall.Errno(errno)
	}
	vforkChild(fs)
	return 0, 0 // not reached
}

// vforkChild never returns: it executes the workload, or exits after
// leaving the failed step and errno in fs.report (childFail).
//
//go:norace
//go:nocheckptr
//go:nosplit
func vforkChild(fs *forkSpec) {
	if fs.moveSelf {
		childMoveSelf(fs)
	}
	childWrite(fs, fs.setgroupsPath, fs.deny)
	childWrite(fs, fs.uidMapPath, fs.uidMap)
	childWrite(fs, fs.gidMapPath, fs.gidMap)
	// The address space, and with it the dumpable flag, is the init's:
	// the init is non-dumpable from here, before the workload exists
	// (forkWalled says why). Not earlier: the maps above are /proc files
	// that a non-dumpable process would have owned by root.
	if _, _, errno := syscall.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_DUMPABLE, 0, 0, 0, 0, 0); errno != 0 {
		childFail(fs, stepDumpable, errno)
	}
	if _, _, errno := syscall.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); errno != 0 {
		childFail(fs, stepNoNewPrivs, errno)
	}
	if fs.landlockFD != ^uintptr(0) {
		if _, _, errno := syscall.RawSyscall6(unix.SYS_LANDLOCK_RESTRICT_SELF, fs.landlockFD, 0, 0, 0, 0, 0); errno != 0 {
			childFail(fs, stepLandlock, errno)
		}
	}
	childCaps(fs)
	if _, _, errno := syscall.RawSyscall6(unix.SYS_CHDIR, uintptr(unsafe.Pointer(fs.dir)), 0, 0, 0, 0, 0); errno != 0 {
		childFail(fs, stepChdir, errno)
	}
	childSeccomp(fs)
	childSigDefault(fs)
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&fs.emptySigmask)), 0, 8, 0, 0)
	_, _, errno := syscall.RawSyscall6(unix.SYS_EXECVE, uintptr(unsafe.Pointer(fs.path)), uintptr(unsafe.Pointer(&fs.argv[0])), uintptr(unsafe.Pointer(&fs.envv[0])), 0, 0, 0)
	childFail(fs, stepExec, errno)
}

// childWrite writes b to the file at path, or fails as stepIDMaps.
//
//go:norace
//go:nocheckptr
//go:nosplit
func childWrite(fs *forkSpec, path *byte, b []byte) {
	fd, _, errno := syscall.RawSyscall6(unix.SYS_OPENAT, atFDCWD, uintptr(unsafe.Pointer(path)), unix.O_WRONLY|unix.O_CLOEXEC, 0, 0, 0)
	if errno != 0 {
		childFail(fs, stepIDMaps, errno)
	}
	if _, _, errno := syscall.RawSyscall6(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0, 0, 0); errno != 0 {
		childFail(fs, stepIDMaps, errno)
	}
	syscall.RawSyscall6(unix.SYS_CLOSE, fd, 0, 0, 0, 0, 0)
}

// childMoveSelf moves the child alone into the workload's v1 pids
// cgroup, whose limit startCold has set, through the tasks file the host
// opened (the kernel checks its opener's credentials, and "0", the
// writing thread itself, needs none of the locks another task's would),
// then makes the child's cgroup namespace there, as a child born inside
// would have had it. Either failing, it exits: no workload runs outside
// its limit.
//
//go:norace
//go:nocheckptr
//go:nosplit
func childMoveSelf(fs *forkSpec) {
	n, _, errno := syscall.RawSyscall6(unix.SYS_WRITE, fs.cgroupTasks, uintptr(unsafe.Pointer(&fs.self[0])), 1, 0, 0, 0)
	if errno != 0 || n != 1 {
		if errno == 0 {
			errno = unix.EIO
		}
		childFail(fs, stepCgroup, errno)
	}
	if _, _, errno := syscall.RawSyscall6(unix.SYS_UNSHARE, unix.CLONE_NEWCGROUP, 0, 0, 0, 0, 0); errno != 0 {
		childFail(fs, stepCgroupNS, errno)
	}
}
