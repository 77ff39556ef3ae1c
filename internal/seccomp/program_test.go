//go:build linux && (amd64 || arm64)

package seccomp

import (
	"encoding/binary"
	"fmt"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Verdicts, spelled out from the kernel ABI rather than taken from the code
// under test.
const (
	verdictAllow  = unix.SECCOMP_RET_ALLOW
	verdictKill   = unix.SECCOMP_RET_KILL_PROCESS
	verdictEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	verdictENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	verdictNoProt = unix.SECCOMP_RET_ERRNO | uint32(unix.EPROTONOSUPPORT)
	verdictNoType = unix.SECCOMP_RET_ERRNO | uint32(unix.ESOCKTNOSUPPORT)
	verdictNoFam  = unix.SECCOMP_RET_ERRNO | uint32(unix.EAFNOSUPPORT)
)

// alwaysDenied is the deny list of the design, written out independently
// of the package's own table.
var alwaysDenied = []namedSyscall{
	{"mount", unix.SYS_MOUNT}, {"umount2", unix.SYS_UMOUNT2},
	{"fsopen", unix.SYS_FSOPEN}, {"fsconfig", unix.SYS_FSCONFIG},
	{"fsmount", unix.SYS_FSMOUNT}, {"fspick", unix.SYS_FSPICK},
	{"move_mount", unix.SYS_MOVE_MOUNT}, {"open_tree", unix.SYS_OPEN_TREE},
	{"open_tree_attr", unix.SYS_OPEN_TREE_ATTR}, {"mount_setattr", unix.SYS_MOUNT_SETATTR},
	{"pivot_root", unix.SYS_PIVOT_ROOT}, {"chroot", unix.SYS_CHROOT},
	{"ptrace", unix.SYS_PTRACE}, {"process_vm_readv", unix.SYS_PROCESS_VM_READV},
	{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV}, {"kcmp", unix.SYS_KCMP},
	{"pidfd_getfd", unix.SYS_PIDFD_GETFD},
	{"keyctl", unix.SYS_KEYCTL}, {"add_key", unix.SYS_ADD_KEY}, {"request_key", unix.SYS_REQUEST_KEY},
	{"bpf", unix.SYS_BPF}, {"perf_event_open", unix.SYS_PERF_EVENT_OPEN},
	{"userfaultfd", unix.SYS_USERFAULTFD},
	{"io_uring_setup", unix.SYS_IO_URING_SETUP}, {"io_uring_enter", unix.SYS_IO_URING_ENTER},
	{"io_uring_register", unix.SYS_IO_URING_REGISTER},
	{"kexec_load", unix.SYS_KEXEC_LOAD}, {"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD},
	{"init_module", unix.SYS_INIT_MODULE}, {"finit_module", unix.SYS_FINIT_MODULE},
	{"delete_module", unix.SYS_DELETE_MODULE},
	{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT}, {"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT},
	{"swapon", unix.SYS_SWAPON}, {"swapoff", unix.SYS_SWAPOFF}, {"reboot", unix.SYS_REBOOT},
	{"acct", unix.SYS_ACCT}, {"quotactl", unix.SYS_QUOTACTL}, {"quotactl_fd", unix.SYS_QUOTACTL_FD},
	{"syslog", unix.SYS_SYSLOG}, {"lookup_dcookie", unix.SYS_LOOKUP_DCOOKIE},
	{"vhangup", unix.SYS_VHANGUP}, {"settimeofday", unix.SYS_SETTIMEOFDAY},
	{"clock_settime", unix.SYS_CLOCK_SETTIME}, {"fanotify_init", unix.SYS_FANOTIFY_INIT},
	{"nfsservctl", unix.SYS_NFSSERVCTL},
}

// namespaceDenied are denied unless Options.AllowNamespaces.
var namespaceDenied = []namedSyscall{{"setns", unix.SYS_SETNS}, {"unshare", unix.SYS_UNSHARE}}

// Clone flags as glibc's pthread_create and fork pass them.
const (
	threadFlags = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
		unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS |
		unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
	forkFlags = unix.CLONE_CHILD_SETTID | unix.CLONE_CHILD_CLEARTID | uint64(unix.SIGCHLD)
)

// Values not in x/sys, from include/uapi/linux/personality.h.
const (
	addrNoRandomize = 0x0040000
	readImpliesExec = 0x0400000
)

// Mode and open flag values from the kernel headers, written out rather
// than taken from the package.
const (
	modeSetuid = 0o4000   // S_ISUID
	modeSetgid = 0o2000   // S_ISGID
	modeSticky = 0o1000   // S_ISVTX
	modeFIFO   = 0o10000  // S_IFIFO
	modeReg    = 0o100000 // S_IFREG
	oCreat     = 0o100    // O_CREAT, the same on amd64 and arm64
	// __O_TMPFILE, include/uapi/asm-generic/fcntl.h; neither arch
	// overrides it, unlike O_DIRECTORY and so O_TMPFILE.
	tmpfileBit = 0o20000000
	atFDCWD    = 0xffffff9c // AT_FDCWD as the kernel sees the int
)

type namedSyscall struct {
	name string
	nr   uint32
}

type filterCase struct {
	name string
	arch uint32 // zero means nativeArch
	nr   uint32
	args [6]uint64
	want uint32
}

func call(name string, nr uint32, want uint32, args ...uint64) filterCase {
	c := filterCase{name: name, nr: nr, want: want}
	copy(c.args[:], args)
	return c
}

// seccompData encodes struct seccomp_data for the x/net/bpf VM. The kernel
// loads each 32-bit word of it in native (little endian) order, the VM in
// network (big endian) order; so the struct is laid out little endian as
// the kernel has it and then every word is byte-swapped, which makes each
// VM load see exactly the value the kernel's load sees.
func seccompData(arch, nr uint32, args [6]uint64) []byte {
	b := make([]byte, 64)
	binary.LittleEndian.PutUint32(b[0:], nr)
	binary.LittleEndian.PutUint32(b[4:], arch)
	binary.LittleEndian.PutUint64(b[8:], 0x00007f0012345678) // instruction pointer
	for i, v := range args {
		binary.LittleEndian.PutUint64(b[16+8*i:], v)
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return b
}

func newVM(t testing.TB, opts Options) *bpf.VM {
	t.Helper()
	raw, err := Program(opts)
	if err != nil {
		t.Fatalf("Program(%+v): %v", opts, err)
	}
	insns, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatalf("Program(%+v) has instructions the disassembler does not know", opts)
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatalf("loading filter into the BPF VM: %v", err)
	}
	return vm
}

func runCases(t *testing.T, vm *bpf.VM, cases []filterCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			arch := c.arch
			if arch == 0 {
				arch = nativeArch
			}
			got, err := vm.Run(seccompData(arch, c.nr, c.args))
			if err != nil {
				t.Fatalf("running filter: %v", err)
			}
			if uint32(got) != c.want {
				t.Errorf("verdict = %s, want %s", verdict(uint32(got)), verdict(c.want))
			}
		})
	}
}

func verdict(v uint32) string {
	switch {
	case v == verdictAllow:
		return "ALLOW"
	case v == verdictKill:
		return "KILL_PROCESS"
	case v&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_ERRNO:
		return "ERRNO(" + unix.ErrnoName(unix.Errno(v&unix.SECCOMP_RET_DATA)) + ")"
	}
	return fmt.Sprintf("%#x", v)
}

func TestProgramDefault(t *testing.T) {
	var cases []filterCase
	for _, d := range append(alwaysDenied, namespaceDenied...) {
		cases = append(cases, call(d.name, d.nr, verdictEPERM))
		cases = append(cases, call(d.name+" with args", d.nr, verdictEPERM, 1, 2, 3, 4, 5, 6))
	}
	for _, d := range archOnlyDenied {
		cases = append(cases, call(d.name, d.nr, verdictEPERM))
	}
	cases = append(cases, allowedCases()...)
	cases = append(cases, cloneCases()...)
	cases = append(cases, socketCases()...)
	cases = append(cases, ioctlCases()...)
	cases = append(cases, personalityCases()...)
	cases = append(cases, modeCases()...)
	cases = append(cases, archModeCases()...)
	cases = append(cases, abiCases()...)
	runCases(t, newVM(t, Options{}), cases)
}

func allowedCases() []filterCase {
	return []filterCase{
		call("read", unix.SYS_READ, verdictAllow, 0, 0xc000010000, 4096),
		call("write", unix.SYS_WRITE, verdictAllow, 1, 0xc000010000, 12),
		call("openat", unix.SYS_OPENAT, verdictAllow, atFDCWD, 0xc000010000, unix.O_RDONLY|unix.O_CLOEXEC),
		call("execve", unix.SYS_EXECVE, verdictAllow, 0xc000010000, 0xc000020000, 0xc000030000),
		call("futex", unix.SYS_FUTEX, verdictAllow, 0xc000010000, 128, 1),
		call("mmap", unix.SYS_MMAP, verdictAllow, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS, ^uint64(0), 0),
		call("exit_group", unix.SYS_EXIT_GROUP, verdictAllow, 0),
		call("getrandom", unix.SYS_GETRANDOM, verdictAllow, 0xc000010000, 32, 0),
		call("seccomp stacks a filter", unix.SYS_SECCOMP, verdictAllow, unix.SECCOMP_SET_MODE_FILTER),
		call("landlock_restrict_self", unix.SYS_LANDLOCK_RESTRICT_SELF, verdictAllow, 3, 0),
		call("adjtimex reads the clock", unix.SYS_ADJTIMEX, verdictAllow, 0xc000010000),
		call("clock_adjtime reads the clock", unix.SYS_CLOCK_ADJTIME, verdictAllow, 0, 0xc000010000),
		call("clock_gettime", unix.SYS_CLOCK_GETTIME, verdictAllow, 1, 0xc000010000),
		call("unknown future syscall", 1000, verdictAllow),
	}
}

func cloneCases() []filterCase {
	cases := []filterCase{
		call("clone3", unix.SYS_CLONE3, verdictENOSYS, 0xc000010000, 88),
		call("clone3 size 0", unix.SYS_CLONE3, verdictENOSYS),
		call("clone thread", unix.SYS_CLONE, verdictAllow, threadFlags, 0xc000010000),
		call("clone fork", unix.SYS_CLONE, verdictAllow, forkFlags),
		call("clone vfork", unix.SYS_CLONE, verdictAllow, unix.CLONE_VM|unix.CLONE_VFORK|uint64(unix.SIGCHLD)),
		// The kernel truncates clone flags to 32 bits, so a namespace bit
		// in the high word is no namespace and must not be refused.
		call("clone NEWUSER in high word", unix.SYS_CLONE, verdictAllow, unix.CLONE_NEWUSER<<32|forkFlags),
		call("clone thread and NEWNET", unix.SYS_CLONE, verdictEPERM, threadFlags|unix.CLONE_NEWNET),
	}
	for name, flag := range map[string]uint64{
		"NEWNS": unix.CLONE_NEWNS, "NEWUTS": unix.CLONE_NEWUTS, "NEWIPC": unix.CLONE_NEWIPC,
		"NEWUSER": unix.CLONE_NEWUSER, "NEWPID": unix.CLONE_NEWPID, "NEWNET": unix.CLONE_NEWNET,
		"NEWCGROUP": unix.CLONE_NEWCGROUP, "NEWTIME": unix.CLONE_NEWTIME,
	} {
		cases = append(cases, call("clone "+name, unix.SYS_CLONE, verdictEPERM, flag|forkFlags))
	}
	return cases
}

// Socket values from the kernel headers, written out rather than taken
// from the package or x/sys.
const (
	afUnix, afInet, afInet6, afNetlink = 1, 2, 10, 16
	afPacket, afVsock, afAlg, afBT     = 17, 40, 38, 31
	afKCM, afRDS, afTIPC, afQIPCRTR    = 41, 21, 30, 42

	sockStream, sockDgram, sockRaw, sockRDM = 1, 2, 3, 4
	sockSeqpacket, sockDCCP, sockPacket     = 5, 6, 10
	sockNonblock, sockCloexec               = 0o4000, 0o2000000

	ipprotoIP, ipprotoICMP, ipprotoTCP, ipprotoUDP = 0, 1, 6, 17
	ipprotoDCCP, ipprotoICMPv6, ipprotoSCTP        = 33, 58, 132
	ipprotoUDPLite, ipprotoL2TP, ipprotoMPTCP      = 136, 115, 262
	ipprotoRaw                                     = 255

	netlinkRoute, netlinkAudit, netlinkNetfilter = 0, 9, 12
	netlinkGeneric, netlinkKobjectUevent         = 16, 15
)

// socketCases is a table over family, type and protocol: the allowed
// combinations first, then what must be refused and with which errno.
func socketCases() []filterCase {
	const highGarbage = 0xdead_0000_0000_0000
	sock := func(name string, want uint32, domain, typ, proto uint64) filterCase {
		return call(name, unix.SYS_SOCKET, want, domain, typ, proto)
	}
	cases := []filterCase{
		sock("unix stream", verdictAllow, afUnix, sockStream|sockCloexec, 0),
		sock("unix dgram", verdictAllow, afUnix, sockDgram, 0),
		sock("unix seqpacket", verdictAllow, afUnix, sockSeqpacket, 0),
		call("socketpair unix", unix.SYS_SOCKETPAIR, verdictAllow, afUnix, sockStream|sockCloexec, 0, 0xc000010000),
		sock("netlink route raw", verdictAllow, afNetlink, sockRaw|sockCloexec, netlinkRoute),
		sock("netlink route dgram", verdictAllow, afNetlink, sockDgram, netlinkRoute),
		sock("domain high word ignored", verdictAllow, highGarbage|afInet, sockStream, 0),
		sock("protocol high word ignored", verdictAllow, afInet, sockStream, highGarbage|ipprotoTCP),

		sock("unix raw", verdictNoType, afUnix, sockRaw, 0),
		sock("unix rdm", verdictNoType, afUnix, sockRDM, 0),
		call("socketpair unix raw", unix.SYS_SOCKETPAIR, verdictNoType, afUnix, sockRaw, 0, 0xc000010000),

		sock("netlink audit", verdictNoProt, afNetlink, sockRaw, netlinkAudit),
		sock("netlink netfilter", verdictNoProt, afNetlink, sockRaw, netlinkNetfilter),
		sock("netlink generic", verdictNoProt, afNetlink, sockDgram|sockCloexec, netlinkGeneric),
		sock("netlink uevent", verdictNoProt, afNetlink, sockRaw, netlinkKobjectUevent),

		sock("packet raw", verdictNoFam, afPacket, sockRaw, 0x0300),
		sock("packet dgram", verdictNoFam, afPacket, sockDgram, 0),
		sock("packet high word garbage", verdictNoFam, highGarbage|afPacket, sockRaw, 0),
		sock("vsock", verdictNoFam, afVsock, sockStream, 0),
		sock("alg", verdictNoFam, afAlg, sockSeqpacket, 0),
		sock("bluetooth", verdictNoFam, afBT, sockStream, 0),
		sock("kcm", verdictNoFam, afKCM, sockDgram, 0),
		sock("rds", verdictNoFam, afRDS, sockSeqpacket, 0),
		sock("tipc", verdictNoFam, afTIPC, sockRDM, 0),
		sock("qipcrtr", verdictNoFam, afQIPCRTR, sockDgram, 0),
		sock("family 0", verdictNoFam, 0, sockStream, 0),
		call("socketpair packet", unix.SYS_SOCKETPAIR, verdictNoFam, afPacket, sockDgram, 0, 0xc000010000),
	}
	// Both inet families answer alike, but for their own ping protocol.
	for _, f := range []struct {
		name        string
		domain      uint64
		ping, other uint64
	}{
		{"inet", afInet, ipprotoICMP, ipprotoICMPv6},
		{"inet6", afInet6, ipprotoICMPv6, ipprotoICMP},
	} {
		for _, flags := range []uint64{0, sockNonblock | sockCloexec} {
			n := f.name
			if flags != 0 {
				n += " nonblock cloexec"
			}
			cases = append(cases,
				sock(n+" tcp", verdictAllow, f.domain, sockStream|flags, ipprotoIP),
				sock(n+" tcp explicit", verdictAllow, f.domain, sockStream|flags, ipprotoTCP),
				sock(n+" udp", verdictAllow, f.domain, sockDgram|flags, ipprotoIP),
				sock(n+" udp explicit", verdictAllow, f.domain, sockDgram|flags, ipprotoUDP),
				sock(n+" ping", verdictAllow, f.domain, sockDgram|flags, f.ping),

				sock(n+" mptcp", verdictNoProt, f.domain, sockStream|flags, ipprotoMPTCP),
				sock(n+" sctp stream", verdictNoProt, f.domain, sockStream|flags, ipprotoSCTP),
				sock(n+" sctp seqpacket", verdictNoProt, f.domain, sockSeqpacket|flags, ipprotoSCTP),
				sock(n+" seqpacket proto 0 (sctp)", verdictNoType, f.domain, sockSeqpacket|flags, ipprotoIP),
				sock(n+" udplite", verdictNoProt, f.domain, sockDgram|flags, ipprotoUDPLite),
				sock(n+" l2tp ip", verdictNoProt, f.domain, sockDgram|flags, ipprotoL2TP),
				sock(n+" dccp", verdictNoProt, f.domain, sockDCCP|flags, ipprotoDCCP),
				sock(n+" dccp proto 0", verdictNoType, f.domain, sockDCCP|flags, ipprotoIP),
				sock(n+" rdm", verdictNoType, f.domain, sockRDM|flags, ipprotoIP),
				sock(n+" SOCK_PACKET", verdictNoType, f.domain, sockPacket|flags, ipprotoIP),
				sock(n+" SOCK_PACKET ETH_P_ALL", verdictNoProt, f.domain, sockPacket|flags, 0x0300),
				sock(n+" other family's ping", verdictNoProt, f.domain, sockDgram|flags, f.other),
				sock(n+" tcp as dgram", verdictNoType, f.domain, sockDgram|flags, ipprotoTCP),
				sock(n+" udp as stream", verdictNoType, f.domain, sockStream|flags, ipprotoUDP),
				sock(n+" ping as stream", verdictNoType, f.domain, sockStream|flags, f.ping),
				sock(n+" raw proto 0", verdictEPERM, f.domain, sockRaw|flags, ipprotoIP),
				sock(n+" raw ping", verdictEPERM, f.domain, sockRaw|flags, f.ping),
				sock(n+" raw tcp", verdictEPERM, f.domain, sockRaw|flags, ipprotoTCP),
				sock(n+" raw IPPROTO_RAW", verdictNoProt, f.domain, sockRaw|flags, ipprotoRaw),
			)
		}
	}
	return cases
}

func ioctlCases() []filterCase {
	return []filterCase{
		call("TIOCSTI", unix.SYS_IOCTL, verdictEPERM, 0, unix.TIOCSTI, 0xc000010000),
		call("TIOCLINUX", unix.SYS_IOCTL, verdictEPERM, 0, unix.TIOCLINUX, 0xc000010000),
		// ioctl's cmd is an unsigned int: high bits do not hide TIOCSTI.
		call("TIOCSTI high word", unix.SYS_IOCTL, verdictEPERM, 0, 1<<32|unix.TIOCSTI, 0xc000010000),
		call("TCGETS", unix.SYS_IOCTL, verdictAllow, 0, unix.TCGETS, 0xc000010000),
		call("TIOCGWINSZ", unix.SYS_IOCTL, verdictAllow, 1, unix.TIOCGWINSZ, 0xc000010000),
		call("TIOCINQ", unix.SYS_IOCTL, verdictAllow, 3, unix.TIOCINQ, 0xc000010000),
		call("TIOCSTI as argument", unix.SYS_IOCTL, verdictAllow, 0, unix.TCGETS, unix.TIOCSTI),
	}
}

func personalityCases() []filterCase {
	return []filterCase{
		call("prlimit64 self", unix.SYS_PRLIMIT64, verdictAllow, 0, unix.RLIMIT_NOFILE),
		call("prlimit64 other pid", unix.SYS_PRLIMIT64, verdictEPERM, 1, unix.RLIMIT_CPU),
		call("prlimit64 other pid high word zero", unix.SYS_PRLIMIT64, verdictEPERM, 1<<32|1, unix.RLIMIT_CPU),
		call("personality query", unix.SYS_PERSONALITY, verdictAllow, 0xffffffff),
		call("personality linux", unix.SYS_PERSONALITY, verdictAllow, 0),
		call("personality linux32", unix.SYS_PERSONALITY, verdictAllow, 0x0008),
		call("personality ADDR_NO_RANDOMIZE", unix.SYS_PERSONALITY, verdictEPERM, addrNoRandomize),
		call("personality READ_IMPLIES_EXEC", unix.SYS_PERSONALITY, verdictEPERM, readImpliesExec),
	}
}

func modeCases() []filterCase {
	const (
		path       = 0xc000010000
		highGarb   = 0xdead_0000_0000_0000
		openHowPtr = 0xc000020000
		openHowLen = 24 // sizeof(struct open_how)
	)
	return []filterCase{
		call("fchmod 0755", unix.SYS_FCHMOD, verdictAllow, 3, 0o755),
		call("fchmodat 0644", unix.SYS_FCHMODAT, verdictAllow, atFDCWD, path, 0o644),
		call("fchmodat sticky 01777", unix.SYS_FCHMODAT, verdictAllow, atFDCWD, path, modeSticky|0o777),
		call("fchmodat2 0755 nofollow", unix.SYS_FCHMODAT2, verdictAllow, atFDCWD, path, 0o755, unix.AT_SYMLINK_NOFOLLOW),
		call("openat O_CREAT 0644", unix.SYS_OPENAT, verdictAllow, atFDCWD, path, oCreat|unix.O_WRONLY|unix.O_CLOEXEC, 0o644),
		call("openat O_TMPFILE 0600", unix.SYS_OPENAT, verdictAllow, atFDCWD, path, unix.O_TMPFILE|unix.O_RDWR, 0o600),
		// Without a create flag the kernel ignores the mode, whatever it holds.
		call("openat no O_CREAT garbage mode", unix.SYS_OPENAT, verdictAllow, atFDCWD, path, unix.O_RDONLY, 0o7777|highGarb),
		// O_TMPFILE includes O_DIRECTORY, which alone creates nothing.
		call("openat O_DIRECTORY setuid mode", unix.SYS_OPENAT, verdictAllow, atFDCWD, path, unix.O_DIRECTORY|unix.O_RDONLY, modeSetuid|0o755),
		call("openat O_TRUNC setuid mode", unix.SYS_OPENAT, verdictAllow, atFDCWD, path, unix.O_WRONLY|unix.O_TRUNC, modeSetuid|0o755),
		call("mknodat fifo 0644", unix.SYS_MKNODAT, verdictAllow, atFDCWD, path, modeFIFO|0o644, 0),
		// flags is an int and the mode a umode_t: the kernel drops the high
		// word, so bits there neither create nor set anything.
		call("openat O_CREAT in high word", unix.SYS_OPENAT, verdictAllow, atFDCWD, path, oCreat<<32|unix.O_WRONLY, modeSetuid|0o755),
		call("fchmod setuid in high word", unix.SYS_FCHMOD, verdictAllow, 3, modeSetuid<<32|0o755),
		call("dirfd with setid bits", unix.SYS_FCHMODAT, verdictAllow, modeSetuid|modeSetgid, path, 0o755),

		call("fchmod 02755", unix.SYS_FCHMOD, verdictEPERM, 3, modeSetgid|0o755),
		call("fchmod 04000", unix.SYS_FCHMOD, verdictEPERM, 3, modeSetuid),
		call("fchmodat 06755", unix.SYS_FCHMODAT, verdictEPERM, atFDCWD, path, modeSetuid|modeSetgid|0o755),
		call("fchmodat 04755 high garbage", unix.SYS_FCHMODAT, verdictEPERM, atFDCWD, path, highGarb|modeSetuid|0o755),
		call("fchmodat2 04000", unix.SYS_FCHMODAT2, verdictEPERM, atFDCWD, path, modeSetuid, 0),
		call("fchmodat2 02755 empty path", unix.SYS_FCHMODAT2, verdictEPERM, 3, path, modeSetgid|0o755, unix.AT_EMPTY_PATH),
		call("openat O_CREAT|O_WRONLY 04755", unix.SYS_OPENAT, verdictEPERM, atFDCWD, path, oCreat|unix.O_WRONLY, modeSetuid|0o755),
		call("openat O_CREAT|O_EXCL 02644", unix.SYS_OPENAT, verdictEPERM, atFDCWD, path, oCreat|unix.O_EXCL|unix.O_RDWR|unix.O_CLOEXEC, modeSetgid|0o644),
		call("openat O_TMPFILE 04755", unix.SYS_OPENAT, verdictEPERM, atFDCWD, path, unix.O_TMPFILE|unix.O_RDWR, modeSetuid|0o755),
		// The kernel takes the mode for the __O_TMPFILE bit alone.
		call("openat __O_TMPFILE bit 04755", unix.SYS_OPENAT, verdictEPERM, atFDCWD, path, tmpfileBit|unix.O_RDWR, modeSetuid|0o755),
		call("mknodat S_IFREG|04755", unix.SYS_MKNODAT, verdictEPERM, atFDCWD, path, modeReg|modeSetuid|0o755, 0),
		call("mknodat fifo 02644", unix.SYS_MKNODAT, verdictEPERM, atFDCWD, path, modeFIFO|modeSetgid|0o644, 0),

		call("openat2", unix.SYS_OPENAT2, verdictENOSYS, atFDCWD, path, openHowPtr, openHowLen),
		call("openat2 no args", unix.SYS_OPENAT2, verdictENOSYS),
	}
}

func abiCases() []filterCase {
	cases := []filterCase{
		{name: "bogus arch", arch: 0xffff_ffff, nr: unix.SYS_READ, want: verdictKill},
	}
	for _, a := range foreignArches {
		cases = append(cases,
			filterCase{name: fmt.Sprintf("foreign arch %#x read", a), arch: a, nr: unix.SYS_READ, want: verdictKill},
			filterCase{name: fmt.Sprintf("foreign arch %#x nr 0", a), arch: a, nr: 0, want: verdictKill},
		)
	}
	return append(cases, archABICases()...)
}

func TestProgramAllowNamespaces(t *testing.T) {
	cases := []filterCase{
		call("unshare NEWUSER", unix.SYS_UNSHARE, verdictAllow, unix.CLONE_NEWUSER),
		call("setns", unix.SYS_SETNS, verdictAllow, 3, unix.CLONE_NEWNET),
		call("clone NEWUSER", unix.SYS_CLONE, verdictAllow, unix.CLONE_NEWUSER|forkFlags),
		call("clone3 still ENOSYS", unix.SYS_CLONE3, verdictENOSYS, 0xc000010000, 88),
		call("mount still denied", unix.SYS_MOUNT, verdictEPERM),
		call("mptcp still refused", unix.SYS_SOCKET, verdictNoProt, unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP),
		call("TIOCSTI still denied", unix.SYS_IOCTL, verdictEPERM, 0, unix.TIOCSTI),
		call("fchmod setuid still denied", unix.SYS_FCHMOD, verdictEPERM, 3, modeSetuid|0o755),
		call("openat O_CREAT setgid still denied", unix.SYS_OPENAT, verdictEPERM, atFDCWD, 0xc000010000, oCreat, modeSetgid|0o755),
		call("openat2 still ENOSYS", unix.SYS_OPENAT2, verdictENOSYS),
		call("fchmod 0755 allowed", unix.SYS_FCHMOD, verdictAllow, 3, 0o755),
	}
	runCases(t, newVM(t, Options{AllowNamespaces: true}), cases)
}

// TestProgramKernelVerifier checks the rules of the kernel's
// seccomp_check_filter that the x/net/bpf VM does not enforce: only
// aligned 32-bit absolute loads inside struct seccomp_data, no packet
// extensions, and return values that are real seccomp actions.
func TestProgramKernelVerifier(t *testing.T) {
	for _, opts := range []Options{{}, {AllowNamespaces: true}} {
		t.Run(fmt.Sprintf("%+v", opts), func(t *testing.T) {
			raw, err := Program(opts)
			if err != nil {
				t.Fatalf("Program: %v", err)
			}
			if len(raw) > unix.BPF_MAXINSNS {
				t.Errorf("program has %d instructions, kernel max %d", len(raw), unix.BPF_MAXINSNS)
			}
			insns, _ := bpf.Disassemble(raw)
			for i, ins := range insns {
				if err := seccompAllows(ins); err != nil {
					t.Errorf("instruction %d (%v): %v", i, ins, err)
				}
			}
			if _, ok := insns[len(insns)-1].(bpf.RetConstant); !ok {
				t.Errorf("last instruction is %v, want a return", insns[len(insns)-1])
			}
		})
	}
}

func seccompAllows(ins bpf.Instruction) error {
	switch ins := ins.(type) {
	case bpf.LoadAbsolute:
		if ins.Size != 4 || ins.Off%4 != 0 || ins.Off+4 > 64 {
			return fmt.Errorf("load of %d bytes at %d, seccomp needs 4 aligned bytes within 64", ins.Size, ins.Off)
		}
	case bpf.RetConstant:
		switch ins.Val & unix.SECCOMP_RET_ACTION_FULL {
		case unix.SECCOMP_RET_ALLOW, unix.SECCOMP_RET_ERRNO, unix.SECCOMP_RET_KILL_PROCESS:
		default:
			return fmt.Errorf("return %#x is not an action this filter means to use", ins.Val)
		}
	case bpf.JumpIf, bpf.Jump, bpf.ALUOpConstant:
	default:
		return fmt.Errorf("instruction kind %T not expected in a seccomp filter", ins)
	}
	return nil
}

func BenchmarkProgram(b *testing.B) {
	for b.Loop() {
		if _, err := Program(Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFilterRead(b *testing.B) {
	vm := newVM(b, Options{})
	data := seccompData(nativeArch, unix.SYS_READ, [6]uint64{})
	for b.Loop() {
		if _, err := vm.Run(data); err != nil {
			b.Fatal(err)
		}
	}
}
