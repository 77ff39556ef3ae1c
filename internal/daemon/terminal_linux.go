package daemon

import (
	"os"

	"golang.org/x/sys/unix"
)

// IsTerminal reports whether v is an *os.File open on a terminal (not
// merely a character device such as /dev/null or /dev/kmsg): what a
// person reads as it is written, and no log keeps.
func IsTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var terr error
	if err := sc.Control(func(fd uintptr) { _, terr = unix.IoctlGetTermios(int(fd), unix.TCGETS) }); err != nil {
		return false
	}
	return terr == nil
}
