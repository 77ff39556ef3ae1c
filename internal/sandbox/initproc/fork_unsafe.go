//go:build linux

package initproc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"mcpbox/internal/nofile"
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
// the Landlock domain), empty its capability sets, set RLIMIT_NPROC, put
// back the limit on open files the init started with (internal/nofile),
// change directory, install the seccomp filter, reset signal handlers,
// unblock signals and execve. Its failures come back over a close-on-exec pipe as
// a step and an errno, the way os/exec reports a failed execve.
//
// On amd64 a cold start's child is cloned sharing the init's memory
// instead, and puts up its walls itself (vfork_unsafe.go); this fork
// serves the workload forked ahead (hold_linux.go), and cold starts
// elsewhere.

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
	// clone3: the fork is a clone3 with cloneArgs, into the workload's
	// cgroup (cgroupClone), not a clone.
	clone3    bool
	cloneArgs cloneArgs
	// nofile, if restoreNofile, is the limit on open files the init
	// started with, before Go raised it; the child puts it back, as
	// os/exec does, if the limit is still the one Go set (read into
	// nofileNow).
	nofile, nofileNow unix.Rlimit
	restoreNofile     bool

	// ahead: forked while the sandbox is prepared (warm_linux.go), before
	// its command is known. The child puts up every wall, says it is
	// armed and waits on claimFD for the claim the host lays out
	// (claimLayout) for the child's copy of claim, at the same address,
	// with the workload's stdin, stdout and stderr; path, dir, argv and
	// envv above are unused.
	ahead     bool
	claimFD   uintptr // the child's end of the claim socket
	claimPeer uintptr // the other end, which the child closes
	claim     *[claimWords]uint64
	claimOOB  [32]byte // one SCM_RIGHTS message of 3 fds: CmsgSpace(12)
	claimIov  unix.Iovec
	claimMsg  unix.Msghdr
	statx     unix.Statx_t

	// vfork: the child shares the init's memory (vfork_unsafe.go). It
	// writes its own id maps (the paths and lines below), turns the init
	// non-dumpable and enforces landlockFD itself (none: ^0); a failure
	// goes to report, not to errW. oldMask is the parent's signal mask.
	vfork                                 bool
	landlockFD                            uintptr
	setgroupsPath, uidMapPath, gidMapPath *byte
	deny, uidMap, gidMap                  []byte
	report                                [2]uint32
	oldMask                               uint64
	// moveSelf (cgroup v1, cgroupMoveThread): the vfork child writes
	// self, "0", to cgroupTasks, the workload cgroup's tasks file, and
	// only then makes its cgroup namespace (childMoveSelf).
	moveSelf    bool
	cgroupTasks uintptr
	self        [1]byte
}

// cloneArgs is struct clone_args (clone3(2)), version 2.
type cloneArgs struct {
	flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls, setTID, setTIDSize, cgroup uint64
}

// workloadCloneFlags are the namespaces the workload's fork makes.
const workloadCloneFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWCGROUP

// atFDCWD is AT_FDCWD (-100) as a system call argument.
const atFDCWD = ^uintptr(99)

// claimWords is the size of the claim buffer in words: one workload
// message (warmMsgMax), pointers included.
const claimWords = warmMsgMax / 8

// The claim's header words (claimLayout).
const (
	claimArgv = iota
	claimEnvv
	claimDir
	claimCands  // the NULL-terminated candidate paths (lookCandidates)
	claimDirect // 1: the one candidate is the command's own path
	claimHeader
)

// The steps of the child, as it reports a failure.
const (
	stepSync = iota + 1
	stepBounding
	stepCaps
	stepNproc
	stepChdir
	stepSeccomp
	stepExec
	stepClaim
	stepLookup   // the stat of a command with a slash failed
	stepNotFound // no candidate in PATH is an executable file
	stepIDMaps   // a vfork child writing its own id maps
	stepDumpable
	stepNoNewPrivs
	stepLandlock
	stepCgroup   // a vfork child moving itself into the workload's cgroup
	stepCgroupNS // then making its cgroup namespace
)

var stepNames = map[uint32]string{
	stepSync: "waiting for the workload's id maps", stepBounding: "dropping capabilities from the bounding set",
	stepCaps: "dropping capabilities", stepNproc: "limiting processes", stepChdir: "changing to the working directory",
	stepSeccomp: "installing seccomp filter", stepExec: "executing", stepClaim: "receiving the workload's command",
	stepLookup: "looking the command up", stepNotFound: "looking the command up",
	stepIDMaps: "writing the workload's id maps", stepDumpable: "setting init non-dumpable",
	stepNoNewPrivs: "setting no_new_privs", stepLandlock: "enforcing landlock ruleset",
	stepCgroup: "moving into the workload's cgroup", stepCgroupNS: "creating the workload's cgroup namespace",
}

// newForkSpec prepares a cold start's child: the command at path, and
// the walls of c. The caller sets the descriptors its fork needs.
func newForkSpec(path string, c *workloadConfig) (*forkSpec, error) {
	fs := &forkSpec{capHdr: unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}}
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
	return fs, fs.walls(c)
}

// newAheadForkSpec is newForkSpec for a workload forked ahead: its
// command comes later, over claimFD (its peer is claimPeer).
func newAheadForkSpec(c *workloadConfig, syncR, syncW, errW *os.File, claimFD, claimPeer int) (*forkSpec, error) {
	fs := &forkSpec{syncR: syncR.Fd(), syncW: syncW.Fd(), errW: errW.Fd(), capHdr: unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3},
		ahead: true, claimFD: uintptr(claimFD), claimPeer: uintptr(claimPeer), claim: new([claimWords]uint64)}
	fs.claimIov = unix.Iovec{Base: (*byte)(unsafe.Pointer(&fs.claim[0]))}
	fs.claimIov.SetLen(8 * claimWords)
	fs.claimMsg = unix.Msghdr{Iov: &fs.claimIov, Iovlen: 1, Control: &fs.claimOOB[0]}
	fs.claimMsg.SetControllen(len(fs.claimOOB))
	return fs, fs.walls(c)
}

// claimBase is the address of the claim buffer, the same in the child of
// an ahead fork (claimLayout).
func (fs *forkSpec) claimBase() uintptr { return uintptr(unsafe.Pointer(&fs.claim[0])) }

// walls fills in what the child needs for its walls.
func (fs *forkSpec) walls(c *workloadConfig) error {
	last, err := lastCap()
	if err != nil {
		return err
	}
	fs.lastCap = uintptr(last)
	if c.Nproc > 0 {
		fs.nproc = unix.Rlimit{Cur: uint64(c.Nproc), Max: uint64(c.Nproc)}
		fs.setNproc = true
	}
	if soft, hard, ok := nofile.Start(); ok {
		fs.nofile, fs.restoreNofile = unix.Rlimit{Cur: soft, Max: hard}, true
	}
	if c.Cgroup == cgroupClone {
		fs.clone3 = true
		fs.cloneArgs = cloneArgs{flags: workloadCloneFlags | unix.CLONE_INTO_CGROUP, exitSignal: uint64(unix.SIGCHLD), cgroup: uint64(c.CgroupFD)}
	}
	if prog := unpackFilter(c.Seccomp); len(prog) > 0 {
		for _, in := range prog {
			fs.filter = append(fs.filter, unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K})
		}
		fs.fprog = unix.SockFprog{Len: uint16(len(fs.filter)), Filter: &fs.filter[0]}
	}
	return nil
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
	if errno != 0 && fs.clone3 {
		return 0, fmt.Errorf("creating the workload's user namespace in its cgroup: %w", errno)
	}
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
	var pid uintptr
	var errno syscall.Errno
	if fs.clone3 {
		pid, _, errno = syscall.RawSyscall6(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&fs.cloneArgs)), unsafe.Sizeof(fs.cloneArgs), 0, 0, 0, 0)
	} else {
		pid, _, errno = syscall.RawSyscall6(unix.SYS_CLONE, uintptr(workloadCloneFlags|unix.SIGCHLD), 0, 0, 0, 0, 0)
	}
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
	childCaps(fs)
	var path, dir, argv, envv uintptr
	if fs.ahead {
		// Forked ahead: the filter and the default dispositions go on
		// before the wait, off the start path. The filter, a deny list,
		// allows the few calls left before execve.
		childSeccomp(fs)
		childSigDefault(fs)
		dir, argv, envv = childClaim(fs)
		path = childLookup(fs)
	} else {
		path, dir = uintptr(unsafe.Pointer(fs.path)), uintptr(unsafe.Pointer(fs.dir))
		argv, envv = uintptr(unsafe.Pointer(&fs.argv[0])), uintptr(unsafe.Pointer(&fs.envv[0]))
	}
	if _, _, errno = syscall.RawSyscall6(unix.SYS_CHDIR, dir, 0, 0, 0, 0, 0); errno != 0 {
		childFail(fs, stepChdir, errno)
	}
	if !fs.ahead {
		childSeccomp(fs)
		childSigDefault(fs)
	}
	// The empty mask the workload starts with.
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&fs.emptySigmask)), 0, 8, 0, 0)
	_, _, errno = syscall.RawSyscall6(unix.SYS_EXECVE, path, argv, envv, 0, 0, 0)
	childFail(fs, stepExec, errno)
	return 0, 0
}

// childCaps empties the child's capability sets, the bounding set first
// (that needs CAP_SETPCAP), sets its process limit and puts back the
// limit on open files the init started with.
//
//go:norace
//go:nocheckptr
//go:nosplit
func childCaps(fs *forkSpec) {
	for c := uintptr(0); c <= fs.lastCap; c++ {
		if _, _, errno := syscall.RawSyscall6(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, c, 0, 0, 0, 0); errno != 0 && errno != unix.EINVAL {
			childFail(fs, stepBounding, errno)
		}
	}
	if _, _, errno := syscall.RawSyscall6(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&fs.capHdr)), uintptr(unsafe.Pointer(&fs.capData[0])), 0, 0, 0, 0); errno != 0 {
		childFail(fs, stepCaps, errno)
	}
	if fs.setNproc {
		if _, _, errno := syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NPROC, uintptr(unsafe.Pointer(&fs.nproc)), 0, 0, 0); errno != 0 {
			childFail(fs, stepNproc, errno)
		}
	}
	if fs.restoreNofile {
		_, _, e := syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NOFILE, 0, uintptr(unsafe.Pointer(&fs.nofileNow)), 0, 0)
		if e != 0 || fs.nofileNow.Cur == fs.nofile.Max-1 && fs.nofileNow.Max == fs.nofile.Max {
			syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NOFILE, uintptr(unsafe.Pointer(&fs.nofile)), 0, 0, 0)
		}
	}
}

// childSeccomp installs the workload's seccomp filter, if any.
//
//go:norace
//go:nocheckptr
//go:nosplit
func childSeccomp(fs *forkSpec) {
	if fs.fprog.Len > 0 {
		if _, _, errno := syscall.RawSyscall6(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fs.fprog)), 0, 0, 0); errno != 0 {
			childFail(fs, stepSeccomp, errno)
		}
	}
}

// childSigDefault resets every signal to its default disposition
// (SIGKILL and SIGSTOP refuse, harmlessly); the signals stay blocked.
//
//go:norace
//go:nocheckptr
//go:nosplit
func childSigDefault(fs *forkSpec) {
	for sig := uintptr(1); sig <= 64; sig++ {
		syscall.RawSyscall6(unix.SYS_RT_SIGACTION, sig, uintptr(unsafe.Pointer(&fs.sigDefault[0])), 0, 8, 0, 0)
	}
}

// childClaim is the child of an ahead fork waiting for its workload: it
// receives the claim the host laid out for it (claimLayout) into its copy
// of fs.claim, whose pointers are valid here, and the workload's stdio,
// which it puts on fds 0-2. It returns the command's directory, argv and
// envv. The other end going away (EOF) ends the child.
//
//go:norace
//go:nocheckptr
//go:nosplit
func childClaim(fs *forkSpec) (dir, argv, envv uintptr) {
	syscall.RawSyscall6(unix.SYS_CLOSE, fs.claimPeer, 0, 0, 0, 0, 0)
	// Armed: every wall is up (holdWorkload waits for this before the
	// sandbox is ready).
	b := [1]byte{1}
	if _, _, errno := syscall.RawSyscall6(unix.SYS_WRITE, fs.claimFD, uintptr(unsafe.Pointer(&b[0])), 1, 0, 0, 0); errno != 0 {
		childFail(fs, stepClaim, errno)
	}
	n, _, errno := syscall.RawSyscall6(unix.SYS_RECVMSG, fs.claimFD, uintptr(unsafe.Pointer(&fs.claimMsg)), unix.MSG_CMSG_CLOEXEC, 0, 0, 0)
	if errno != 0 || n < 8*claimHeader || fs.claimMsg.Flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		childFail(fs, stepClaim, errno)
	}
	// One SCM_RIGHTS header (16 bytes on 64-bit) and 3 int32 fds.
	h := (*unix.Cmsghdr)(unsafe.Pointer(&fs.claimOOB[0]))
	if fs.claimMsg.Controllen < 16+12 || h.Len != 16+12 || h.Level != unix.SOL_SOCKET || h.Type != unix.SCM_RIGHTS {
		childFail(fs, stepClaim, unix.EBADMSG)
	}
	fds := (*[3]int32)(unsafe.Pointer(&fs.claimOOB[16]))
	for i := range uintptr(3) {
		// A received fd is never 0-2 (they are open: /dev/null); the
		// received ones are close-on-exec.
		if _, _, errno = syscall.RawSyscall6(unix.SYS_DUP3, uintptr(fds[i]), i, 0, 0, 0, 0); errno != 0 {
			childFail(fs, stepClaim, errno)
		}
	}
	return uintptr(fs.claim[claimDir]), uintptr(fs.claim[claimArgv]), uintptr(fs.claim[claimEnvv])
}

// childLookup is lookPath in the child: the same candidates, tried the
// same way (a stat that follows symlinks, from the init's working
// directory), before chdir as in the init. Once it has the command it
// tells the host over the claim socket that the claim was taken (so that
// the report pipe ending empty means an execve, not a child that died
// waiting: awaitExec).
//
//go:norace
//go:nocheckptr
//go:nosplit
func childLookup(fs *forkSpec) uintptr {
	base := uintptr(unsafe.Pointer(&fs.claim[0]))
	first := (uintptr(fs.claim[claimCands]) - base) / 8
	direct := fs.claim[claimDirect] != 0
	path := uintptr(0)
	for k := first; k < claimWords && fs.claim[k] != 0; k++ {
		p := uintptr(fs.claim[k])
		_, _, errno := syscall.RawSyscall6(unix.SYS_STATX, atFDCWD, p, 0, unix.STATX_TYPE|unix.STATX_MODE, uintptr(unsafe.Pointer(&fs.statx)), 0)
		if direct {
			if errno != 0 {
				childFail(fs, stepLookup, errno)
			}
			path = p
			break
		}
		if errno == 0 && fs.statx.Mode&unix.S_IFMT == unix.S_IFREG && fs.statx.Mode&0o111 != 0 {
			path = p
			break
		}
	}
	if path == 0 {
		childFail(fs, stepNotFound, 0)
	}
	b := [1]byte{1}
	if _, _, errno := syscall.RawSyscall6(unix.SYS_WRITE, fs.claimFD, uintptr(unsafe.Pointer(&b[0])), 1, 0, 0, 0); errno != 0 {
		childFail(fs, stepClaim, errno)
	}
	return path
}

// claimLayout lays out a claim for the child of an ahead fork, whose copy
// of the claim buffer is at base: the header words (claimArgv...), the
// NULL-terminated pointer arrays of argv, envv and the candidate paths,
// then the NUL-terminated strings, all pointers into that copy. It fails
// if the claim does not fit the buffer or a string holds a NUL.
func claimLayout(base uintptr, dir string, args, env, cands []string, direct bool) ([]byte, error) {
	n := claimHeader + len(args) + 1 + len(env) + 1 + len(cands) + 1
	if n > claimWords {
		return nil, fmt.Errorf("the workload's command and environment have %d strings, more than %d", n, claimWords)
	}
	words := make([]uint64, n)
	var strs []byte
	add := func(s string) (uint64, error) {
		if strings.IndexByte(s, 0) >= 0 { // as newForkSpec's BytePtrFromString in a cold start
			return 0, fmt.Errorf("preparing the workload: %w", unix.EINVAL)
		}
		p := uint64(base + uintptr(8*n+len(strs)))
		strs = append(append(strs, s...), 0)
		return p, nil
	}
	var err error
	if words[claimDir], err = add(dir); err != nil {
		return nil, err
	}
	if direct {
		words[claimDirect] = 1
	}
	i := claimHeader
	for _, list := range []struct {
		head int
		strs []string
	}{{claimArgv, args}, {claimEnvv, env}, {claimCands, cands}} {
		words[list.head] = uint64(base + uintptr(8*i))
		for _, s := range list.strs {
			if words[i], err = add(s); err != nil {
				return nil, err
			}
			i++
		}
		i++ // NULL
	}
	if size := 8*n + len(strs); size > 8*claimWords {
		return nil, fmt.Errorf("the workload's command and environment take %d bytes, more than %d", size, 8*claimWords)
	}
	b := make([]byte, 0, 8*n+len(strs))
	for _, w := range words {
		b = binary.NativeEndian.AppendUint64(b, w)
	}
	return append(b, strs...), nil
}

// childFail reports step and errno to the parent and exits the child: in
// fs.report, which the parent of a vfork shares, else on errW.
//
//go:norace
//go:nocheckptr
//go:nosplit
func childFail(fs *forkSpec, step uint32, errno syscall.Errno) {
	fs.report = [2]uint32{step, uint32(errno)}
	if !fs.vfork {
		syscall.RawSyscall6(unix.SYS_WRITE, fs.errW, uintptr(unsafe.Pointer(&fs.report[0])), 8, 0, 0, 0)
	}
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
