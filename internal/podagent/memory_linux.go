package podagent

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// hideMemory makes the agent not dumpable: its /proc/PID/mem, environ,
// maps and fds, and ptrace, then need CAP_SYS_PTRACE, which the pod's
// containers drop. The server runs as the agent's user and would
// otherwise read the agent's memory (the pod's egress proxy token, and
// each renewed one; the start request) wherever Yama does not forbid it.
// The server itself is dumpable again: execve resets the flag.
func hideMemory() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("making the agent not dumpable: %w", err)
	}
	return nil
}
