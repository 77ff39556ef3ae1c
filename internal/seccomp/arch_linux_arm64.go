//go:build linux

package seccomp

import "golang.org/x/sys/unix"

const auditArch = unix.AUDIT_ARCH_AARCH64

// x32Bit is zero: arm64 has no second ABI sharing its audit arch (compat
// arm32 tasks report AUDIT_ARCH_ARM and fail the arch check).
const x32Bit = 0

// archDenied is empty: the legacy syscalls denied on amd64 do not exist here.
var archDenied []uint32

// archModeSyscalls is empty: arm64 has open, creat, chmod and mknod only in
// their *at forms.
var archModeSyscalls []modeSyscall
