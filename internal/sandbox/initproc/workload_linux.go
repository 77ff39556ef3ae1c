package initproc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"mcpbox/internal/landlock"
)

// workloadConfig is the command and the walls to put up around it.
type workloadConfig struct {
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	// Landlock lists the paths the workload may use and how.
	Landlock []pathRule `json:"landlock"`
	// Degradable layers: the init goes on without them, the host has
	// already reported the degradation.
	NoLandlock bool `json:"no_landlock,omitempty"`
	// Seccomp is the filter, assembled by the host while the init boots,
	// as packed sock_filter structs (base64 in JSON decodes far faster in
	// a cold process than an array of objects); empty only when the spec
	// accepted running without it.
	Seccomp []byte `json:"seccomp,omitempty"`
	// FileSize, if positive, is the workload's RLIMIT_FSIZE, soft and
	// hard: the largest file it may write (disksize_linux.go).
	FileSize int64 `json:"file_size,omitempty"`
	// Nproc, if positive, is the workload's RLIMIT_NPROC: its pids limit
	// when it has no cgroup to hold it.
	Nproc int64 `json:"nproc,omitempty"`
	// Cgroup says how the workload is started in the cgroup nested for
	// it, whose pids limit is the workload's alone (cgroupMoveThread,
	// cgroupClone; 0: it stays in the init's). CgroupFD, CgroupBackFD
	// and CgroupMaxFD name, 1-based, the received descriptors it uses:
	// for cgroupMoveThread the tasks files to move the forking thread
	// into the workload's cgroup and back, and its pids.max, which has
	// room for that thread until CgroupPids is written to it; for
	// cgroupClone the workload cgroup's directory. readInitConfig
	// replaces them by the descriptors themselves.
	Cgroup       int   `json:"cgroup,omitempty"`
	CgroupFD     int   `json:"cgroup_fd,omitempty"`
	CgroupBackFD int   `json:"cgroup_back_fd,omitempty"`
	CgroupMaxFD  int   `json:"cgroup_max_fd,omitempty"`
	CgroupPids   int64 `json:"cgroup_pids,omitempty"`
}

// How the init starts the workload in its nested cgroup
// (workloadConfig.Cgroup).
const (
	// cgroupMoveThread (cgroup v1): the forking thread moves itself alone
	// into the workload's pids cgroup, forks, moves back and sets the
	// workload's limit before the workload runs, so that only the
	// workload counts there, against its own limit (startWorkload). A
	// cold start's clone on amd64 sets the limit first and its child
	// moves itself in instead (startCold): no thread of the init enters.
	cgroupMoveThread = 1
	// cgroupClone (cgroup v2): a clone with CLONE_INTO_CGROUP.
	cgroupClone = 2
)

// workloadError says why the workload did not start.
type workloadError struct {
	Msg   string
	Layer Layer
	Code  int
}

// startWorkload puts up the walls it can on the calling OS thread —
// no_new_privs, Landlock, empty capability sets — and forks the workload
// from it into its own user namespace (fork_unsafe.go), where the child
// empties its capabilities again, sets its process limit and installs the
// seccomp filter before it executes the command. The init's other threads
// keep their capabilities; the workload never had them.
//
// Preconditions: the calling goroutine is locked to a thread of its own
// (startWalled), and the root is built. Afterwards the thread must end.
func startWorkload(c *workloadConfig, fs *forkSpec) (int, *workloadError) {
	fail := func(code int, layer Layer, err error) (int, *workloadError) {
		return 0, &workloadError{Msg: err.Error(), Layer: layer, Code: code}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail(exitSetup, "", fmt.Errorf("setting no_new_privs: %w", err))
	}
	if n := c.FileSize; n > 0 {
		// Process-wide, not per thread: the init writes no file from
		// here on, so it may share the limit. The hard limit keeps the
		// workload, which has no CAP_SYS_RESOURCE, from raising it.
		if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: uint64(n), Max: uint64(n)}); err != nil {
			return fail(exitSetup, "", fmt.Errorf("limiting file size to %d bytes: %w", n, err))
		}
	}
	if !c.NoLandlock {
		if _, err := landlock.Restrict(landlockPolicy(c.Landlock)); err != nil {
			return fail(exitSetup, LayerLandlock, fmt.Errorf("applying landlock: %w", err))
		}
	}
	if err := dropCapabilities(); err != nil {
		return fail(exitSetup, "", fmt.Errorf("dropping capabilities: %w", err))
	}
	if c.Cgroup == cgroupMoveThread {
		// The tasks files were opened by the host, whose credentials
		// the kernel checks; "0" is the writing thread, alone.
		if _, err := unix.Write(c.CgroupFD, []byte("0")); err != nil {
			return fail(exitSetup, LayerCgroups, fmt.Errorf("moving into the workload's cgroup: %w", err))
		}
	}
	pid, err := forkWorkload(fs)
	if c.Cgroup == cgroupMoveThread {
		// Back, and the limit set, before the workload runs (it waits
		// for its id maps): the workload's limit counts the workload
		// alone. A child that started is left waiting; the init gives up
		// and the pid namespace goes with it.
		if _, berr := unix.Write(c.CgroupBackFD, []byte("0")); berr != nil && err == nil {
			return fail(exitSetup, LayerCgroups, fmt.Errorf("moving out of the workload's cgroup: %w", berr))
		}
		if _, merr := unix.Write(c.CgroupMaxFD, []byte(strconv.FormatInt(c.CgroupPids, 10))); merr != nil && err == nil {
			return fail(exitSetup, LayerCgroups, fmt.Errorf("limiting the workload's processes: %w", merr))
		}
	}
	if err != nil {
		layer := LayerUserns
		if c.Cgroup == cgroupClone {
			layer = "" // the clone into the cgroup, or the namespace
		}
		return fail(exitSetup, layer, err)
	}
	return pid, nil
}

// forkFailure turns the forked child's report into the workload's error.
func forkFailure(c *workloadConfig, step uint32, errno unix.Errno) *workloadError {
	err := fmt.Errorf("%s: %w", stepNames[step], errno)
	switch step {
	case stepSeccomp:
		return &workloadError{Msg: err.Error(), Layer: LayerSeccomp, Code: exitSetup}
	case stepLandlock:
		return &workloadError{Msg: err.Error(), Layer: LayerLandlock, Code: exitSetup}
	case stepCgroup, stepCgroupNS:
		return &workloadError{Msg: err.Error(), Layer: LayerCgroups, Code: exitSetup}
	case stepChdir, stepExec:
		code := exitNoExec
		if errno == unix.ENOENT {
			code = exitNotFound
		}
		return &workloadError{Msg: fmt.Sprintf("executing %s: %v", c.Args[0], err), Code: code}
	}
	return &workloadError{Msg: err.Error(), Code: exitSetup}
}

// lookPath finds file in the PATH of the workload's environment; a
// relative path with a slash is relative to the working directory dir.
// (The child of an ahead fork tries the same candidates the same way:
// childLookup in fork_unsafe.go.)
func lookPath(file, dir string, env []string) (string, error) {
	cands, direct := lookCandidates(file, dir, env)
	if direct {
		if _, err := os.Stat(cands[0]); err != nil {
			return "", err
		}
		return cands[0], nil
	}
	for _, p := range cands {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", notInPath(file)
}

// lookCandidates returns the paths lookPath tries for file, in order,
// and whether file names its one path itself (it has a slash): then the
// error of its stat is the lookup's, else the first regular executable
// file is taken.
func lookCandidates(file, dir string, env []string) (cands []string, direct bool) {
	if strings.Contains(file, "/") {
		if !strings.HasPrefix(file, "/") {
			file = dir + "/" + file
		}
		return []string{file}, true
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range strings.Split(path, ":") {
		if dir != "" {
			cands = append(cands, dir+"/"+file)
		}
	}
	return cands, false
}

func notInPath(file string) error { return fmt.Errorf("%s: %w", file, exec.ErrNotFound) }

// commandError is the workload's error for a failed lookPath.
func commandError(err error) *workloadError {
	code := exitNotFound
	if !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, os.ErrNotExist) {
		code = exitNoExec
	}
	return &workloadError{Msg: err.Error(), Code: code}
}

// dropCapabilities empties the calling thread's bounding and ambient sets,
// then its effective, permitted and inheritable ones. Dropping the bounding
// set needs CAP_SETPCAP, which is why it goes first.
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

// lastCap reads the highest capability number the kernel knows, in raw
// system calls: os.ReadFile opens the file for the poller first (writeFile
// says what that costs).
func lastCap() (int, error) {
	const path = "/proc/sys/kernel/cap_last_cap"
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var b [16]byte
	n, err := unix.Read(fd, b[:])
	if err != nil {
		return 0, &os.PathError{Op: "read", Path: path, Err: err}
	}
	return strconv.Atoi(strings.TrimSpace(string(b[:n])))
}

func landlockPolicy(rules []pathRule) landlock.Policy {
	p := landlock.Policy{ScopeSignals: true, ScopeAbstractUnix: true}
	for _, r := range rules {
		if r.Optional {
			if _, err := os.Stat(r.Path); err != nil {
				continue
			}
		}
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

// packFilter and unpackFilter convert a BPF program to and from its
// struct sock_filter layout: u16 code, u8 jt, u8 jf, u32 k.
func packFilter(prog []bpf.RawInstruction) []byte {
	b := make([]byte, 0, 8*len(prog))
	for _, in := range prog {
		b = binary.NativeEndian.AppendUint16(b, in.Op)
		b = append(b, in.Jt, in.Jf)
		b = binary.NativeEndian.AppendUint32(b, in.K)
	}
	return b
}

func unpackFilter(b []byte) []bpf.RawInstruction {
	prog := make([]bpf.RawInstruction, 0, len(b)/8)
	for ; len(b) >= 8; b = b[8:] {
		prog = append(prog, bpf.RawInstruction{
			Op: binary.NativeEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.NativeEndian.Uint32(b[4:]),
		})
	}
	return prog
}
