package sandbox

import (
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

// Terminal signals (^C, ^\, window resizes) go from the kernel to the
// terminal's foreground process group. The init runs in a process group of
// its own, so without a terminal they reach only mcpbox, which forwards
// them once through the init. When the workload's stdin is the
// controlling terminal and mcpbox is in the foreground, the sandbox's
// group is made the foreground instead (so the workload may read the
// terminal), and the init leaves those signals to the kernel rather than
// deliver them a second time.

// foregroundTTY returns stdin's fd if it is the controlling terminal and
// this process's group is its foreground group, else -1.
func foregroundTTY(stdin any) int {
	f, ok := stdin.(*os.File)
	if !ok {
		return -1
	}
	fd := int(f.Fd())
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || pgrp != unix.Getpgrp() {
		return -1
	}
	return fd
}

// setForeground makes pgid the terminal's foreground group. A background
// caller gets SIGTTOU for that unless it ignores it, which it does here.
func setForeground(fd, pgid int) error {
	signal.Ignore(unix.SIGTTOU)
	defer signal.Reset(unix.SIGTTOU)
	return unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, pgid)
}
