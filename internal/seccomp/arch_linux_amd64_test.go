//go:build linux

package seccomp

import "golang.org/x/sys/unix"

const nativeArch = unix.AUDIT_ARCH_X86_64

var foreignArches = []uint32{unix.AUDIT_ARCH_I386, unix.AUDIT_ARCH_AARCH64}

// x32Syscall is __X32_SYSCALL_BIT, written out here so a wrong constant in
// the package does not go unnoticed.
const x32Syscall = 0x40000000

var archOnlyDenied = []namedSyscall{
	{"iopl", unix.SYS_IOPL}, {"ioperm", unix.SYS_IOPERM},
	{"modify_ldt", unix.SYS_MODIFY_LDT}, {"uselib", unix.SYS_USELIB},
}

func archABICases() []filterCase {
	return []filterCase{
		call("x32 read", x32Syscall|unix.SYS_READ, verdictKill),
		call("x32 mount", x32Syscall|unix.SYS_MOUNT, verdictKill),
		// x32 clone3 must not reach the ENOSYS rule either: the ABI
		// check comes first.
		call("x32 clone3", x32Syscall|unix.SYS_CLONE3, verdictKill),
		call("nr -1", 0xffffffff, verdictKill),
	}
}

// foreignSyscall is getpid of the x32 ABI, which the filter must answer
// by killing the process.
const foreignSyscall = x32Syscall | unix.SYS_GETPID
