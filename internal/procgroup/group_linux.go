package procgroup

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// byNumber makes Signal take the path of kernels before 6.9 (tests).
var byNumber = false

// Group is the process group led by one process, held by a pidfd. Its
// methods are safe for concurrent use.
type Group struct {
	pid int

	mu sync.Mutex
	fd int // pidfd of the leader; -1 once closed. Guarded by mu.
}

// Open holds the group that p leads. Call it while p's pid is known to be
// p's: for a child, after Start and before Wait returns (Wait reaps it).
// p must lead its group (Setpgid): otherwise Signal finds no group (or,
// before Linux 6.9, whichever group has the number p.Pid).
func Open(p *os.Process) (*Group, error) {
	fd, err := unix.PidfdOpen(p.Pid, 0)
	if err != nil {
		return nil, fmt.Errorf("opening a pidfd of process %d: %w", p.Pid, err)
	}
	return &Group{pid: p.Pid, fd: fd}, nil
}

// Signal sends sig to every process left in the group. It returns
// os.ErrProcessDone when none is left (or, before Linux 6.9, when the
// leader has been reaped, see the package doc), and after Close.
func (g *Group) Signal(sig syscall.Signal) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fd < 0 {
		return os.ErrProcessDone
	}
	var err error = unix.EINVAL
	if !byNumber {
		err = unix.PidfdSendSignal(g.fd, sig, nil, unix.PIDFD_SIGNAL_PROCESS_GROUP)
	}
	if errors.Is(err, unix.EINVAL) {
		err = g.signalByNumber(sig)
	}
	if errors.Is(err, unix.ESRCH) {
		return os.ErrProcessDone
	}
	if err != nil {
		return fmt.Errorf("signalling process group %d: %w", g.pid, err)
	}
	return nil
}

// signalByNumber is Signal on kernels without PIDFD_SIGNAL_PROCESS_GROUP:
// kill(-pid) while the leader is unreaped (running or a zombie), so that
// the number is still its group's.
// Preconditions: g.mu is held, g.fd is open.
func (g *Group) signalByNumber(sig syscall.Signal) error {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PIDFD, g.fd, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if errors.Is(err, unix.ECHILD) {
		return unix.ESRCH // reaped: the number may be another group's
	}
	if err != nil {
		return err
	}
	return unix.Kill(-g.pid, sig)
}

// Kill sends SIGKILL to the group; a group already gone is fine.
func (g *Group) Kill() error {
	if err := g.Signal(unix.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// Close releases the pidfd; Signal then reports os.ErrProcessDone.
func (g *Group) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fd < 0 {
		return nil
	}
	err := unix.Close(g.fd)
	g.fd = -1
	return err
}
