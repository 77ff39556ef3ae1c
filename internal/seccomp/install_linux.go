//go:build linux

package seccomp

import (
	"fmt"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Install loads prog as a seccomp filter of the calling thread. The filter
// binds only this thread and what it later clones or execs (no TSYNC):
// other threads of the Go runtime stay unfiltered, which is why the caller
// must execve the workload from this very thread.
//
// Preconditions: the goroutine is locked to its OS thread
// (runtime.LockOSThread) until it execs, and PR_SET_NO_NEW_PRIVS is set;
// otherwise Install returns an error wrapping [ErrNoNewPrivs].
func Install(prog []bpf.RawInstruction) error {
	if len(prog) == 0 || len(prog) > unix.BPF_MAXINSNS {
		return fmt.Errorf("installing seccomp filter: %d instructions, want 1 to %d", len(prog), unix.BPF_MAXINSNS)
	}
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("reading no_new_privs: %w", err)
	}
	if nnp != 1 {
		return fmt.Errorf("installing seccomp filter: %w", ErrNoNewPrivs)
	}
	filter := make([]unix.SockFilter, len(prog))
	for i, ins := range prog {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	if err := setModeFilter(filter); err != nil {
		return fmt.Errorf("installing seccomp filter: %w", err)
	}
	return nil
}

// Available reports whether this platform and kernel can run the filters
// of this package: a supported architecture, seccomp filter mode, and the
// ERRNO and KILL_PROCESS actions (Linux 4.14). It changes nothing.
func Available() error {
	if _, err := Program(Options{}); err != nil {
		return err
	}
	actions := []uint32{unix.SECCOMP_RET_ALLOW, unix.SECCOMP_RET_ERRNO, unix.SECCOMP_RET_KILL_PROCESS}
	for _, act := range actions {
		if err := actionAvail(act); err != nil {
			return fmt.Errorf("probing seccomp action %#x: %w", act, err)
		}
	}
	return nil
}
