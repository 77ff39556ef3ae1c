package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Hidden first arguments that turn the binary into the sandbox init or the
// workload's stage 2. They are not part of the CLI.
const (
	initArg   = "__mcpbox_init__"
	stage2Arg = "__mcpbox_stage2__"
)

// Exit codes of the sandbox itself, chosen like docker's and env(1)'s.
const (
	exitSetup    = 125 // the sandbox could not be set up
	exitNoExec   = 126 // the command was found but could not run
	exitNotFound = 127 // the command was not found
)

// controlFD is the init's end of the control socket, stage2FD the stage 2's
// config pipe: both are the first ExtraFiles entry.
const (
	controlFD = 3
	stage2FD  = 3
)

// initConfig is what the host sends the init over the control socket.
type initConfig struct {
	Hostname     string       `json:"hostname"`
	TmpSize      int64        `json:"tmp_size"`
	ExecWritable bool         `json:"exec_writable,omitempty"`
	Binds        []bindSpec   `json:"binds,omitempty"`
	Stage2       stage2Config `json:"stage2"`
}

// initReport is what the init sends back: an error during setup, or nil
// once the workload runs.
type initReport struct {
	Started bool   `json:"started,omitempty"`
	Error   string `json:"error,omitempty"`
	Layer   Layer  `json:"layer,omitempty"`
	Code    int    `json:"code,omitempty"` // the exit code the sandbox ends with
}

// Main runs the sandbox init or stage 2 when the process was started as
// one, and returns otherwise. The program's main (and TestMain of tests that
// start sandboxes) must call it before anything else.
func Main() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case initArg:
		os.Exit(runInit())
	case stage2Arg:
		os.Exit(runStage2())
	}
}

// runInit is pid 1 of the sandbox. It builds the root, starts stage 2, then
// reaps every process until the workload exits and returns its status; the
// kernel kills whatever is left in the pid namespace when pid 1 exits.
func runInit() int {
	runtime.LockOSThread() // namespace changes below are per thread
	ctl := os.NewFile(controlFD, "control")
	cfg, fds, err := readInitConfig(ctl)
	if err != nil {
		return reportSetup(ctl, "", fmt.Errorf("reading sandbox config: %w", err))
	}
	// The host moved us into the sandbox cgroup before sending the config,
	// so the new cgroup namespace is rooted there.
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return reportSetup(ctl, "", fmt.Errorf("creating cgroup namespace: %w", err))
	}
	// Nothing we mount may propagate back to the host. Our own /proc comes
	// first: os/exec writes the stage 2's uid_map by the pid it sees, which
	// is a pid of our pid namespace.
	if err := mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return reportSetup(ctl, "", err)
	}
	if err := mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return reportSetup(ctl, "", err)
	}
	stage2, err := spawnStage2()
	if err != nil {
		return reportSetup(ctl, "", fmt.Errorf("starting stage 2: %w", err))
	}
	// A dynamically linked binary (go test -race builds one) still loads
	// its libraries after execve returns: pivoting before stage 2 is up
	// would pull them away.
	if err := stage2.waitAlive(); err != nil {
		return reportSetup(ctl, "", fmt.Errorf("starting stage 2: %w", err))
	}
	// The workload shares our kernel uid; non-dumpable keeps it from
	// ptracing us or reading /proc/1/{environ,mem,exe}.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return reportSetup(ctl, "", fmt.Errorf("setting init non-dumpable: %w", err))
	}
	if err := buildRoot(cfg, fds); err != nil {
		return reportSetup(ctl, "", fmt.Errorf("building root filesystem: %w", err))
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return reportSetup(ctl, "", fmt.Errorf("setting hostname: %w", err))
	}
	if err := loopbackUp(); err != nil {
		return reportSetup(ctl, "", fmt.Errorf("bringing up loopback: %w", err))
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)
	if serr := stage2.run(&cfg.Stage2); serr != nil {
		_ = json.NewEncoder(ctl).Encode(initReport{Error: serr.Msg, Layer: serr.Layer, Code: serr.Code})
		return serr.Code
	}
	_ = json.NewEncoder(ctl).Encode(initReport{Started: true})
	ctl.Close()
	return reap(stage2.cmd, sigs)
}

func readInitConfig(ctl *os.File) (*initConfig, []int, error) {
	buf := make([]byte, 1<<20)
	oob := make([]byte, unix.CmsgSpace(4*64))
	n, oobn, _, _, err := unix.Recvmsg(int(ctl.Fd()), buf, oob, 0)
	if err != nil {
		return nil, nil, err
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
	var cfg initConfig
	if err := json.Unmarshal(buf[:n], &cfg); err != nil {
		return nil, nil, err
	}
	return &cfg, fds, nil
}

func reportSetup(ctl *os.File, layer Layer, err error) int {
	_ = json.NewEncoder(ctl).Encode(initReport{Error: err.Error(), Layer: layer, Code: exitSetup})
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

// stage2Proc is a started stage 2 waiting for its config.
type stage2Proc struct {
	cmd  *exec.Cmd
	cfgW *os.File // config pipe, our end
	errR *os.File // error pipe, our end: EOF means the execve succeeded
}

// spawnStage2 re-executes the binary into a nested user namespace where
// uid 1000 maps to our uid 0: the workload then owns nothing of the mount
// or network namespaces we hold caps over. CAP_SETPCAP survives the exec as
// an ambient cap, only so stage 2 can empty its bounding set.
//
// It is spawned before the root is built, while the host's binary is still
// reachable, and so that its start overlaps our mount work; pivot_root
// moves its root and working directory along with ours.
func spawnStage2() (*stage2Proc, error) {
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer cfgR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		cfgW.Close()
		return nil, err
	}
	defer errW.Close()
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{"mcpbox-sandbox", stage2Arg},
		Env:        []string{},
		Stdin:      os.Stdin,
		Stdout:     os.Stdout,
		Stderr:     os.Stderr,
		ExtraFiles: []*os.File{cfgR, errW},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  unix.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: sandboxUID, HostID: 0, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: sandboxUID, HostID: 0, Size: 1}},
			AmbientCaps: []uintptr{unix.CAP_SETPCAP},
			Pdeathsig:   unix.SIGKILL,
		},
	}
	if err := cmd.Start(); err != nil {
		cfgW.Close()
		errR.Close()
		return nil, err
	}
	return &stage2Proc{cmd: cmd, cfgW: cfgW, errR: errR}, nil
}

// waitAlive waits for stage 2's first byte, written once its runtime is up.
func (p *stage2Proc) waitAlive() error {
	var b [1]byte
	if _, err := io.ReadFull(p.errR, b[:]); err != nil {
		return fmt.Errorf("stage 2 died before starting: %w", err)
	}
	return nil
}

// run sends stage 2 its config and returns once the workload's execve
// succeeded, or with stage 2's error.
func (p *stage2Proc) run(c *stage2Config) *stage2Error {
	defer p.errR.Close()
	err := json.NewEncoder(p.cfgW).Encode(c)
	p.cfgW.Close()
	if err != nil {
		return &stage2Error{Msg: "sending workload config: " + err.Error(), Code: exitSetup}
	}
	var se stage2Error
	if err := json.NewDecoder(p.errR).Decode(&se); err == nil {
		_ = p.cmd.Wait()
		return &se
	}
	return nil
}

// reap forwards signals to the workload and reaps every child (pid 1 adopts
// orphans) until the workload itself exits; its status becomes ours, with
// 128+signal for a killed workload.
func reap(child *exec.Cmd, sigs chan os.Signal) int {
	pid := child.Process.Pid
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
			return code
		case s := <-sigs:
			_ = unix.Kill(pid, s.(unix.Signal))
		}
	}
}
