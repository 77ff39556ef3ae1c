//go:build linux

package seccomp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// setModeFilter calls seccomp(SECCOMP_SET_MODE_FILTER, 0, &prog) for the
// calling thread. filter must not be empty.
func setModeFilter(filter []unix.SockFilter) error {
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return errno
	}
	return nil
}

// actionAvail calls seccomp(SECCOMP_GET_ACTION_AVAIL, 0, &action).
func actionAvail(action uint32) error {
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	if errno != 0 {
		return errno
	}
	return nil
}
