package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"mcpbox/internal/landlock"
	"mcpbox/internal/seccomp"
)

// stage2Config is what the init hands stage 2: the command and the walls
// to put up around it.
type stage2Config struct {
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	// Landlock lists the paths the workload may use and how.
	Landlock []pathRule `json:"landlock"`
	// Degradable layers: stage 2 goes on without them, the host has
	// already reported the degradation.
	NoLandlock bool `json:"no_landlock,omitempty"`
	NoSeccomp  bool `json:"no_seccomp,omitempty"`
}

// stage2Error is reported to the init over the error pipe (fd 4) when the
// workload cannot be started; a successful execve closes the pipe empty.
type stage2Error struct {
	Msg   string `json:"msg"`
	Layer Layer  `json:"layer,omitempty"`
	Code  int    `json:"code"`
}

const stage2ErrFD = 4

// runStage2 drops every capability, sets no_new_privs, applies Landlock and
// seccomp to this thread and execs the workload from it. Every step is per
// thread, so the OS thread is locked until execve replaces the process.
func runStage2() int {
	runtime.LockOSThread()
	errPipe := os.NewFile(stage2ErrFD, "stage2-errors")
	if _, err := errPipe.Write([]byte{'\n'}); err != nil { // alive; see waitAlive
		return exitSetup
	}
	syscall.CloseOnExec(stage2FD)
	syscall.CloseOnExec(stage2ErrFD)
	fail := func(code int, layer Layer, err error) int {
		_ = json.NewEncoder(errPipe).Encode(stage2Error{Msg: err.Error(), Layer: layer, Code: code})
		return code
	}
	var c stage2Config
	if err := json.NewDecoder(os.NewFile(stage2FD, "stage2-config")).Decode(&c); err != nil {
		return fail(exitSetup, "", fmt.Errorf("reading workload config: %w", err))
	}
	path, err := lookPath(c.Args[0], c.Env)
	if err != nil {
		code := exitNotFound
		if !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, os.ErrNotExist) {
			code = exitNoExec
		}
		return fail(code, "", err)
	}
	if err := os.Chdir(c.Dir); err != nil {
		return fail(exitSetup, "", fmt.Errorf("changing to working directory: %w", err))
	}
	if err := dropCapabilities(); err != nil {
		return fail(exitSetup, "", fmt.Errorf("dropping capabilities: %w", err))
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail(exitSetup, "", fmt.Errorf("setting no_new_privs: %w", err))
	}
	if !c.NoLandlock {
		if _, err := landlock.Restrict(landlockPolicy(c.Landlock)); err != nil {
			return fail(exitSetup, LayerLandlock, fmt.Errorf("applying landlock: %w", err))
		}
	}
	if !c.NoSeccomp {
		if err := installSeccomp(); err != nil {
			return fail(exitSetup, LayerSeccomp, fmt.Errorf("installing seccomp filter: %w", err))
		}
	}
	err = unix.Exec(path, c.Args, c.Env)
	code := exitNoExec
	if errors.Is(err, unix.ENOENT) {
		code = exitNotFound
	}
	return fail(code, "", fmt.Errorf("executing %s: %w", c.Args[0], err))
}

// lookPath finds file in the PATH of the workload's environment.
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		if _, err := os.Stat(file); err != nil {
			return "", err
		}
		return file, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			continue
		}
		p := dir + "/" + file
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", file, exec.ErrNotFound)
}

// dropCapabilities empties the bounding and ambient sets, then the
// effective, permitted and inheritable ones. Dropping the bounding set needs
// CAP_SETPCAP, which is why it goes first.
func dropCapabilities() error {
	last, err := lastCap()
	if err != nil {
		return err
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capset(&hdr, &data[0])
}

func lastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func landlockPolicy(rules []pathRule) landlock.Policy {
	p := landlock.Policy{ScopeSignals: true, ScopeAbstractUnix: true}
	for _, r := range rules {
		var a landlock.Access
		if r.Read {
			a |= landlock.Read
		}
		if r.Write {
			a |= landlock.Write
		}
		if r.Exec {
			a |= landlock.Exec
		}
		if r.Ioctl {
			a |= landlock.IoctlDev
		}
		p.Rules = append(p.Rules, landlock.Rule{Path: r.Path, Access: a})
	}
	return p
}

func installSeccomp() error {
	prog, err := seccomp.Program(seccomp.Options{})
	if err != nil {
		return err
	}
	return seccomp.Install(prog)
}
