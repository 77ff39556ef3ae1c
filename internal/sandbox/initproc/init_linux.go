package initproc

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// Exit codes of the sandbox itself, chosen like docker's and env(1)'s.
const (
	exitSetup    = 125 // the sandbox could not be set up
	exitNoExec   = 126 // the command was found but could not run
	exitNotFound = 127 // the command was not found
)

// The init's end of the control socket (fds in, report out) and of the
// config pipe: its ExtraFiles.
const (
	controlFD = 3
	configFD  = 4
)

// initConfig is what the host sends the init over the control socket.
type initConfig struct {
	Hostname string `json:"hostname"`
	// SecretFiles go to /run/secrets.
	SecretFiles []secretFile `json:"secret_files,omitempty"`
	// Egress: serve the proxy socket on 127.0.0.1:3128, and Forwards.
	Egress   bool          `json:"egress,omitempty"`
	Forwards []forwardSpec `json:"forwards,omitempty"`
	// Transparent: with Egress, the ports (below 1024) on which programs
	// that ignore the proxy variables reach hosts by name, and the DNS
	// that gives them the names (transparent_linux.go).
	Transparent []int `json:"transparent,omitempty"`
	// TTY: the sandbox is the terminal's foreground group, and the kernel
	// delivers terminal signals to the workload itself.
	TTY          bool       `json:"tty,omitempty"`
	TmpSize      int64      `json:"tmp_size"`
	ExecWritable bool       `json:"exec_writable,omitempty"`
	Binds        []bindSpec `json:"binds,omitempty"`
	// Root, if set, is the image root that replaces the host's system
	// view (Spec.Root, rootfs_image_linux.go).
	Root *bindSpec `json:"root,omitempty"`
	// Overlay, if set, is mounted at /workspace/input (not in Binds).
	Overlay  *overlaySpec   `json:"overlay,omitempty"`
	Workload workloadConfig `json:"workload"`

	// InputMasks are paths below /workspace/input hidden under an empty
	// read-only directory (Spec.InputMasks, maskInput).
	InputMasks []string `json:"input_masks,omitempty"`

	// Hold: once the root is built, report Ready and wait for the
	// workload's command and stdio on the control socket (warm_linux.go).
	Hold bool `json:"hold,omitempty"`
}

// initReport is what the init sends back: an error during setup, or nil
// once the workload runs.
type initReport struct {
	Started bool   `json:"started,omitempty"`
	Ready   bool   `json:"ready,omitempty"` // held, waiting for its workload
	Error   string `json:"error,omitempty"`
	Layer   Layer  `json:"layer,omitempty"`
	Code    int    `json:"code,omitempty"` // the exit code the sandbox ends with
	// ClaimBase, with Ready: the address of the workload's claim buffer
	// (holdWorkload).
	ClaimBase uint64 `json:"claim_base,omitempty"`
}

// runInit is pid 1 of the sandbox. It builds the root, starts the
// workload, then reaps every process until the workload exits and returns
// its status; the kernel kills whatever is left in the pid namespace when
// pid 1 exits.
//
// It runs as the sandbox uid with the capabilities it needs as ambient
// ones (see initCommand); the workload gets none of them.
func runInit() int {
	ctl := os.NewFile(controlFD, "control")
	// The main thread leads the init's thread group: a signal sent to the
	// init goes to it, and only Landlock's signal scope keeps the
	// workload, of the init's kernel uid, from sending one. So it must
	// never be the walled thread (startWalled), which enters the
	// workload's Landlock domain: locked to this goroutine for good, it
	// runs no other goroutine. The main goroutine starts on the main
	// thread (runtime.main); checked, not assumed. A cold start that forks
	// in place lets go below.
	runtime.LockOSThread()
	if unix.Gettid() != unix.Getpid() {
		return reportSetup(ctl, "", errors.New("the sandbox init is not on its main thread"))
	}
	// Started through a descriptor (initbin_linux.go), the init would be
	// named after its number in ps.
	setComm("mcpbox-init")
	// Nothing the caller of mcpbox left open may reach the workload.
	if err := unix.CloseRange(controlFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return reportSetup(ctl, "", fmt.Errorf("marking inherited fds close-on-exec: %w", err))
	}
	cfg, fds, err := readInitConfig(ctl, os.NewFile(configFD, "config"))
	if err != nil {
		return reportSetup(ctl, "", fmt.Errorf("reading sandbox config: %w", err))
	}
	if !cfg.Hold && forksInPlace {
		// No thread of the init will enter the workload's Landlock domain
		// (startCold), so the main goroutine may leave the main thread.
		// Unlocked, it makes the signal set-up below 40% faster: each
		// signal caught is a round trip to the runtime's signal-mask
		// thread, and a locked goroutine's is two thread hand-overs.
		runtime.UnlockOSThread()
	}
	// No core files: they would land in the workspace. (The init turns
	// non-dumpable when it starts the workload: startWalled.)
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		return reportSetup(ctl, "", fmt.Errorf("disabling core files: %w", err))
	}
	if err := buildRoot(cfg, fds); err != nil {
		var layer Layer
		if oe := (*overlayError)(nil); errors.As(err, &oe) {
			layer = LayerOverlay
		}
		return reportSetup(ctl, layer, fmt.Errorf("building root filesystem: %w", err))
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return reportSetup(ctl, "", fmt.Errorf("setting hostname: %w", err))
	}
	if err := loopbackUp(); err != nil {
		return reportSetup(ctl, "", fmt.Errorf("bringing up loopback: %w", err))
	}
	if cfg.Egress {
		if err := serveEgress(cfg.Forwards, cfg.Transparent); err != nil {
			return reportSetup(ctl, "", err)
		}
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwardedSignals...)
	// Never read: a signal the workload sends to one of our threads is
	// taken here instead of ending the init (see straySignals).
	signal.Notify(make(chan os.Signal, 1), straySignals...)
	var child int
	var werr *workloadError
	if cfg.Hold { // after the signals' set-up: hundreds of sigactions
		child, werr = holdWorkload(ctl, &cfg.Workload)
	} else {
		child, werr = startCold(&cfg.Workload)
	}
	if werr != nil {
		_ = writeReport(ctl, initReport{Error: werr.Msg, Layer: werr.Layer, Code: werr.Code})
		return werr.Code
	}
	if !cfg.Hold { // held, it stays open and silent (holdWorkload)
		_ = writeReport(ctl, initReport{Started: true})
		ctl.Close()
	}
	if !cfg.TTY {
		releaseStdio()
	}
	code, stopped := reap(child, sigs, cfg.TTY)
	if code > 0 && code < 128 && !stopped && !cfg.Egress {
		hintNoNetwork() // nethint_linux.go
	}
	runtime.KeepAlive(ctl) // held, it must stay open until the end: no finalizer may close it
	return code
}

// releaseStdio points the init's stdin and stdout at /dev/null once the
// workload has its own copies: a workload that closes its stdout while it
// keeps running must give the reader EOF, as outside a sandbox, or a
// stdio server that does so would hang every call made to it. Stderr
// stays, for the init's own last words. Failing, the init keeps them, as
// before.
func releaseStdio() {
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(null)
	for _, fd := range []int{0, 1} {
		_ = unix.Dup3(null, fd, 0)
	}
}

// forwardedSignals are passed on to the workload. Catching them also keeps
// a stray one from killing the init (SIGABRT would make Go crash it).
var forwardedSignals = []os.Signal{
	unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2,
	unix.SIGABRT, unix.SIGALRM, unix.SIGWINCH, unix.SIGCONT,
}

// stopSignals are the forwarded signals that ask the workload to end.
var stopSignals = []os.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT}

// straySignals are the other signals that would end the init: those Go's
// runtime crashes of when a process sends them. While the walled thread
// forks the workload (startWalled), the workload shares its Landlock domain
// and can tgkill it: SIGILL or SIGSEGV sent by a process (not raised by a
// fault) would make Go crash the init. Go passes a sent synchronous signal
// to a channel that asked for it instead; real faults still crash. Notify,
// unlike Ignore, leaves the workload's dispositions at their defaults
// across exec.
//
// Not listed, as they cannot end the init: the signals Go merely notifies
// (SIGPIPE, SIGXCPU, SIGIO, the real-time ones, ...), which its handler
// drops when no channel wants them; SIGTSTP, SIGTTIN and SIGTTOU, left at
// their default, which the kernel never applies to a pid namespace's init;
// SIGCHLD, SIGURG and SIGPROF, Go's own; SIGKILL and SIGSTOP, which the
// kernel never delivers to that init from inside its namespace.
// TestInitSurvivesSignals (package sandbox) sends them all. Listing one
// would not be free: catching a signal Go merely notifies is a round trip
// to the runtime's signal-mask thread, 50-100 µs of every start on a busy
// machine.
//
// So the init never writes its stdout or stderr through os.File: Go
// raises SIGPIPE itself when such a write fails with EPIPE, and exits of
// it when no channel takes it (hintNoNetwork, TestHintToBrokenStderr).
var straySignals = []os.Signal{
	unix.SIGILL, unix.SIGTRAP, unix.SIGBUS, unix.SIGFPE, unix.SIGSEGV, unix.SIGSYS, unix.SIGSTKFLT,
}

// startWalled forks the workload from a dedicated, locked OS thread that
// puts up the walls and then dies: a thread in the workload's Landlock
// domain is one the workload may signal (tgkill SIGILL would crash the
// init), and the main thread, which leads the init's thread group, must
// stay outside that domain for the same reason. The workload needs no
// PDEATHSIG tied to that thread: when the init exits, the kernel kills the
// whole pid namespace. The workload's id maps are written from here,
// outside the Landlock domain, which would refuse them; only then does
// the child go on. It returns the workload's pid once it runs. (On amd64
// a cold start takes startCold's clone instead, vfork_unsafe.go.)
func startWalled(c *workloadConfig) (int, *workloadError) {
	path, werr := findCommand(c)
	if werr != nil {
		return 0, werr
	}
	pid, errR, werr := forkWalled(c, func(syncR, syncW, errW *os.File) (*forkSpec, error) {
		fs, err := newForkSpec(path, c)
		if err == nil {
			fs.syncR, fs.syncW, fs.errW = syncR.Fd(), syncW.Fd(), errW.Fd()
		}
		return fs, err
	})
	if werr != nil {
		return 0, werr
	}
	defer errR.Close()
	if werr := forkReport(c, errR); werr != nil {
		return 0, werr
	}
	return pid, nil
}

// findCommand looks the workload's command up in its PATH.
func findCommand(c *workloadConfig) (string, *workloadError) {
	path, err := lookPath(c.Args[0], c.Dir, c.Env)
	if err != nil {
		return "", commandError(err)
	}
	return path, nil
}

// forkWalled forks the workload on a walled thread (startWorkload), with
// the forkSpec spec makes, writes its id maps and lets it go on. It
// returns the workload's pid and the read end of its report pipe
// (forkReport); the caller closes it.
func forkWalled(c *workloadConfig, spec func(syncR, syncW, errW *os.File) (*forkSpec, error)) (int, *os.File, *workloadError) {
	setup := func(err error) (int, *os.File, *workloadError) {
		return 0, nil, &workloadError{Msg: err.Error(), Code: exitSetup}
	}
	syncR, syncW, err := os.Pipe()
	if err != nil {
		return setup(fmt.Errorf("creating the workload's sync pipe: %w", err))
	}
	defer syncW.Close()
	// Blocking, without the poller: the one read of it is on the start
	// path, and a blocked thread wakes sooner than a parked goroutine.
	var ep [2]int
	if err := unix.Pipe2(ep[:], unix.O_CLOEXEC); err != nil {
		syncR.Close()
		return setup(fmt.Errorf("creating the workload's report pipe: %w", err))
	}
	errR, errW := os.NewFile(uintptr(ep[0]), "report"), os.NewFile(uintptr(ep[1]), "report-w")
	fs, err := spec(syncR, syncW, errW)
	if err != nil {
		syncR.Close()
		errR.Close()
		errW.Close()
		return setup(fmt.Errorf("preparing the workload: %w", err))
	}
	type started struct {
		pid int
		err *workloadError
	}
	res := make(chan started, 1)
	go func() {
		// Never unlocked: the goroutine ends locked, so the runtime ends
		// the thread instead of reusing it with the walls on.
		runtime.LockOSThread()
		pid, err := startWorkload(c, fs)
		res <- started{pid, err}
	}()
	r := <-res
	syncR.Close()
	errW.Close()
	if r.err != nil {
		errR.Close()
		return 0, nil, r.err
	}
	fail := func(err error) (int, *os.File, *workloadError) {
		errR.Close()
		return setup(err)
	}
	if err := writeIDMaps(r.pid); err != nil {
		return fail(err)
	}
	// The workload shares our kernel uid; non-dumpable keeps it from
	// ptracing us or reading /proc/1/{environ,mem,exe} (its user namespace
	// being a child of ours does too). Not before: the child's id maps
	// are /proc files of a copy of us, which a non-dumpable process would
	// have owned by root.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("setting init non-dumpable: %w", err))
	}
	if _, err := syncW.Write([]byte{0}); err != nil {
		return fail(fmt.Errorf("starting the workload: %w", err))
	}
	return r.pid, errR, nil
}

// forkReport waits until the workload forked by forkWalled has executed
// its command, or says why it did not.
func forkReport(c *workloadConfig, errR *os.File) *workloadError {
	step, errno, err := readForkReport(errR)
	if err != nil {
		return &workloadError{Msg: err.Error(), Code: exitSetup}
	}
	if step != 0 {
		return forkFailure(c, step, errno)
	}
	return nil
}

// writeIDMaps maps the sandbox uid and gid 1:1 into the workload's new
// user namespace. Unprivileged as we are there, one id, our own, is all we
// may map, and only once setgroups is denied.
func writeIDMaps(pid int) error {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	id := strconv.Itoa(sandboxUID) + " " + strconv.Itoa(sandboxUID) + " 1\n"
	for _, f := range []struct{ name, data string }{{"uid_map", id}, {"setgroups", "deny"}, {"gid_map", id}} {
		if err := writeFile(dir+f.name, []byte(f.data), 0); err != nil {
			return fmt.Errorf("writing the workload's %s: %w", f.name, err)
		}
	}
	return nil
}

func readInitConfig(ctl, cfgR *os.File) (*initConfig, []int, error) {
	var buf [1]byte
	oob := make([]byte, unix.CmsgSpace(4*maxFDs))
	_, oobn, flags, _, err := unix.Recvmsg(int(ctl.Fd()), buf[:], oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, nil, err
	}
	if flags&unix.MSG_CTRUNC != 0 {
		return nil, nil, errors.New("too many file descriptors in the control message")
	}
	var fds []int
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return nil, nil, err
		}
		for _, m := range msgs {
			rights, err := unix.ParseUnixRights(&m)
			if err != nil {
				return nil, nil, err
			}
			fds = append(fds, rights...)
		}
	}
	b, err := readAll(cfgR)
	cfgR.Close()
	if err != nil {
		return nil, nil, err
	}
	cfg, err := decodeConfig(b)
	if err != nil {
		return nil, nil, err
	}
	for _, b := range cfg.Binds {
		if b.IdmapFD < 0 || b.IdmapFD > len(fds) {
			return nil, nil, fmt.Errorf("mount %s: no idmapped mount %d", b.Target, b.IdmapFD)
		}
	}
	w := &cfg.Workload
	for _, f := range []struct {
		fd   *int
		need bool
	}{{&w.CgroupFD, w.Cgroup != 0}, {&w.CgroupBackFD, w.Cgroup == cgroupMoveThread}, {&w.CgroupMaxFD, w.Cgroup == cgroupMoveThread}} {
		if i := *f.fd; i < 0 || i > len(fds) || f.need != (i > 0) || w.Cgroup < 0 || w.Cgroup > cgroupClone {
			return nil, nil, fmt.Errorf("the workload's cgroup: no descriptor %d for way %d", i, w.Cgroup)
		}
		if *f.fd > 0 {
			*f.fd = fds[*f.fd-1]
		}
	}
	if w.Cgroup == cgroupMoveThread && w.CgroupPids <= 0 {
		return nil, nil, fmt.Errorf("the workload's cgroup: pids limit %d", w.CgroupPids)
	}
	return cfg, fds, nil
}

func reportSetup(ctl *os.File, layer Layer, err error) int {
	_ = writeReport(ctl, initReport{Error: err.Error(), Layer: layer, Code: exitSetup})
	return exitSetup
}

// loopbackUp sets IFF_UP on lo, the only interface of the new network
// namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// reap forwards signals to the workload and reaps every child (pid 1 adopts
// orphans) until the workload itself exits; its status becomes ours, with
// 128+signal for a killed workload. stopped tells whether it passed on a
// signal that asks the workload to end (SIGTERM, SIGINT, SIGHUP,
// SIGQUIT): then whatever status follows is the stop's.
func reap(pid int, sigs chan os.Signal, tty bool) (code int, stopped bool) {
	done := make(chan int, 1)
	go func() {
		for {
			var ws unix.WaitStatus
			wpid, err := unix.Wait4(-1, &ws, 0, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				done <- exitSetup
				return
			}
			if wpid != pid {
				continue
			}
			switch {
			case ws.Exited():
				done <- ws.ExitStatus()
			case ws.Signaled():
				done <- 128 + int(ws.Signal())
			default:
				continue
			}
			return
		}
	}()
	for {
		select {
		case code := <-done:
			return code, stopped
		case s := <-sigs:
			stopped = stopped || slices.Contains(stopSignals, s)
			// With the terminal, the kernel has sent terminal signals to
			// the workload already. (Caught, not ignored: an ignored
			// disposition would pass to the workload through exec.)
			if tty && slices.Contains(terminalSignals, s) {
				continue
			}
			_ = unix.Kill(pid, s.(unix.Signal))
		}
	}
}
