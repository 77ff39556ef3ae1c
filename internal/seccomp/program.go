//go:build linux && (amd64 || arm64)

package seccomp

import (
	"fmt"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Offsets into struct seccomp_data (include/uapi/linux/seccomp.h), which
// x/sys does not name: int nr; u32 arch; u64 instruction_pointer;
// u64 args[6].
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// argLo is the offset of the low 32 bits of syscall argument i. Both
// supported architectures are little endian, so the low word comes first.
// Every argument this filter inspects is an int, unsigned int or umode_t
// in the kernel (flags of clone included: the kernel truncates them to 32
// bits), so the high word is ignored by the kernel and must be ignored here
// too.
func argLo(i int) uint32 { return offArgs + 8*uint32(i) }

// Values the kernel uses but x/sys does not export.
const (
	sockTypeMask = 0xf // SOCK_TYPE_MASK, include/linux/net.h

	// Personalities, include/uapi/linux/personality.h.
	perLinux     = 0x0000
	perLinux32   = 0x0008
	perUname26   = 0x0020000
	perQueryOnly = 0xffffffff

	// __O_TMPFILE (include/uapi/asm-generic/fcntl.h): O_TMPFILE without
	// O_DIRECTORY, which has another value on arm64 than on amd64. The kernel
	// takes the mode of any open with O_CREAT or this bit (WILL_CREATE in
	// fs/open.c).
	oTmpfileBit = unix.O_TMPFILE &^ unix.O_DIRECTORY
)

// setIDBits are S_ISUID and S_ISGID: a file of the workload with either bit
// becomes a setuid or setgid binary of the host user on an output
// directory (see checkMode).
const setIDBits = unix.S_ISUID | unix.S_ISGID

// createFlags are the open flags that make the kernel use the mode argument.
const createFlags = unix.O_CREAT | oTmpfileBit

// modeSyscall is a syscall that sets a file mode: chmod and fchmod, file
// creation, mknod.
type modeSyscall struct {
	nr   uint32
	mode int // index of the mode argument
	// flags is the index of the open flags argument, whose create flags
	// decide whether the mode counts; 0 for syscalls that always apply
	// it (no such syscall takes flags first).
	flags int
}

// modeSyscalls are checked on every supported architecture; archModeSyscalls
// adds the legacy path forms that only amd64 has. openat comes first: it is
// by far the most frequent, and the dispatch is linear.
var modeSyscalls = []modeSyscall{
	{nr: unix.SYS_OPENAT, mode: 3, flags: 2},
	{nr: unix.SYS_FCHMOD, mode: 1},
	{nr: unix.SYS_FCHMODAT, mode: 2},
	{nr: unix.SYS_FCHMODAT2, mode: 2},
	{nr: unix.SYS_MKNODAT, mode: 2},
}

// nsFlags are the clone flags that create a namespace.
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// denied are the syscalls refused with EPERM whatever their arguments, on
// every supported architecture; archDenied adds the per-architecture ones.
var denied = []uint32{
	// The filesystem view is final when the workload starts; new mounts
	// or a new root could undo read-only, nosuid and noexec mounts.
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT,
	unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK,
	unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE, unix.SYS_OPEN_TREE_ATTR,
	unix.SYS_MOUNT_SETATTR,

	// Reading or steering other processes, and learning kernel pointer
	// order (kcmp).
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
	unix.SYS_KCMP, unix.SYS_PIDFD_GETFD,

	// The kernel keyring is not namespaced: keys of the host user are
	// reachable from inside.
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,

	// Frequent exploit primitives with no use in an MCP server: eBPF,
	// perf, userfaultfd (stretches race windows), io_uring (runs
	// operations this filter never sees).
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,

	// Loading code into the kernel or replacing it.
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_INIT_MODULE,
	unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,

	// File handles bypass path-based checks (the "shocker" escape).
	unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,

	// Host administration and kernel log (which leaks addresses). Time can
	// only be set, so settimeofday and clock_settime go; adjtimex and
	// clock_adjtime stay because glibc's ntp_gettime reads the clock
	// through them, and writing still needs CAP_SYS_TIME in the initial
	// user namespace.
	unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_REBOOT, unix.SYS_ACCT,
	unix.SYS_QUOTACTL, unix.SYS_QUOTACTL_FD, unix.SYS_SYSLOG,
	unix.SYS_VHANGUP, unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME,
	unix.SYS_FANOTIFY_INIT, unix.SYS_LOOKUP_DCOOKIE, unix.SYS_NFSSERVCTL,
}

// namespaceSyscalls join or create namespaces; clone is checked by flags.
var namespaceSyscalls = []uint32{unix.SYS_SETNS, unix.SYS_UNSHARE}

// Program returns the assembled filter for the running architecture.
// Install it with [Install]. It returns [ErrUnsupported] on architectures
// other than amd64 and arm64.
func Program(opts Options) ([]bpf.RawInstruction, error) {
	insns, err := instructions(opts)
	if err != nil {
		return nil, fmt.Errorf("building seccomp filter: %w", err)
	}
	raw, err := bpf.Assemble(insns)
	if err != nil {
		return nil, fmt.Errorf("assembling seccomp filter: %w", err)
	}
	return raw, nil
}

// instructions lays the filter out as a dispatch on the syscall number
// followed by the argument checks and the shared return values. The list
// is linear; the kernel's per-syscall action cache makes the cost vanish
// for every syscall whose verdict does not depend on its arguments.
func instructions(opts Options) ([]bpf.Instruction, error) {
	var a asm
	checkABI(&a)

	// Argument-checked syscalls first: they cannot use the action cache.
	modes := append(append([]modeSyscall(nil), modeSyscalls...), archModeSyscalls...)
	for _, s := range modes {
		a.jumpIf(bpf.JumpEqual, s.nr, s.label())
	}
	a.jumpIf(bpf.JumpEqual, unix.SYS_OPENAT2, "enosys")
	a.jumpIf(bpf.JumpEqual, unix.SYS_CLONE3, "enosys")
	if !opts.AllowNamespaces {
		a.jumpIf(bpf.JumpEqual, unix.SYS_CLONE, "clone")
	}
	a.jumpIf(bpf.JumpEqual, unix.SYS_SOCKET, "socket")
	a.jumpIf(bpf.JumpEqual, unix.SYS_SOCKETPAIR, "socket")
	a.jumpIf(bpf.JumpEqual, unix.SYS_IOCTL, "ioctl")
	a.jumpIf(bpf.JumpEqual, unix.SYS_PERSONALITY, "personality")
	a.jumpIf(bpf.JumpEqual, unix.SYS_PRLIMIT64, "prlimit")

	deny := append(append([]uint32(nil), denied...), archDenied...)
	if !opts.AllowNamespaces {
		deny = append(deny, namespaceSyscalls...)
	}
	for _, nr := range deny {
		a.jumpIf(bpf.JumpEqual, nr, "eperm")
	}
	a.jumpTo("allow")

	if !opts.AllowNamespaces {
		checkClone(&a)
	}
	checkSocket(&a)
	checkIoctl(&a)
	checkPersonality(&a)
	checkPrlimit(&a)
	checkMode(&a, modes)
	returns(&a)
	return a.build()
}

// checkABI kills the process on a syscall of a foreign ABI (i386 via
// int 0x80, x32): the syscall numbers below are those of the native ABI
// only, so a foreign call would slip past the deny list. It leaves the
// syscall number in A.
func checkABI(a *asm) {
	a.add(bpf.LoadAbsolute{Off: offArch, Size: 4})
	a.jumpIf(bpf.JumpNotEqual, auditArch, "kill")
	a.add(bpf.LoadAbsolute{Off: offNr, Size: 4})
	if x32Bit != 0 {
		a.jumpIf(bpf.JumpBitsSet, x32Bit, "kill")
	}
}

// checkClone refuses clone with namespace flags: a nested user namespace
// hands the workload CAP_SYS_ADMIN and CAP_NET_ADMIN over fresh
// namespaces, the entry point of most recent kernel escalations. clone3
// passes its flags in memory the filter cannot read, so it gets ENOSYS
// and glibc falls back to clone; EPERM would make pthread_create fail.
func checkClone(a *asm) {
	a.label("clone")
	a.add(bpf.LoadAbsolute{Off: argLo(0), Size: 4})
	a.jumpIf(bpf.JumpBitsSet, nsFlags, "eperm")
	a.jumpTo("allow")
}

// checkSocket allows only the sockets a networked program needs, and
// answers the rest the way a kernel without them would, so that runtimes
// fall back instead of failing: an unknown family gets EAFNOSUPPORT, an
// unknown type ESOCKTNOSUPPORT, an unknown protocol EPROTONOSUPPORT (Go
// and others take that for "no MPTCP here, use TCP"). Rare families and
// protocols are where exploitable module code lives (SCTP, DCCP, L2TP,
// UDP-Lite load on demand), vsock reaches the hypervisor host past the
// network namespace, and Landlock's TCP rules do not cover MPTCP.
//
// Allowed: unix stream, datagram and seqpacket; inet and inet6 TCP
// (stream, protocol 0 or TCP), UDP (datagram, 0 or UDP) and ping sockets
// (datagram, ICMP or ICMPv6), which the sandbox's ping_group_range still
// governs; netlink route, which glibc's getaddrinfo (AI_ADDRCONFIG),
// getifaddrs and if_nameindex, Go's net.Interfaces and libuv's interface
// list read, and which shows only the sandbox's own network namespace.
// Raw inet sockets get EPERM, the kernel's own answer without
// CAP_NET_RAW, on which ping falls back to a ping socket. The type's
// SOCK_NONBLOCK and SOCK_CLOEXEC bits are masked off; netlink's type is
// left to the kernel, which accepts raw and datagram only.
func checkSocket(a *asm) {
	a.label("socket")
	a.add(bpf.LoadAbsolute{Off: argLo(0), Size: 4})
	a.jumpIf(bpf.JumpEqual, unix.AF_UNIX, "socket unix")
	a.jumpIf(bpf.JumpEqual, unix.AF_INET, "socket inet")
	a.jumpIf(bpf.JumpEqual, unix.AF_INET6, "socket inet6")
	a.jumpIf(bpf.JumpEqual, unix.AF_NETLINK, "socket netlink")
	a.jumpTo("eafnosupport")

	a.label("socket unix")
	loadSocketType(a)
	a.jumpIf(bpf.JumpEqual, unix.SOCK_STREAM, "allow")
	a.jumpIf(bpf.JumpEqual, unix.SOCK_DGRAM, "allow")
	a.jumpIf(bpf.JumpEqual, unix.SOCK_SEQPACKET, "allow")
	a.jumpTo("esocktnosupport")

	// Each family's ping protocol, then the protocols both share.
	a.label("socket inet")
	a.add(bpf.LoadAbsolute{Off: argLo(2), Size: 4})
	a.jumpIf(bpf.JumpEqual, unix.IPPROTO_ICMP, "socket ip dgram")
	a.jumpTo("socket ip")
	a.label("socket inet6")
	a.add(bpf.LoadAbsolute{Off: argLo(2), Size: 4})
	a.jumpIf(bpf.JumpEqual, unix.IPPROTO_ICMPV6, "socket ip dgram")
	a.label("socket ip")
	a.jumpIf(bpf.JumpEqual, 0, "socket ip any")
	a.jumpIf(bpf.JumpEqual, unix.IPPROTO_TCP, "socket ip stream")
	a.jumpIf(bpf.JumpEqual, unix.IPPROTO_UDP, "socket ip dgram")
	a.jumpTo("eprotonosupport")

	// Protocol 0 is TCP for a stream, UDP for a datagram socket; as a
	// seqpacket it would be SCTP.
	a.label("socket ip any")
	loadSocketType(a)
	a.jumpIf(bpf.JumpEqual, unix.SOCK_STREAM, "allow")
	a.jumpIf(bpf.JumpEqual, unix.SOCK_DGRAM, "allow")
	a.jumpTo("socket ip type")
	a.label("socket ip stream")
	loadSocketType(a)
	a.jumpIf(bpf.JumpEqual, unix.SOCK_STREAM, "allow")
	a.jumpTo("socket ip type")
	a.label("socket ip dgram")
	loadSocketType(a)
	a.jumpIf(bpf.JumpEqual, unix.SOCK_DGRAM, "allow")
	a.label("socket ip type")
	a.jumpIf(bpf.JumpEqual, unix.SOCK_RAW, "eperm")
	a.jumpTo("esocktnosupport")

	a.label("socket netlink")
	a.add(bpf.LoadAbsolute{Off: argLo(2), Size: 4})
	a.jumpIf(bpf.JumpEqual, unix.NETLINK_ROUTE, "allow")
	a.jumpTo("eprotonosupport")
}

// loadSocketType loads socket's type argument without the SOCK_NONBLOCK
// and SOCK_CLOEXEC flags.
func loadSocketType(a *asm) {
	a.add(
		bpf.LoadAbsolute{Off: argLo(1), Size: 4},
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: sockTypeMask},
	)
}

// checkIoctl refuses the ioctls that push input into a terminal: the
// workload may share the user's terminal through stdin.
func checkIoctl(a *asm) {
	a.label("ioctl")
	a.add(bpf.LoadAbsolute{Off: argLo(1), Size: 4})
	a.jumpIf(bpf.JumpEqual, unix.TIOCSTI, "eperm")
	a.jumpIf(bpf.JumpEqual, unix.TIOCLINUX, "eperm")
	a.jumpTo("allow")
}

// checkPersonality allows the personalities Docker's default profile
// allows (plain Linux, linux32, uname26, and the query), and refuses flags
// such as ADDR_NO_RANDOMIZE and READ_IMPLIES_EXEC that switch off exploit
// mitigations for the next execve.
func checkPersonality(a *asm) {
	a.label("personality")
	a.add(bpf.LoadAbsolute{Off: argLo(0), Size: 4})
	for _, p := range []uint32{perLinux, perLinux32, perUname26, perUname26 | perLinux32, perQueryOnly} {
		a.jumpIf(bpf.JumpEqual, p, "allow")
	}
	a.jumpTo("eperm")
}

// checkPrlimit lets the workload read and set its own resource limits
// only (pid 0, which libcs and Go always pass): the init runs as the same
// uid, and prlimit on it would need no capability — RLIMIT_CPU 0 kills it.
func checkPrlimit(a *asm) {
	a.label("prlimit")
	a.add(bpf.LoadAbsolute{Off: argLo(0), Size: 4})
	a.jumpIf(bpf.JumpEqual, 0, "allow")
	a.jumpTo("eperm")
}

// checkMode refuses setuid and setgid bits in any mode the workload sets:
// its files in an output directory belong to the host user (root, through
// the idmapped mount, when mcpbox runs as root), and nosuid protects only
// the sandbox's view of them. The open syscalls are checked only when they
// create, since the kernel ignores their mode otherwise. openat2 passes
// flags and mode in memory the filter cannot read, so the dispatch answers
// it with ENOSYS and callers fall back to openat.
func checkMode(a *asm, modes []modeSyscall) {
	done := make(map[string]bool)
	for _, s := range modes {
		if s.flags == 0 || done[s.label()] {
			continue
		}
		done[s.label()] = true
		a.label(s.label())
		a.add(bpf.LoadAbsolute{Off: argLo(s.flags), Size: 4})
		a.jumpIf(bpf.JumpBitsSet, createFlags, modeLabel(s.mode))
		a.jumpTo("allow")
	}
	// The plain mode checks come after the create checks that jump there.
	for _, s := range modes {
		if done[modeLabel(s.mode)] {
			continue
		}
		done[modeLabel(s.mode)] = true
		a.label(modeLabel(s.mode))
		a.add(bpf.LoadAbsolute{Off: argLo(s.mode), Size: 4})
		a.jumpIf(bpf.JumpBitsSet, setIDBits, "eperm")
		a.jumpTo("allow")
	}
}

// label names the block that checks s.
func (s modeSyscall) label() string {
	if s.flags == 0 {
		return modeLabel(s.mode)
	}
	return fmt.Sprintf("create flags %d mode %d", s.flags, s.mode)
}

func modeLabel(arg int) string { return fmt.Sprintf("mode %d", arg) }

// returns emits the verdicts every check jumps to.
func returns(a *asm) {
	a.label("allow")
	a.add(bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW})
	a.label("eperm")
	a.add(retErrno(unix.EPERM))
	a.label("enosys")
	a.add(retErrno(unix.ENOSYS))
	a.label("eprotonosupport")
	a.add(retErrno(unix.EPROTONOSUPPORT))
	a.label("esocktnosupport")
	a.add(retErrno(unix.ESOCKTNOSUPPORT))
	a.label("eafnosupport")
	a.add(retErrno(unix.EAFNOSUPPORT))
	a.label("kill")
	a.add(bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS})
}

func retErrno(e unix.Errno) bpf.RetConstant {
	return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)&unix.SECCOMP_RET_DATA}
}
