//go:build linux

package initproc

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// setComm names the calling thread (the init's main thread: ps shows it
// for the process), at most 15 bytes.
func setComm(name string) {
	b, err := unix.BytePtrFromString(name)
	if err != nil {
		return
	}
	_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(b)), 0, 0, 0)
}
