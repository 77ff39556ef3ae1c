//go:build linux && !amd64

package sandbox

import "os/exec"

// startCommand starts c, the sandbox init. Only amd64 has the clone that
// shares the address space (vfork_unsafe.go); elsewhere os/exec forks.
func startCommand(c *exec.Cmd) error { return c.Start() }
