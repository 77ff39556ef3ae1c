package initproc

import (
	"os"

	"golang.org/x/sys/unix"
)

// terminalSignals are the ones the kernel sends a foreground group.
var terminalSignals = []os.Signal{unix.SIGINT, unix.SIGQUIT, unix.SIGWINCH}
