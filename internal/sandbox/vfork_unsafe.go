//go:build linux && amd64

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"mcpbox/internal/nofile"
)

// Go's os/exec makes a new user namespace with a plain fork: the child
// waits for the id maps, which the parent writes, and a parent stopped by
// vfork could not. That fork copies the host's page tables and
// write-protects every page the host has written, so each start costs the
// copy, the child's teardown of it at execve, and then one copy-on-write
// fault, with a TLB shoot-down, for each of those pages the host writes
// next (docs/performance.md: a third of the start's CPU on the host side).
//
// startVfork makes the same clone sharing the address space instead
// (CLONE_VM|CLONE_VFORK, as os/exec does when there is no new user
// namespace) and lets the child write its own id maps: one line mapping
// its own effective uid and gid, setgroups denied, as an unprivileged
// process may in the namespace it has just made (user_namespaces(7)). The
// child runs on the caller's stack while the caller's thread waits, so it
// makes raw system calls only, from nosplit functions, on memory prepared
// here, with every signal blocked until it has reset its handlers; the
// same rules as syscall.forkAndExecInChild1, whose steps it repeats for
// the attributes initCommand sets (in its order: process group, ids,
// ambient capabilities, parent-death signal, descriptors, the limit on
// open files, execve).

// rawVfork is syscall.rawVforkSyscall (vfork_linux_amd64.s).
func rawVfork(trap, a1, a2, a3 uintptr) (r1, errno uintptr)

// vforkSpec is everything the child uses, prepared by the parent.
type vforkSpec struct {
	trap, a1, a2 uintptr // the clone: SYS_CLONE with flags, or SYS_CLONE3
	clone3       cloneArgs

	path       *byte
	argv, envv []*byte
	fds        [5]int // the child's descriptors 0-4
	nextfd     int    // above every descriptor in fds and errW
	errW       int

	setgroupsPath, uidMapPath, gidMapPath *byte
	deny, uidMap, gidMap                  []byte
	uid, gid                              uintptr
	ambient                               []uintptr
	capHdr                                unix.CapUserHeader
	capData                               [2]unix.CapUserData
	pdeathsig                             uintptr
	setpgid                               bool

	sigDfl  kSigaction // SIG_DFL
	oldMask uint64
	report  [2]uint32 // the failed step and its errno

	// nofile, if restoreNofile, is the limit on open files this process
	// started with (soft, hard), which the child puts back if the limit
	// is still the one Go raised it to, as os/exec does; nofileNow is
	// where it reads that.
	nofile, nofileNow [2]uint64
	restoreNofile     bool
}

// cloneArgs is struct clone_args (clone3(2)), version 2.
type cloneArgs struct {
	flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls, setTID, setTIDSize, cgroup uint64
}

// kSigaction is the kernel's struct sigaction on amd64.
type kSigaction struct {
	handler, flags, restorer uintptr
	mask                     uint64
}

// The steps of the child, as it reports a failure.
const (
	vstepKeepCaps = iota + 1
	vstepSetgroups
	vstepUIDMap
	vstepGIDMap
	vstepPgid
	vstepGID
	vstepUID
	vstepCaps
	vstepAmbient
	vstepPdeathsig
	vstepFDs
	vstepExec
)

var vstepNames = [...]string{
	vstepKeepCaps: "keeping capabilities", vstepSetgroups: "denying setgroups", vstepUIDMap: "writing uid_map",
	vstepGIDMap: "writing gid_map", vstepPgid: "setting the process group", vstepGID: "setting gid", vstepUID: "setting uid",
	vstepCaps: "setting capabilities", vstepAmbient: "raising ambient capabilities", vstepPdeathsig: "setting the parent-death signal",
	vstepFDs: "arranging descriptors", vstepExec: "executing",
}

// vforkNamespaces are the clone flags startVfork takes from a command:
// new namespaces only. Another (CLONE_FILES, CLONE_SIGHAND) would let the
// child's steps change the host's descriptors or handlers.
const vforkNamespaces = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP

// errNoVfork: the command needs something startVfork does not do; it is
// started by os/exec instead.
var errNoVfork = errors.New("not startable by vfork")

// testNoVfork, set by tests only, has startCommand start every command
// by os/exec.
var testNoVfork bool

// startCommand starts c, the sandbox init, by startVfork where it can, by
// c.Start otherwise. Either way c.Wait then waits for it.
//
// Preconditions: as for startVfork.
func startCommand(c *exec.Cmd) error {
	if testNoVfork {
		return c.Start()
	}
	err := startVfork(c)
	if errors.Is(err, errNoVfork) {
		return c.Start()
	}
	return err
}

// startVfork starts c with one clone sharing the address space and sets
// c.Process; errNoVfork if c asks for anything beyond what initCommand
// sets or its stdio are not files.
//
// Preconditions: the calling goroutine is locked to its thread (the spawn
// thread: the parent-death signal follows it), whose effective ids are the
// ones c's maps name.
func startVfork(c *exec.Cmd) error {
	fs, devNull, err := newVforkSpec(c)
	if err != nil {
		return err
	}
	if devNull != nil {
		defer devNull.Close()
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("creating the start report pipe: %w", err)
	}
	errR := os.NewFile(uintptr(p[0]), "vfork-report")
	defer errR.Close()
	fs.errW = p[1]
	for _, fd := range append(fs.fds[:], fs.errW) {
		fs.nextfd = max(fs.nextfd, fd+1)
	}
	pid, errno := vforkExec(fs)
	unix.Close(p[1])
	switch errno {
	case 0:
	case unix.EINVAL, unix.ENOSYS, unix.EPERM, unix.E2BIG:
		// A kernel that refuses this clone (CLONE_VM with the namespaces,
		// or clone3) gets os/exec's, which reports its own error.
		return fmt.Errorf("%w: %w", errNoVfork, os.NewSyscallError("clone", errno))
	default: // a limit (EAGAIN, ENOSPC, ENOMEM): a second clone would meet it too
		return os.NewSyscallError("clone", errno)
	}
	var rep [8]byte
	n, _ := readFull(errR, rep[:])
	if n != 0 {
		var ws unix.WaitStatus
		for {
			if _, err := unix.Wait4(int(pid), &ws, 0, nil); err != unix.EINTR {
				break
			}
		}
		step, e := *(*uint32)(unsafe.Pointer(&rep[0])), syscall.Errno(*(*uint32)(unsafe.Pointer(&rep[4])))
		name := "starting"
		if int(step) < len(vstepNames) && vstepNames[step] != "" {
			name = vstepNames[step]
		}
		if step == vstepSetgroups || step == vstepUIDMap || step == vstepGIDMap {
			// A host that refuses a namespace's own maps (an LSM, say)
			// may still take them from the parent: os/exec's way.
			return fmt.Errorf("%w: %s: %w", errNoVfork, name, e)
		}
		return fmt.Errorf("%s: %w", name, e)
	}
	proc, err := os.FindProcess(int(pid))
	if err != nil { // not on Linux: it finds any pid
		return err
	}
	c.Process = proc
	return nil
}

func readFull(f *os.File, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := f.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// newVforkSpec prepares the child's work for c, and opens /dev/null for
// the stdio c leaves nil (the caller closes it).
func newVforkSpec(c *exec.Cmd) (*vforkSpec, *os.File, error) {
	a := c.SysProcAttr
	if a == nil || a.Cloneflags&unix.CLONE_NEWUSER == 0 || a.Cloneflags&^vforkNamespaces != 0 || a.Pgid != 0 ||
		c.Cancel != nil || c.Err != nil || slices.ContainsFunc(a.AmbientCaps, func(c uintptr) bool { return c >= 64 }) ||
		a.Unshareflags != 0 || a.Setsid || a.Setctty || a.Noctty ||
		a.Foreground || a.Ptrace || a.Chroot != "" || a.PidFD != nil || a.GidMappingsEnableSetgroups || c.Dir != "" ||
		len(a.UidMappings) != 1 || len(a.GidMappings) != 1 || a.UidMappings[0].Size != 1 || a.GidMappings[0].Size != 1 ||
		a.Credential == nil || !a.Credential.NoSetGroups || len(a.Credential.Groups) != 0 || c.Process != nil {
		return nil, nil, errNoVfork
	}
	// One line mapping the child's own effective ids is all an
	// unprivileged child may write.
	if a.UidMappings[0].HostID != unix.Geteuid() || a.GidMappings[0].HostID != unix.Getegid() {
		return nil, nil, errNoVfork
	}
	files := make([]*os.File, 0, 3+len(c.ExtraFiles))
	var devNull *os.File
	for _, s := range []any{c.Stdin, c.Stdout, c.Stderr} {
		if s == nil {
			if devNull == nil {
				f, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
				if err != nil {
					return nil, nil, err
				}
				devNull = f
			}
			files = append(files, devNull)
			continue
		}
		f, ok := s.(*os.File)
		if !ok || f == nil {
			return nil, nil, errNoVfork
		}
		files = append(files, f)
	}
	files = append(files, c.ExtraFiles...)
	fs := &vforkSpec{trap: unix.SYS_CLONE, pdeathsig: uintptr(a.Pdeathsig), setpgid: a.Setpgid,
		uid: uintptr(a.Credential.Uid), gid: uintptr(a.Credential.Gid), ambient: a.AmbientCaps,
		capHdr: unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}}
	fail := func(err error) (*vforkSpec, *os.File, error) {
		if devNull != nil {
			devNull.Close()
		}
		return nil, nil, err
	}
	if len(files) != len(fs.fds) {
		return fail(errNoVfork)
	}
	for i, f := range files {
		if f == nil {
			return fail(errNoVfork)
		}
		fs.fds[i] = int(f.Fd())
	}
	flags := a.Cloneflags | unix.CLONE_VM | unix.CLONE_VFORK
	if a.UseCgroupFD {
		fs.trap = unix.SYS_CLONE3
		fs.clone3 = cloneArgs{flags: uint64(flags) | unix.CLONE_INTO_CGROUP, exitSignal: uint64(unix.SIGCHLD), cgroup: uint64(a.CgroupFD)}
		fs.a1, fs.a2 = uintptr(unsafe.Pointer(&fs.clone3)), unsafe.Sizeof(fs.clone3)
	} else {
		fs.a1 = flags | uintptr(unix.SIGCHLD)
	}
	var err error
	if fs.path, err = unix.BytePtrFromString(c.Path); err != nil {
		return fail(err)
	}
	if fs.argv, err = syscall.SlicePtrFromStrings(c.Args); err != nil {
		return fail(err)
	}
	env := c.Env
	if env == nil {
		env = os.Environ() // as os/exec
	}
	if fs.envv, err = syscall.SlicePtrFromStrings(env); err != nil {
		return fail(err)
	}
	fs.setgroupsPath, _ = unix.BytePtrFromString("/proc/self/setgroups")
	fs.uidMapPath, _ = unix.BytePtrFromString("/proc/self/uid_map")
	fs.gidMapPath, _ = unix.BytePtrFromString("/proc/self/gid_map")
	fs.deny = []byte("deny")
	fs.uidMap = idMapLine(a.UidMappings[0])
	fs.gidMap = idMapLine(a.GidMappings[0])
	if soft, hard, ok := nofile.Start(); ok {
		fs.nofile, fs.restoreNofile = [2]uint64{soft, hard}, true
	}
	return fs, devNull, nil
}

func idMapLine(m syscall.SysProcIDMap) []byte {
	return []byte(strconv.Itoa(m.ContainerID) + " " + strconv.Itoa(m.HostID) + " " + strconv.Itoa(m.Size) + "\n")
}

// vforkExec blocks every signal on the thread, clones and, in the child,
// runs vforkChild; the parent restores its mask once the child has
// executed or exited.
func vforkExec(fs *vforkSpec) (uintptr, syscall.Errno) {
	syscall.ForkLock.Lock()
	defer syscall.ForkLock.Unlock()
	all := ^uint64(0)
	if _, _, e := syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&all)), uintptr(unsafe.Pointer(&fs.oldMask)), 8, 0, 0); e != 0 {
		return 0, e
	}
	pid, errno := vforkClone(fs)
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&fs.oldMask)), 0, 8, 0, 0)
	return pid, errno
}

// vforkClone is the clone and, in the child, everything up to execve.
// The parent returns at once, not to share a frame with the child beyond
// rawVfork's results, which it writes after the child is gone.
//
// Never inlined: the child must not run in vforkExec's live frame.
//
//go:noinline
//go:norace
//go:nocheckptr
//go:nosplit
func vforkClone(fs *vforkSpec) (uintptr, syscall.Errno) {
	pid, errno := rawVfork(fs.trap, fs.a1, fs.a2, 0)
	if errno != 0 || pid != 0 {
		return pid, syscall.Errno(errno)
	}
	vforkChild(fs)
	return 0, 0 // not reached
}

// vforkChild never returns: it executes the command or exits with 253
// after writing the failed step and errno to errW.
//
//go:norace
//go:nocheckptr
//go:nosplit
func vforkChild(fs *vforkSpec) {
	// Every signal with a handler (the runtime's) goes back to SIG_DFL
	// before signals are unblocked, so that no Go handler ever runs in
	// the child; ignored ones stay ignored, as with os/exec. Read here,
	// from the child's own copy of the table: a handler the parent adds
	// meanwhile (signal.Notify) cannot slip through.
	for sig := uintptr(1); sig <= 64; sig++ {
		if sig == uintptr(unix.SIGKILL) || sig == uintptr(unix.SIGSTOP) {
			continue
		}
		var old kSigaction
		if _, _, e := syscall.RawSyscall6(unix.SYS_RT_SIGACTION, sig, 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0); e != 0 {
			continue
		}
		if old.handler != 0 && old.handler != 1 { // SIG_DFL, SIG_IGN
			syscall.RawSyscall6(unix.SYS_RT_SIGACTION, sig, uintptr(unsafe.Pointer(&fs.sigDfl)), 0, 8, 0, 0)
		}
	}
	if len(fs.ambient) > 0 {
		if _, _, e := syscall.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_KEEPCAPS, 1, 0, 0, 0, 0); e != 0 {
			vforkFail(fs, vstepKeepCaps, e)
		}
	}
	vforkWrite(fs, fs.setgroupsPath, fs.deny, vstepSetgroups)
	vforkWrite(fs, fs.uidMapPath, fs.uidMap, vstepUIDMap)
	vforkWrite(fs, fs.gidMapPath, fs.gidMap, vstepGIDMap)
	if fs.setpgid {
		if _, _, e := syscall.RawSyscall6(unix.SYS_SETPGID, 0, 0, 0, 0, 0, 0); e != 0 {
			vforkFail(fs, vstepPgid, e)
		}
	}
	if _, _, e := syscall.RawSyscall6(unix.SYS_SETGID, fs.gid, 0, 0, 0, 0, 0); e != 0 {
		vforkFail(fs, vstepGID, e)
	}
	if _, _, e := syscall.RawSyscall6(unix.SYS_SETUID, fs.uid, 0, 0, 0, 0, 0); e != 0 {
		vforkFail(fs, vstepUID, e)
	}
	if len(fs.ambient) > 0 {
		if _, _, e := syscall.RawSyscall6(unix.SYS_CAPGET, uintptr(unsafe.Pointer(&fs.capHdr)), uintptr(unsafe.Pointer(&fs.capData[0])), 0, 0, 0, 0); e != 0 {
			vforkFail(fs, vstepCaps, e)
		}
		for _, c := range fs.ambient {
			fs.capData[c>>5].Permitted |= 1 << (c & 31)
			fs.capData[c>>5].Inheritable |= 1 << (c & 31)
		}
		if _, _, e := syscall.RawSyscall6(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&fs.capHdr)), uintptr(unsafe.Pointer(&fs.capData[0])), 0, 0, 0, 0); e != 0 {
			vforkFail(fs, vstepCaps, e)
		}
		for _, c := range fs.ambient {
			if _, _, e := syscall.RawSyscall6(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, c, 0, 0, 0); e != 0 {
				vforkFail(fs, vstepAmbient, e)
			}
		}
	}
	// No check that the parent is still alive, as os/exec makes: in a new
	// pid namespace getppid is 0 whatever the parent does. A parent that
	// died before this left the init without its config: it exits.
	if fs.pdeathsig != 0 {
		if _, _, e := syscall.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, fs.pdeathsig, 0, 0, 0, 0); e != 0 {
			vforkFail(fs, vstepPdeathsig, e)
		}
	}
	// Descriptors as os/exec arranges them: first every one that would be
	// overwritten before it is used moves above them all, then each goes
	// to its place, without close-on-exec.
	if fs.errW < len(fs.fds) {
		r, _, e := syscall.RawSyscall6(unix.SYS_DUP3, uintptr(fs.errW), uintptr(fs.nextfd), unix.O_CLOEXEC, 0, 0, 0)
		if e != 0 {
			vforkFail(fs, vstepFDs, e)
		}
		fs.errW = int(r)
		fs.nextfd++
	}
	for i := 0; i < len(fs.fds); i++ {
		if fs.fds[i] < i {
			r, _, e := syscall.RawSyscall6(unix.SYS_DUP3, uintptr(fs.fds[i]), uintptr(fs.nextfd), unix.O_CLOEXEC, 0, 0, 0)
			if e != 0 {
				vforkFail(fs, vstepFDs, e)
			}
			fs.fds[i] = int(r)
			fs.nextfd++
		}
	}
	for i := 0; i < len(fs.fds); i++ {
		if fs.fds[i] == i {
			if _, _, e := syscall.RawSyscall6(unix.SYS_FCNTL, uintptr(i), unix.F_SETFD, 0, 0, 0, 0); e != 0 {
				vforkFail(fs, vstepFDs, e)
			}
			continue
		}
		if _, _, e := syscall.RawSyscall6(unix.SYS_DUP3, uintptr(fs.fds[i]), uintptr(i), 0, 0, 0, 0); e != 0 {
			vforkFail(fs, vstepFDs, e)
		}
	}
	// The limit on open files this process started with, as os/exec
	// puts it back (syscall.forkAndExecInChild1): unless the limit was
	// changed since Go raised it.
	if fs.restoreNofile {
		_, _, e := syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NOFILE, 0, uintptr(unsafe.Pointer(&fs.nofileNow)), 0, 0)
		if e != 0 || fs.nofileNow[0] == fs.nofile[1]-1 && fs.nofileNow[1] == fs.nofile[1] {
			syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NOFILE, uintptr(unsafe.Pointer(&fs.nofile)), 0, 0, 0)
		}
	}
	// Signals blocked until here: not one reaches the child while it is
	// still in the host's process group, or half set up.
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&fs.oldMask)), 0, 8, 0, 0)
	_, _, e := syscall.RawSyscall6(unix.SYS_EXECVE, uintptr(unsafe.Pointer(fs.path)), uintptr(unsafe.Pointer(&fs.argv[0])), uintptr(unsafe.Pointer(&fs.envv[0])), 0, 0, 0)
	vforkFail(fs, vstepExec, e)
}

//go:norace
//go:nocheckptr
//go:nosplit
func vforkWrite(fs *vforkSpec, path *byte, b []byte, step uint32) {
	fd, _, e := syscall.RawSyscall6(unix.SYS_OPENAT, atFDCWD, uintptr(unsafe.Pointer(path)), unix.O_WRONLY|unix.O_CLOEXEC, 0, 0, 0)
	if e != 0 {
		vforkFail(fs, step, e)
	}
	if _, _, e := syscall.RawSyscall6(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0, 0, 0); e != 0 {
		vforkFail(fs, step, e)
	}
	syscall.RawSyscall6(unix.SYS_CLOSE, fd, 0, 0, 0, 0, 0)
}

// vforkFail reports step and errno on errW and exits. The report lives in
// fs, not on the stack the child shares with its parent.
//
//go:norace
//go:nocheckptr
//go:nosplit
func vforkFail(fs *vforkSpec, step uint32, e syscall.Errno) {
	fs.report = [2]uint32{step, uint32(e)}
	syscall.RawSyscall6(unix.SYS_WRITE, uintptr(fs.errW), uintptr(unsafe.Pointer(&fs.report[0])), 8, 0, 0, 0)
	for {
		syscall.RawSyscall6(unix.SYS_EXIT_GROUP, 253, 0, 0, 0, 0, 0)
	}
}

// atFDCWD is AT_FDCWD (-100) as a system call argument.
const atFDCWD = ^uintptr(99)
