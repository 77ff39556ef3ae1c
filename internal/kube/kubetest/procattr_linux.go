package kubetest

import "syscall"

// hostSupported: the test cluster runs here.
const hostSupported = true

// groupDiesWithParent: a process group of its own, killed with the test
// binary should that die without running its cleanups.
func groupDiesWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
