package initproc

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// holdWorkload is the held init's side of a prepared sandbox. It forks
// the workload ahead, on the walled thread exactly as a cold start does
// (no_new_privs, Landlock, no capabilities, a user namespace of its own,
// its id maps); the child empties its capabilities, sets its process
// limit, installs the seccomp filter, says it is armed and waits
// (fork_unsafe.go). Then the init reports Ready with the read end of the
// child's report pipe, the other end of its claim socket and the address
// of its claim buffer, and returns the workload's pid: the host hands the
// claim to the child itself (Prepared.Start). The init reaps from then
// on, and keeps its end of the control socket open and silent: the host
// tells a live prepared sandbox by it (Prepared.alive).
func holdWorkload(ctl *os.File, c *workloadConfig) (int, *workloadError) {
	setup := func(err error) (int, *workloadError) {
		return 0, &workloadError{Msg: err.Error(), Code: exitSetup}
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return setup(fmt.Errorf("creating the workload's claim socket: %w", err))
	}
	defer unix.Close(sp[0])
	var fs *forkSpec
	pid, errR, werr := forkWalled(c, func(syncR, syncW, errW *os.File) (*forkSpec, error) {
		fs, err = newAheadForkSpec(c, syncR, syncW, errW, sp[1], sp[0])
		return fs, err
	})
	unix.Close(sp[1])
	if werr != nil {
		return 0, werr
	}
	defer errR.Close()
	var armed [1]byte
	if n, err := unix.Read(sp[0], armed[:]); n != 1 {
		// It failed, and says why on its report pipe.
		if werr := forkReport(c, errR); werr != nil {
			return 0, werr
		}
		return setup(fmt.Errorf("arming the workload: %v", err))
	}
	ready := encodeReport(&initReport{Ready: true, ClaimBase: uint64(fs.claimBase())})
	if err := unix.Sendmsg(int(ctl.Fd()), ready, unix.UnixRights(int(errR.Fd()), sp[0]), nil, 0); err != nil {
		return setup(fmt.Errorf("reporting ready: %w", err))
	}
	return pid, nil
}
