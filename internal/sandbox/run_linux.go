package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"mcpbox/internal/cgroup"
)

// Sandbox is one running sandbox.
type Sandbox struct {
	ID string
	// Degraded lists the layers missing on this host that the Spec
	// accepted to lose.
	Degraded []Layer

	spec    Spec
	cmd     *exec.Cmd
	cg      *cgroup.Cgroup
	start   time.Time
	timeout *time.Timer

	hostUID int           // the host uid the sandbox user maps to
	cleaned chan struct{} // closed when stale cgroups are removed

	mu       sync.Mutex
	timedOut bool // guarded by mu
}

// Run starts a sandbox and waits for it.
func Run(ctx context.Context, spec Spec, stdio Stdio) (*Result, error) {
	sb, err := Start(ctx, spec, stdio)
	if err != nil {
		return nil, err
	}
	return sb.Wait()
}

// Start builds the sandbox and starts the workload in it. It returns once
// the workload's execve succeeded, or with a *StartError. Cancelling ctx
// kills the sandbox.
//
// The init is started first: its runtime boots while the host creates the
// cgroup and compiles the config, which the init waits for.
func Start(ctx context.Context, spec Spec, stdio Stdio) (_ *Sandbox, err error) {
	if err := spec.check(); err != nil {
		return nil, &StartError{Code: exitSetup, Err: err}
	}
	host := probeHost()
	degraded, err := host.degradations(&spec)
	if err != nil {
		return nil, err
	}
	sb := &Sandbox{ID: spec.ID, Degraded: degraded, spec: spec, start: time.Now()}
	if sb.ID == "" {
		sb.ID = NewID()
	}
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	ctl, err := sb.startInit(host, stdio)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	undo = append(undo, func() { _ = sb.cmd.Process.Kill(); _ = sb.cmd.Wait() })
	if err := sb.joinCgroup(); err != nil {
		return nil, err
	}
	if sb.cg != nil {
		undo = append(undo, func() { _ = sb.cg.Destroy() })
	}
	cfg, idmapFDs, err := sb.initConfig(host)
	for _, fd := range idmapFDs {
		defer unix.Close(fd)
	}
	if err != nil {
		return nil, err
	}
	if err := sendConfig(ctl, cfg, idmapFDs); err != nil {
		return nil, &StartError{Code: exitSetup, Err: fmt.Errorf("sending sandbox config: %w", err)}
	}
	if err := readReport(ctl); err != nil {
		return nil, err
	}
	sb.watch(ctx)
	return sb, nil
}

// startInit starts the sandbox init and returns the host's end of the
// control socket.
func (sb *Sandbox) startInit(host *hostInfo, stdio Stdio) (*os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, &StartError{Code: exitSetup, Err: fmt.Errorf("creating control socket: %w", err)}
	}
	ctl := os.NewFile(uintptr(fds[0]), "control")
	child := os.NewFile(uintptr(fds[1]), "control-child")
	defer child.Close()
	sb.cmd = initCommand(sb, host, stdio, child)
	if err := sb.cmd.Start(); err != nil {
		ctl.Close()
		return nil, &StartError{Layer: LayerUserns, Code: exitSetup, Err: fmt.Errorf("creating namespaces: %w", err)}
	}
	return ctl, nil
}

// joinCgroup creates the sandbox's cgroup and moves the init into it
// before the init builds anything. Without cgroups the sandbox starts only
// if the spec accepts the degradation.
func (sb *Sandbox) joinCgroup() error {
	l := sb.spec.Limits
	if !l.hasCgroupLimits() {
		return nil
	}
	pids := l.Pids
	if pids > 0 {
		pids += initTasks
	}
	cg, err := cgroup.Create(sb.ID, cgroup.Limits{Memory: l.Memory, Pids: pids, CPU: l.CPU})
	if err != nil {
		if sb.spec.degradable(LayerCgroups) {
			sb.Degraded = appendOnce(sb.Degraded, LayerCgroups)
			return nil
		}
		return &StartError{Layer: LayerCgroups, Code: exitSetup, Err: fmt.Errorf(
			"isolation layer cgroups is unavailable: %w; refusing to start without memory and pids limits (accept with --allow-degraded=cgroups)", err)}
	}
	if err := cg.Add(sb.cmd.Process.Pid); err != nil {
		_ = cg.Destroy()
		return &StartError{Layer: LayerCgroups, Code: exitSetup, Err: fmt.Errorf("moving sandbox into its cgroup: %w", err)}
	}
	sb.cg = cg
	return nil
}

// watch arms the timeout and the context, and removes crash leftovers of
// earlier runs while the workload runs (Wait waits for that, so a
// short-lived command does not cut it off).
func (sb *Sandbox) watch(ctx context.Context) {
	if d := sb.spec.Limits.Timeout; d > 0 {
		sb.timeout = time.AfterFunc(d, sb.expire)
	}
	if ctx.Done() != nil {
		go func() {
			<-ctx.Done()
			sb.kill()
		}()
	}
	sb.cleaned = make(chan struct{})
	go func() {
		defer close(sb.cleaned)
		_, _ = cgroup.CleanupStale()
	}()
}

// initTasks is what the sandbox init itself may use of the pids limit: a
// Go runtime with GOMAXPROCS=1 runs up to 7 threads. Limits.Pids counts the
// workload's processes and threads only.
const initTasks = 8

func (l Limits) hasCgroupLimits() bool { return l.Memory > 0 || l.Pids > 0 || l.CPU > 0 }

// initCommand is the sandbox init: this binary re-executed in new
// namespaces as uid 1000, the sandbox user, which maps to one host uid: the
// invoking user's, the only one an unprivileged process may map, or, for
// host root, an unprivileged uid picked per sandbox. The init keeps the few
// capabilities it needs through exec as ambient ones; it empties them on
// the thread that forks the workload.
func initCommand(sb *Sandbox, host *hostInfo, stdio Stdio, ctl *os.File) *exec.Cmd {
	uid, gid := os.Getuid(), os.Getgid()
	if host.root {
		uid = rootModeBase + int(randUint32()%rootModeSpan)
		gid = uid
	}
	sb.hostUID = uid
	attr := &syscall.SysProcAttr{
		Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID |
			unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: sandboxUID, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: sandboxUID, HostID: gid, Size: 1}},
		Credential:  &syscall.Credential{Uid: sandboxUID, Gid: sandboxUID, NoSetGroups: true},
		// Mounts, pivot_root, hostname and cgroup namespace need SYS_ADMIN,
		// loopback NET_ADMIN, emptying the bounding set SETPCAP.
		AmbientCaps: []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP},
		Pdeathsig:   unix.SIGKILL,
	}
	if host.root {
		// Root may allow setgroups: drop host root's supplementary groups.
		attr.GidMappingsEnableSetgroups = true
		attr.Credential = &syscall.Credential{Uid: sandboxUID, Gid: sandboxUID, Groups: []uint32{}}
	}
	return &exec.Cmd{
		Path: "/proc/self/exe",
		Args: []string{"mcpbox-init", initArg},
		// One P is plenty for the init, and each P costs page faults at
		// start-up (the workload gets its own environment).
		Env:         []string{"GOMAXPROCS=1"},
		Stdin:       stdio.Stdin,
		Stdout:      stdio.Stdout,
		Stderr:      stdio.Stderr,
		ExtraFiles:  []*os.File{ctl},
		SysProcAttr: attr,
	}
}

// Host uids used for sandboxes started by host root: far above any real
// account, one per sandbox so two sandboxes never share a uid.
const (
	rootModeBase = 1 << 30
	rootModeSpan = 1 << 24
)

func randUint32() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint32(b[:])
}

// NewID returns a fresh sandbox id: "sbx_" and 12 random hex digits.
func NewID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("sbx_%x", b)
}

func sendConfig(ctl *os.File, cfg *initConfig, fds []int) error {
	data, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	return unix.Sendmsg(int(ctl.Fd()), data, oob, nil, 0)
}

func readReport(ctl *os.File) error {
	buf := make([]byte, 64<<10)
	n, err := unix.Read(int(ctl.Fd()), buf)
	if err != nil || n == 0 {
		return &StartError{Code: exitSetup, Err: errors.New("sandbox init exited before starting the workload")}
	}
	var r initReport
	if err := json.Unmarshal(buf[:n], &r); err != nil {
		return &StartError{Code: exitSetup, Err: fmt.Errorf("reading sandbox init report: %w", err)}
	}
	if !r.Started {
		return &StartError{Layer: r.Layer, Code: r.Code, Err: errors.New(r.Error)}
	}
	return nil
}

// Pid is the host pid of the sandbox init.
func (sb *Sandbox) Pid() int { return sb.cmd.Process.Pid }

// Kill ends the sandbox: SIGKILL to its init takes the whole pid namespace
// with it, and the cgroup is killed too for anything that escaped it.
func (sb *Sandbox) kill() {
	_ = sb.cmd.Process.Signal(unix.SIGKILL)
	if sb.cg != nil {
		_ = sb.cg.Kill()
	}
}

// Kill ends the sandbox at once.
func (sb *Sandbox) Kill() { sb.kill() }

// Signal sends sig to the sandbox init, which forwards it to the workload.
func (sb *Sandbox) Signal(sig os.Signal) error { return sb.cmd.Process.Signal(sig) }

func (sb *Sandbox) expire() {
	sb.mu.Lock()
	sb.timedOut = true
	sb.mu.Unlock()
	sb.kill()
}

// Wait waits for the workload to exit, then removes the sandbox's cgroup.
// Every process of the sandbox is gone when it returns.
func (sb *Sandbox) Wait() (*Result, error) {
	err := sb.cmd.Wait()
	<-sb.cleaned
	if sb.timeout != nil {
		sb.timeout.Stop()
	}
	res := &Result{Duration: time.Since(sb.start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal())
		} else {
			res.ExitCode = ws.ExitStatus()
		}
	default:
		return nil, fmt.Errorf("waiting for sandbox: %w", err)
	}
	sb.mu.Lock()
	res.TimedOut = sb.timedOut
	sb.mu.Unlock()
	if sb.cg != nil {
		if st, err := sb.cg.Stats(); err == nil {
			res.OOMKilled = st.OOMKills > 0
			res.PidsExhausted = st.PidsLimitHits > 0
			res.MemoryPeak = int64(st.MemoryPeak)
		}
		if err := sb.cg.Destroy(); err != nil {
			return res, fmt.Errorf("removing cgroup: %w", err)
		}
	}
	return res, nil
}

// check rejects Specs the sandbox cannot honour.
func (s *Spec) check() error {
	if len(s.Args) == 0 || s.Args[0] == "" {
		return errors.New("no command given")
	}
	if len(s.Egress) > 0 {
		return errors.New("network egress rules need the egress proxy, which this build does not have yet; refusing to start with a network the policy did not describe")
	}
	for _, m := range s.allBinds() {
		if !isAbs(m.Source) || !isAbs(m.Target) {
			return fmt.Errorf("mount %s:%s: paths must be absolute", m.Source, m.Target)
		}
	}
	return nil
}

func isAbs(p string) bool { return len(p) > 0 && p[0] == '/' }
