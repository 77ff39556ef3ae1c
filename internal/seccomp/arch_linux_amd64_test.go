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

// archModeCases cover the legacy path forms of the mode syscalls.
func archModeCases() []filterCase {
	const path = 0xc000010000
	return []filterCase{
		call("chmod 0755", unix.SYS_CHMOD, verdictAllow, path, 0o755),
		call("chmod 04755", unix.SYS_CHMOD, verdictEPERM, path, modeSetuid|0o755),
		call("open O_CREAT 0644", unix.SYS_OPEN, verdictAllow, path, oCreat|unix.O_WRONLY, 0o644),
		call("open O_RDONLY garbage mode", unix.SYS_OPEN, verdictAllow, path, unix.O_RDONLY, 0o7777),
		call("open O_CREAT 02644", unix.SYS_OPEN, verdictEPERM, path, oCreat|unix.O_WRONLY, modeSetgid|0o644),
		call("open O_TMPFILE 04700", unix.SYS_OPEN, verdictEPERM, path, unix.O_TMPFILE|unix.O_WRONLY, modeSetuid|0o700),
		call("creat 0644", unix.SYS_CREAT, verdictAllow, path, 0o644),
		call("creat 04755", unix.SYS_CREAT, verdictEPERM, path, modeSetuid|0o755),
		call("mknod fifo 0644", unix.SYS_MKNOD, verdictAllow, path, modeFIFO|0o644, 0),
		call("mknod S_IFREG|06755", unix.SYS_MKNOD, verdictEPERM, path, modeReg|modeSetuid|modeSetgid|0o755, 0),
	}
}
