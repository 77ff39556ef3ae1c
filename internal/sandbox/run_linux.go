package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"mcpbox/internal/cgroup"
	"mcpbox/internal/egress"
)

// Sandbox is one running sandbox.
type Sandbox struct {
	ID string
	// Degraded lists the layers missing on this host that the Spec
	// accepted to lose.
	Degraded []Layer
	// Prepared: the sandbox was prepared in advance (Prepare, a Pool's
	// warm one) and Start only sent it the workload.
	Prepared bool

	spec    Spec
	cmd     *exec.Cmd
	start   time.Time
	timeout *time.Timer

	root    bool          // mcpbox runs as host root
	hostUID int           // the host uid the sandbox user maps to
	cleaned chan struct{} // closed when stale cgroups are removed
	stopCtx func() bool   // detaches the context's kill once Wait returns
	ttyFD   int           // the terminal handed to the sandbox's group, or -1
	mntNS   int           // the init's mount namespace (holdMounts), or -1
	stdinW  *os.File      // the pipe pumpStdin feeds, if any

	proxy      *egress.Proxy // the egress proxy, if the Spec has a network
	egressDir  string        // holds the proxy's socket
	extraBinds []Mount       // mounts the sandbox adds itself (the proxy socket)
	cover      []string      // extraBinds targets that cover a system-view file (the trust bundle)

	// sizeStop ends the size watcher (disksize_linux.go), which closes
	// sizeDone; both nil without size limits.
	sizeStop, sizeDone chan struct{}

	// born: the init started inside cg (spawnInCgroup); written on the
	// spawn thread before Start reads it.
	born bool
	// ctl is the control socket of a prepared sandbox waiting for its
	// workload, execR the read end of its forked workload's report pipe,
	// claim and claimBase where its claim goes, and copies the pumps of its non-file stdout and stderr
	// (warm_linux.go); nil and empty for Start.
	ctl       *os.File
	execR     *os.File
	claim     *os.File // the host's end of the workload's claim socket
	claimBase uintptr  // the address of the workload's claim buffer
	copies    sync.WaitGroup

	mu       sync.Mutex
	cg       *cgroup.Cgroup // guarded by mu: kill may run from ctx or the timer
	timedOut bool           // guarded by mu
	sizeErr  *SizeError     // guarded by mu: the first dir found over its limit

	// pmu serializes Pause, Resume and Kill (pause_linux.go).
	pmu    sync.Mutex
	paused atomic.Bool // written under pmu
	ended  bool        // guarded by pmu: Kill ran or the init exited
	// stopping (guarded by pmu) refuses Pause: ResumeToStop ran.
	stopping bool
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
// The cgroup is created first and the init born in it; the init's runtime
// boots while the host compiles the config, which the init waits for.
func Start(ctx context.Context, spec Spec, stdio Stdio) (_ *Sandbox, err error) {
	if err := spec.check(); err != nil {
		return nil, &StartError{Code: exitSetup, Err: err}
	}
	sb := &Sandbox{ID: spec.ID, spec: spec, start: time.Now(), root: os.Geteuid() == 0, ttyFD: foregroundTTY(stdio.Stdin), mntNS: -1}
	if spec.fileSizeLimit() > 0 {
		stdio = pipeRegularFiles(stdio)
	}
	if sb.ID == "" {
		sb.ID = NewID()
	}
	var undo []func()
	defer func() {
		if err == nil {
			return
		}
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		if ctx.Err() != nil { // the real cause of whatever broke
			err = &StartError{Code: exitSetup, Err: fmt.Errorf("starting sandbox: %w", context.Cause(ctx))}
		}
	}()
	// The cgroup comes first, so that the init is born in it (spawnInit)
	// instead of moved there, which costs milliseconds.
	if err := sb.createCgroup(); err != nil {
		return nil, err
	}
	if cg := sb.cgroup(); cg != nil {
		undo = append(undo, func() { _ = cg.Destroy() })
	}
	ctl, cfgW, err := sb.startInit(stdio)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	defer cfgW.Close()
	sb.holdMounts()
	undo = append(undo, func() {
		_ = sb.cmd.Process.Kill()
		_ = sb.cmd.Wait()
		sb.releaseMounts()
		if sb.stdinW != nil {
			sb.stdinW.Close()
		}
		releaseHostID(sb.hostUID)
	})
	if sb.ttyFD >= 0 {
		// The sandbox's group takes the terminal before the workload runs,
		// so that no keystroke in between goes to mcpbox instead (and a
		// read from a background group would stop the workload).
		_ = setForeground(sb.ttyFD, sb.cmd.Process.Pid)
		undo = append(undo, func() { _ = setForeground(sb.ttyFD, unix.Getpgrp()) })
	}
	// From here on cancelling ctx kills the init, which also unblocks a
	// setup stuck on, say, a hung mount source.
	sb.stopCtx = context.AfterFunc(ctx, sb.Kill)
	undo = append(undo, func() { sb.stopCtx() })
	host := probeHost() // while the init boots
	degraded, err := host.degradations(&spec)
	if err != nil {
		return nil, err
	}
	sb.Degraded = append(degraded, sb.Degraded...) // createCgroup's, if any
	if err := sb.joinCgroup(); err != nil {
		return nil, err
	}
	if spec.Network.Enabled() {
		undo = append(undo, sb.stopEgress)
		m, err := sb.startEgress()
		if err != nil {
			return nil, &StartError{Code: exitSetup, Err: err}
		}
		sb.extraBinds = append(sb.extraBinds, m)
		if err := sb.addTrust(); err != nil {
			return nil, &StartError{Code: exitSetup, Err: err}
		}
	}
	cfg, idmapFDs, err := sb.initConfig()
	for _, fd := range idmapFDs {
		defer unix.Close(fd)
	}
	if err != nil {
		return nil, err
	}
	if err := sendConfig(ctl, cfgW, cfg, idmapFDs); err != nil {
		return nil, &StartError{Code: exitSetup, Err: fmt.Errorf("sending sandbox config: %w", err)}
	}
	if spec.hold {
		return sb, sb.awaitReady(ctl) // warm_linux.go: Prepared.Start goes on
	}
	if err := readReport(ctl); err != nil {
		return nil, err
	}
	sb.watch(ctx)
	return sb, nil
}

// startInit starts the sandbox init. It returns the host's end of the
// control socket (fds and the init's report) and of the config pipe.
func (sb *Sandbox) startInit(stdio Stdio) (ctl, cfgW *os.File, err error) {
	ctl, child, err := controlSocket()
	if err != nil {
		return nil, nil, &StartError{Code: exitSetup, Err: fmt.Errorf("creating control socket: %w", err)}
	}
	defer child.Close()
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		ctl.Close()
		return nil, nil, &StartError{Code: exitSetup, Err: fmt.Errorf("creating config pipe: %w", err)}
	}
	defer cfgR.Close()
	stdio, stdinR := sb.pumpStdin(stdio)
	if stdinR != nil {
		defer stdinR.Close()
	}
	sb.cmd = initCommand(sb, stdio, child, cfgR)
	// sb.cmd is read at the call: spawnInCgroup may replace it.
	start := func() error { return startCommand(sb.cmd) }
	if sb.root {
		start = func() error { return asHostID(sb.hostUID, func() error { return startCommand(sb.cmd) }) }
	}
	if err := onSpawnThread(sb.spawnInCgroup(start)); err != nil {
		ctl.Close()
		cfgW.Close()
		if sb.stdinW != nil {
			sb.stdinW.Close()
		}
		releaseHostID(sb.hostUID)
		if why := probeHost().usernsErr; why != nil {
			err = why
		}
		return nil, nil, &StartError{Layer: LayerUserns, Code: exitSetup, Err: fmt.Errorf("creating namespaces: %w", err)}
	}
	return ctl, cfgW, nil
}

// controlSocket returns the host's end and the init's of a new control
// socket. The host's end is non-blocking: the host waits for the init's
// report in the poller (readRaw).
func controlSocket() (host, child *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := setNonblock(fds[0]); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control-child"), nil
}

// holdMounts opens the init's mount namespace, so that the init's exit
// does not tear it down: that takes every mount of the sandbox's root off
// and waits for an RCU grace period before it frees them (namespace_unlock),
// ~0.3 ms on an idle host and milliseconds on a busy one, on the path
// from the workload's exit to Wait's return. releaseMounts hands that to
// a goroutine instead. Nothing depends on its timing: no process is left
// in the sandbox to see the mounts once the init, pid 1 of its pid
// namespace, has exited, no other process can enter the namespace (the
// descriptor is this process's alone, close-on-exec), and the kernel
// closes it, at the latest, when this process exits. Without the
// descriptor (the open failed), the init's exit tears the mounts down as
// before. What may notice: for the moment until the goroutine runs, the
// sandbox's binds still pin the host file systems they came from, so
// unmounting one of those on the host right as a sandbox ends can fail
// with EBUSY. A sandbox with an input overlay lets go before Wait
// returns (releaseMounts).
//
// Preconditions: the init is started and not yet reaped, so that its pid
// names it.
func (sb *Sandbox) holdMounts() {
	fd, err := unix.Open("/proc/"+strconv.Itoa(sb.cmd.Process.Pid)+"/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		sb.mntNS = fd
	}
}

// releaseMounts lets the sandbox's mounts go (holdMounts), off the
// caller's path, except with an input overlay: that is unmounted before
// Wait returns, as without the descriptor, because Wait then walks its
// upper dir (stripSetID) and the caller may mount the same upper and work
// dirs again at once, which overlayfs refuses or warns about while the
// old mount is there. close(2) tears the namespace down before it
// returns.
//
// Preconditions: the init has been reaped.
func (sb *Sandbox) releaseMounts() {
	fd := sb.mntNS
	if fd < 0 {
		return
	}
	sb.mntNS = -1
	if sb.spec.InputOverlay != nil {
		unix.Close(fd)
		return
	}
	go unix.Close(fd)
}

// pumpStdin gives the init a pipe for a stdin that is not a file, and
// copies into it. os/exec would do the same, but then Wait would wait for
// the copy, which only ends when the reader does; Wait closes our end as
// soon as the sandbox is gone instead.
func (sb *Sandbox) pumpStdin(stdio Stdio) (Stdio, *os.File) {
	if stdio.Stdin == nil {
		return stdio, nil
	}
	if _, ok := stdio.Stdin.(*os.File); ok {
		return stdio, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return stdio, nil // os/exec pumps it then
	}
	in := stdio.Stdin
	go func() {
		_, _ = io.Copy(w, in)
		w.Close()
	}()
	sb.stdinW = w
	stdio.Stdin = r
	return stdio, r
}

// createCgroup creates the sandbox's cgroup, before the init exists.
// Without cgroups the sandbox starts only if the spec accepts the
// degradation.
func (sb *Sandbox) createCgroup() error {
	l := sb.spec.Limits
	if !l.hasCgroupLimits() {
		return nil
	}
	pids := l.Pids
	if pids > 0 {
		pids += initTasks
	}
	cg, err := cgroup.Create(sb.ID, cgroup.Limits{Memory: l.Memory, Pids: pids, WorkloadPids: l.Pids, CPU: l.CPU})
	if err != nil {
		if sb.spec.degradable(LayerCgroups) {
			sb.Degraded = appendOnce(sb.Degraded, LayerCgroups)
			return nil
		}
		return &StartError{Layer: LayerCgroups, Code: exitSetup, Err: fmt.Errorf(
			"isolation layer cgroups is unavailable: %w; refusing to start without memory and pids limits (accept with --allow-degraded=cgroups)", err)}
	}
	sb.mu.Lock()
	sb.cg = cg
	sb.mu.Unlock()
	return nil
}

// spawnInCgroup wraps start, which forks the init, so that the init is
// born in the sandbox's cgroup, if it has one: on v2 the clone puts it
// there (CLONE_INTO_CGROUP), on v1 the spawn thread steps into the cgroup
// for the fork (cgroup.SpawnInside). Either way the init is inside before
// it runs a single instruction. Where neither works, joinCgroup moves it.
//
// Preconditions: it runs on the spawn thread (onSpawnThread).
func (sb *Sandbox) spawnInCgroup(start func() error) func() error {
	cg := sb.cgroup()
	if cg == nil {
		return start
	}
	return func() error {
		// Host root forks the init as an unprivileged uid (asHostID),
		// which may not write the cgroup: CLONE_INTO_CGROUP would fail.
		if f, err := cg.DirFD(); err == nil && !sb.root {
			defer f.Close()
			plain := *sb.cmd.SysProcAttr
			sb.cmd.SysProcAttr.UseCgroupFD, sb.cmd.SysProcAttr.CgroupFD = true, int(f.Fd())
			if err := start(); err == nil {
				sb.born = true
				return nil
			}
			// Refused (a kernel or setup that does not allow it): a
			// plain start, then joinCgroup moves the init.
			sb.cmd = retryCommand(sb.cmd, &plain)
			return start()
		}
		ran := false
		err := cg.SpawnInside(func() error {
			ran = true
			return start()
		})
		if !ran {
			return start()
		}
		sb.born = err == nil
		return err
	}
}

// retryCommand is a fresh, unstarted copy of c, which failed to start,
// with attr.
func retryCommand(c *exec.Cmd, attr *syscall.SysProcAttr) *exec.Cmd {
	return &exec.Cmd{
		Path: c.Path, Args: c.Args, Env: c.Env, Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr,
		ExtraFiles: c.ExtraFiles, SysProcAttr: attr, WaitDelay: c.WaitDelay,
	}
}

// joinCgroup moves the init into the sandbox's cgroup unless it was born
// there, before the init builds anything (it waits for its config).
func (sb *Sandbox) joinCgroup() error {
	cg := sb.cgroup()
	if cg == nil || sb.born {
		return nil
	}
	if err := cg.Add(sb.cmd.Process.Pid); err != nil {
		return &StartError{Layer: LayerCgroups, Code: exitSetup, Err: fmt.Errorf("moving sandbox into its cgroup: %w", err)}
	}
	return nil
}

// staleEvery spaces out the removal of crash leftovers that starts make
// (watch): at most one pass per staleEvery in a process. Leftovers come
// from mcpbox processes that died, and cgroup.CleanupStale spares those
// younger than its own 5 s grace anyway, while a pass costs every start
// ~0.7 ms of CPU on a v1 host with no other sandbox, and more with many
// (it lists each sandbox's tasks in each hierarchy). A one-shot `mcpbox
// exec` still makes one; the gateway also cleans up when it starts
// (daemon.cleanLeftovers).
const staleEvery = 5 * time.Second

// staleLast is when the last pass of crash-leftover removal started, in
// unix nanoseconds; zero: never.
var staleLast atomic.Int64

// staleDue reports whether a start at now makes a pass of crash-leftover
// removal, and claims it if so: only one of concurrent starts does.
func staleDue(now time.Time) bool {
	last := staleLast.Load()
	if last != 0 && now.UnixNano()-last < int64(staleEvery) && now.UnixNano() >= last {
		return false
	}
	return staleLast.CompareAndSwap(last, now.UnixNano())
}

// watch arms the timeout and the size watcher, and removes crash
// leftovers of earlier runs while the workload runs (Wait waits for that,
// so a short-lived command does not cut it off), at most once per
// staleEvery.
func (sb *Sandbox) watch(ctx context.Context) {
	if d := sb.spec.Limits.Timeout; d > 0 {
		sb.timeout = time.AfterFunc(d, sb.expire)
	}
	if ls := sb.spec.sizeLimits(); len(ls) > 0 {
		sb.sizeStop, sb.sizeDone = make(chan struct{}), make(chan struct{})
		go sb.watchSizes(ls, sb.sizeStop, sb.sizeDone)
	}
	sb.cleaned = make(chan struct{})
	if !staleDue(time.Now()) {
		close(sb.cleaned)
		return
	}
	go func() {
		defer close(sb.cleaned)
		_, _ = cgroup.CleanupStale()
		cleanupStaleEgress()
	}()
}

// initTasks is what the sandbox init itself may use of the sandbox
// cgroup's pids limit. Its Go runtime, with GOMAXPROCS=1, keeps the
// threads it made (idle ones park in futex; sysmon; the reaper waits in
// wait4): the test binary as the init was counted at up to 9 and 10
// threads with the cold start's clone on a loaded 2-core host, 8 with
// the older fork, and with 8 here a workload's last forks under a small
// --pids were refused by the sandbox's limit, not its own. Limits.Pids
// counts the workload's processes and threads only: the workload runs
// in a cgroup nested in the sandbox's with that limit
// (cgroup.Limits.WorkloadPids), so however many it forks, these stay
// the init's, which a Go runtime that cannot start a thread would die
// for.
const initTasks = 16

func (l Limits) hasCgroupLimits() bool { return l.Memory > 0 || l.Pids > 0 || l.CPU > 0 }

// initCommand is the sandbox init: this binary re-executed in new
// namespaces as uid 1000, the sandbox user, which maps to one host uid: the
// invoking user's, the only one an unprivileged process may map, or, for
// host root, an unprivileged uid picked per sandbox (root forks it as that
// uid, see asHostID, so the user namespace is not root's). The init keeps
// the few capabilities it needs through exec as ambient ones; it empties
// them on the thread that forks the workload.
func initCommand(sb *Sandbox, stdio Stdio, ctl, cfg *os.File) *exec.Cmd {
	uid, gid := os.Getuid(), os.Getgid()
	if sb.root {
		uid = allocHostID()
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
		// The init dies with mcpbox, even SIGKILLed, and the pid namespace
		// with it; forked from the spawn thread (spawn_linux.go), since the
		// signal follows the forking thread, not the process.
		Pdeathsig: unix.SIGKILL,
		// A process group of its own: see tty_linux.go.
		Setpgid: true,
	}
	if sb.spec.InputOverlay != nil {
		attr.AmbientCaps = append(attr.AmbientCaps, overlayCaps...)
	}
	if sb.spec.Network.bindsLowPorts() {
		attr.AmbientCaps = append(attr.AmbientCaps, unix.CAP_NET_BIND_SERVICE)
	}
	return &exec.Cmd{
		Path: initPath(), // this binary, or a lean init of the same build
		// The sandbox's ID after the marker tells, in ps, which init is
		// which sandbox's (mcpbox ps lists the IDs).
		Args: []string{"mcpbox-init", initArg, sb.ID},
		// One P is plenty for the init, and each P costs page faults at
		// start-up (the workload gets its own environment).
		Env:         []string{"GOMAXPROCS=1"},
		Stdin:       stdio.Stdin,
		Stdout:      stdio.Stdout,
		Stderr:      stdio.Stderr,
		ExtraFiles:  []*os.File{ctl, cfg},
		SysProcAttr: attr,
		// A non-*os.File stdin is pumped by a goroutine that only ends when
		// the reader does: do not let it hold Wait once the init is gone.
		WaitDelay: time.Second,
	}
}

// Host ids for sandboxes started by host root: above the ranges systemd
// gives containers (up to 0x6FFFFFFF) and SSSD maps domain users to (up to
// 2000200000), far above real accounts, picked
// at random per sandbox and never twice at once within one process.
// Sandboxes of two processes could draw the same id (1 in 2^24); they
// would still share nothing: separate pid, mount and network namespaces.
const (
	rootModeBase = 0x78000000
	rootModeSpan = 1 << 24
)

var (
	hostIDsMu sync.Mutex
	hostIDs   = map[int]bool{} // guarded by hostIDsMu
)

func allocHostID() int {
	hostIDsMu.Lock()
	defer hostIDsMu.Unlock()
	for {
		id := rootModeBase + int(randUint32()%rootModeSpan)
		if !hostIDs[id] {
			hostIDs[id] = true
			return id
		}
	}
}

func releaseHostID(id int) {
	hostIDsMu.Lock()
	delete(hostIDs, id)
	hostIDsMu.Unlock()
}

func randUint32() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint32(b[:])
}

// sendConfig writes the config to the init's pipe, and the idmapped mount
// fds, if any, over the control socket (one message, possibly empty).
func sendConfig(ctl, cfgW *os.File, cfg *initConfig, fds []int) error {
	if len(fds) > maxFDs {
		return fmt.Errorf("%d descriptors for the init (idmapped mounts, the workload's cgroup): at most %d are supported", len(fds), maxFDs)
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	// The socket is non-blocking (controlSocket): room is waited for in
	// the poller.
	rc, err := ctl.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), []byte{byte(len(fds))}, oob, nil, 0)
		return serr != unix.EAGAIN
	}); err != nil {
		return err
	}
	if serr != nil {
		return serr
	}
	_, err = cfgW.Write(encodeConfig(cfg))
	if cerr := cfgW.Close(); err == nil {
		err = cerr
	}
	return err
}

// reportMax is the largest init report the host reads (readReport,
// awaitReady); a longer one is cut short and refused.
const reportMax = 64 << 10

// reportBufs holds the buffers the host reads reports into. A fresh one
// per start was, zeroed, half of what a start allocated, and 16 more
// pages for the copy-on-write faults the init's clone leaves on the
// host's written memory (see docs/performance.md); a reused one is
// written only as far as the report goes. Decoding copies what it keeps.
var reportBufs = sync.Pool{New: func() any { return new([reportMax]byte) }}

func readReport(ctl *os.File) error {
	bp := reportBufs.Get().(*[reportMax]byte)
	defer reportBufs.Put(bp)
	buf := bp[:]
	n, err := readRaw(ctl, buf)
	if err != nil || n == 0 {
		return &StartError{Code: exitSetup, Err: errors.New("sandbox init exited before starting the workload")}
	}
	r, err := decodeReport(buf[:n])
	if err != nil {
		return &StartError{Code: exitSetup, Err: fmt.Errorf("reading sandbox init report: %w", err)}
	}
	if !r.Started && !r.Ready {
		return &StartError{Layer: r.Layer, Code: r.Code, Err: errors.New(r.Error)}
	}
	return nil
}

// stopSizeWatch stops the size watcher, if any, and measures once more:
// a workload that wrote past a limit and exited before the watcher's next
// round is reported all the same.
func (sb *Sandbox) stopSizeWatch() {
	if sb.sizeStop == nil {
		return
	}
	close(sb.sizeStop)
	<-sb.sizeDone
	if e := checkSizes(sb.spec.sizeLimits()); e != nil {
		sb.setSizeErr(e)
	}
}

func (sb *Sandbox) cgroup() *cgroup.Cgroup {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.cg
}

// Kill ends the sandbox at once: SIGKILL to its init takes the whole pid
// namespace with it, and the cgroup is killed too for anything that
// escaped it. A paused sandbox is thawed after the SIGKILLs are sent: on
// cgroup v1 a frozen task does not die before it thaws (cgroup.Kill
// thaws v1 itself; the Thaw covers a kill that could not freeze).
func (sb *Sandbox) Kill() {
	paused := sb.end()
	_ = sb.cmd.Process.Signal(unix.SIGKILL)
	thawed := !paused
	if cg := sb.cgroup(); cg != nil {
		_ = cg.Kill()
		if paused {
			thawed = cg.Thaw() == nil
		}
	}
	if paused && thawed {
		sb.unwatch() // only now: the guard thaws it if mcpbox dies before
	}
}

// Signal sends sig to the sandbox init, which forwards it to the workload.
func (sb *Sandbox) Signal(sig os.Signal) error { return sb.cmd.Process.Signal(sig) }

func (sb *Sandbox) expire() {
	sb.mu.Lock()
	sb.timedOut = true
	sb.mu.Unlock()
	sb.Kill()
}

// Wait waits for the workload to exit, then removes the sandbox's cgroup
// and clears setuid and setgid bits in the input overlay's upper dir
// (stripSetID). Every process of the sandbox is gone when it returns.
func (sb *Sandbox) Wait() (*Result, error) {
	awaitExit(sb.cmd.Process.Pid) // in the poller: see rawio_unsafe.go
	err := sb.cmd.Wait()
	sb.releaseMounts()
	sb.copies.Wait()
	if sb.end() {
		sb.unwatch() // its init has exited: nothing is left to thaw
	}
	sb.stopEgress()
	if sb.ttyFD >= 0 {
		_ = setForeground(sb.ttyFD, unix.Getpgrp())
	}
	if sb.stdinW != nil {
		sb.stdinW.Close() // ends the stdin pump at its next write
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // output pipes held open past the init's exit; the status stands
		if !sb.cmd.ProcessState.Success() {
			err = &exec.ExitError{ProcessState: sb.cmd.ProcessState}
		}
	}
	sb.stopCtx()
	<-sb.cleaned
	if sb.timeout != nil {
		sb.timeout.Stop()
	}
	sb.stopSizeWatch()
	releaseHostID(sb.hostUID)
	res := &Result{Duration: time.Since(sb.start)}
	sb.mu.Lock()
	res.SizeExceeded = sb.sizeErr
	sb.mu.Unlock()
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
	// The size watcher may find a dir over its limit just as the workload
	// exits on its own: only a killed workload was stopped for it.
	if e := res.SizeExceeded; e != nil && e.Stopped && res.ExitCode != 128+int(unix.SIGKILL) {
		c := *e
		c.Stopped = false
		res.SizeExceeded = &c
	}
	// The timer may fire just as the workload exits on its own: only a
	// killed workload timed out.
	sb.mu.Lock()
	res.TimedOut = sb.timedOut && res.ExitCode == 128+int(unix.SIGKILL)
	sb.mu.Unlock()
	if cg := sb.cgroup(); cg != nil {
		if st, err := cg.ExitStats(); err == nil {
			res.OOMKilled = st.OOMKills > 0
			res.PidsExhausted = st.PidsLimitHits > 0
			res.MemoryPeak = int64(st.MemoryPeak)
		}
		if err := cg.Destroy(); err != nil {
			return res, fmt.Errorf("removing cgroup: %w", err)
		}
	}
	if o := sb.spec.InputOverlay; o != nil {
		if err := stripSetID(o.Upper); err != nil {
			return res, fmt.Errorf("checking the input overlay's upper dir: %w", err)
		}
	}
	return res, nil
}

// check rejects Specs the sandbox cannot honour.
func (s *Spec) check() error {
	if len(s.Args) == 0 || s.Args[0] == "" {
		return errors.New("no command given")
	}
	for _, f := range s.Network.Forwards {
		ap, err := netip.ParseAddrPort(f.Listen)
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()) // as the kernel binds it
		if err != nil || !ap.Addr().IsLoopback() || ap.String() == proxyAddr {
			return fmt.Errorf("forward %s -> %s: listen must be a loopback IP:PORT other than %s", f.Listen, f.To, proxyAddr)
		}
		if fakeNet.Contains(ap.Addr()) {
			return fmt.Errorf("forward %s -> %s: listen must not be in %s, where the sandbox's DNS gives names their addresses", f.Listen, f.To, fakeNet)
		}
	}
	if err := s.checkSecrets(); err != nil {
		return err
	}
	if s.Root != "" && (!isAbs(s.Root) || path.Clean(s.Root) != s.Root || s.Root == "/") {
		return fmt.Errorf("root %s: must be an absolute, clean path other than /", s.Root)
	}
	binds := s.allBinds()
	for _, m := range binds {
		if !isAbs(m.Source) || !isAbs(m.Target) || path.Clean(m.Target) != m.Target || m.Target == "/" {
			return fmt.Errorf("mount %s:%s: paths must be absolute and clean, and the target not /", m.Source, m.Target)
		}
		// Creating a mount point inside another bind would create it on
		// the host, following whatever links an earlier sandbox planted.
		for _, o := range binds {
			if o.Target != m.Target && strings.HasPrefix(m.Target, o.Target+"/") {
				return fmt.Errorf("mount target %s lies inside the mount at %s; nested mounts are not supported", m.Target, o.Target)
			}
		}
	}
	return nil
}

func isAbs(p string) bool { return len(p) > 0 && p[0] == '/' }
