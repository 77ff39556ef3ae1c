//go:build !linux

package kubetest

import "syscall"

// hostSupported: the cluster's binaries (scripts/kube-bins.sh) and its
// node (unshare, overlays) are Linux's; elsewhere every test skips.
const hostSupported = false

// groupDiesWithParent is never reached outside Linux (requireBins skips
// first); it has no parent-death signal to ask for.
func groupDiesWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
