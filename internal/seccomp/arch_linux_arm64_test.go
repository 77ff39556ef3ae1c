//go:build linux

package seccomp

import "golang.org/x/sys/unix"

const nativeArch = unix.AUDIT_ARCH_AARCH64

var foreignArches = []uint32{unix.AUDIT_ARCH_ARM, unix.AUDIT_ARCH_X86_64}

var archOnlyDenied []namedSyscall

func archABICases() []filterCase {
	return []filterCase{
		// No x32-like ABI: numbers with high bits set are plain unknown
		// syscalls and pass to the kernel, which answers ENOSYS.
		call("nr with bit 30", 0x40000000|unix.SYS_READ, verdictAllow),
	}
}

// foreignSyscall is zero: a foreign ABI call needs an arm32 task, which a Go
// test cannot become; the kill test skips.
const foreignSyscall = 0

// archModeCases is empty: arm64 has no chmod, open, creat or mknod.
func archModeCases() []filterCase { return nil }
