//go:build linux

package seccomp

import "golang.org/x/sys/unix"

const auditArch = unix.AUDIT_ARCH_X86_64

// x32Bit is __X32_SYSCALL_BIT (arch/x86/include/uapi/asm/unistd.h), not in
// x/sys: x32 syscalls report AUDIT_ARCH_X86_64 too and differ only by this
// bit in the number. It also catches nr -1, which no real program issues.
const x32Bit = 0x40000000

var archDenied = []uint32{
	// Raw I/O port access and segment descriptor tables: hardware and
	// exploit surface; only Wine and 16-bit code use modify_ldt.
	unix.SYS_IOPL, unix.SYS_IOPERM, unix.SYS_MODIFY_LDT,
	// The a.out loader, long gone from real use.
	unix.SYS_USELIB,
}

// archModeSyscalls are the legacy path forms of the mode-setting syscalls,
// which arm64 has only as *at.
var archModeSyscalls = []modeSyscall{
	{nr: unix.SYS_OPEN, mode: 2, flags: 1},
	{nr: unix.SYS_CREAT, mode: 1},
	{nr: unix.SYS_CHMOD, mode: 1},
	{nr: unix.SYS_MKNOD, mode: 1},
}
