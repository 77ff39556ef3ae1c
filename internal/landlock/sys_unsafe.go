//go:build linux

package landlock

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// rulesetAttr is struct landlock_ruleset_attr up to ABI 6. x/sys/unix's
// LandlockRulesetAttr already carries later fields, and the size passed to
// the kernel must match the ABI in use (see rulesetAttrSize).
type rulesetAttr struct {
	handledAccessFS  uint64
	handledAccessNet uint64 // ABI 4
	scoped           uint64 // ABI 6
}

// netPortAttr is struct landlock_net_port_attr (ABI 4).
type netPortAttr struct {
	allowedAccess uint64
	port          uint64
}

// ruleNetPort is LANDLOCK_RULE_NET_PORT, missing from x/sys/unix.
const ruleNetPort = 2

// createRuleset calls landlock_create_ruleset(2). A nil attr with size 0 is
// how the version query is made.
func createRuleset(attr *rulesetAttr, size uintptr, flags uint32) (int, error) {
	var p unsafe.Pointer
	if attr != nil {
		p = unsafe.Pointer(attr)
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(p), size, uintptr(flags))
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

func addPathBeneathRule(rulesetFD, parentFD int, access Access) error {
	attr := unix.LandlockPathBeneathAttr{Allowed_access: uint64(access), Parent_fd: int32(parentFD)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFD),
		unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func addNetPortRule(rulesetFD int, access uint64, port uint16) error {
	attr := netPortAttr{allowedAccess: access, port: uint64(port)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFD),
		ruleNetPort, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func restrictSelf(rulesetFD int, flags uint32) error {
	_, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rulesetFD), uintptr(flags), 0)
	if errno != 0 {
		return errno
	}
	return nil
}
