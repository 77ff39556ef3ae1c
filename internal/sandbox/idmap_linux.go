package sandbox

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"mcpbox/internal/seccomp"
)

// initConfig compiles the Spec into what the init needs. As host root it
// also prepares an idmapped, detached clone of every user mount (returned
// as fds, to be sent along): the sandbox's uid maps to an unprivileged host
// uid, and the idmapping makes files it writes land owned by the invoking
// user (root) while root's files look like the sandbox's own.
func (sb *Sandbox) initConfig() (*initConfig, []int, error) {
	s := &sb.spec
	tmp := s.Limits.TmpSize
	if tmp == 0 {
		tmp = DefaultTmpSize
	}
	var system []string
	for _, p := range systemBinds {
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			system = append(system, p)
		}
	}
	cfg := &initConfig{
		Hostname:     "mcpbox",
		TTY:          sb.ttyFD >= 0,
		TmpSize:      tmp,
		ExecWritable: s.ExecWritable || underAny(s.ExecAllow, "/tmp"),
		Workload: workloadConfig{
			Args:       s.Args,
			Env:        s.environ(),
			Dir:        s.workdir(),
			Landlock:   s.landlockRules(system),
			NoLandlock: hasLayer(sb.Degraded, LayerLandlock),
		},
	}
	if !hasLayer(sb.Degraded, LayerSeccomp) {
		prog, err := seccomp.Program(seccomp.Options{})
		if err != nil {
			return nil, nil, &StartError{Layer: LayerSeccomp, Code: exitSetup, Err: fmt.Errorf("assembling seccomp filter: %w", err)}
		}
		cfg.Workload.Seccomp = packFilter(prog)
	}
	var fds []int
	var idmap *idmapUserns
	defer func() { idmap.close() }()
	for _, m := range s.allBinds() {
		src, err := openNoSymlinks(m.Source)
		if err != nil {
			return nil, fds, &StartError{Code: exitSetup, Err: fmt.Errorf(
				"mount source %s (must exist and contain no symlinks): %w", m.Source, err)}
		}
		b, err := vetSource(src, m, s)
		if err == nil && sb.root {
			err = sb.idmapSource(src, &b, &idmap, &fds)
		}
		unix.Close(src)
		if err != nil {
			return nil, fds, err
		}
		cfg.Binds = append(cfg.Binds, b)
	}
	return cfg, fds, nil
}

// vetSource describes the bind of the opened source src: the init binds
// that very file (dev and inode) or nothing.
func vetSource(src int, m Mount, s *Spec) (bindSpec, error) {
	var st unix.Stat_t
	if err := unix.Fstat(src, &st); err != nil {
		return bindSpec{}, &StartError{Code: exitSetup, Err: fmt.Errorf("mount source %s: %w", m.Source, err)}
	}
	return bindSpec{
		Source: m.Source, Target: m.Target, Writable: m.Writable,
		Exec: m.Exec || underAny(s.ExecAllow, m.Target), File: st.Mode&unix.S_IFMT != unix.S_IFDIR,
		Dev: st.Dev, Ino: st.Ino,
	}, nil
}

// idmapSource makes an idmapped clone of src for b (host-root mode), or
// records the degradation when the filesystem cannot and the spec allows.
func (sb *Sandbox) idmapSource(src int, b *bindSpec, idmap **idmapUserns, fds *[]int) error {
	if *idmap == nil {
		u, err := newIdmapUserns(sb.hostUID)
		if err != nil {
			return &StartError{Layer: LayerIdmap, Code: exitSetup, Err: err}
		}
		*idmap = u
	}
	fd, err := idmappedClone(src, b.Source, (*idmap).fd)
	if err != nil {
		if !sb.spec.degradable(LayerIdmap) {
			return &StartError{Layer: LayerIdmap, Code: exitSetup, Err: err}
		}
		sb.Degraded = appendOnce(sb.Degraded, LayerIdmap)
		return nil
	}
	*fds = append(*fds, fd)
	b.IdmapFD = len(*fds)
	return nil
}

// idmapUserns pins a user namespace that maps the host's uid and gid 0
// to the sandbox's host ids, for idmapped mounts: through it, files the
// sandbox writes land owned by root (the invoking user), and root's files
// appear as the sandbox user's. A process must hold the namespace while the
// mounts are made; a re-executed mcpbox that waits on stdin does.
type idmapUserns struct {
	cmd   *exec.Cmd
	stdin io.Closer
	fd    int
}

func newIdmapUserns(hostID int) (*idmapUserns, error) {
	cmd := &exec.Cmd{
		Path: "/proc/self/exe",
		Args: []string{"mcpbox-idmap", holdArg},
		Env:  []string{},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  unix.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: hostID, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: hostID, Size: 1}},
			Pdeathsig:   unix.SIGKILL,
		},
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("creating the idmap user namespace: %w", err)
	}
	u := &idmapUserns{cmd: cmd, stdin: stdin, fd: -1}
	u.fd, err = unix.Open("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		u.close()
		return nil, fmt.Errorf("opening the idmap user namespace: %w", err)
	}
	return u, nil
}

func (u *idmapUserns) close() {
	if u == nil {
		return
	}
	if u.fd >= 0 {
		unix.Close(u.fd)
	}
	u.stdin.Close()
	_ = u.cmd.Process.Kill()
	_ = u.cmd.Wait()
}

// idmappedClone returns a detached copy of the mount tree at path, idmapped
// through the user namespace usernsFD (Linux 5.12; the filesystem must
// support idmapped mounts: ext4, xfs, btrfs, tmpfs since 6.3, ...).
func idmappedClone(src int, path string, usernsFD int) (int, error) {
	fd, err := unix.OpenTree(src, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
	if err != nil {
		return -1, fmt.Errorf("cloning mount of %s: %w", path, err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(usernsFD)}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("idmapping mount of %s (does its filesystem support idmapped mounts?): %w", path, err)
	}
	return fd, nil
}

// underAny reports whether any of paths lies at or beneath dir.
func underAny(paths []string, dir string) bool {
	for _, p := range paths {
		if p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/") {
			return true
		}
	}
	return false
}

func appendOnce(ls []Layer, l Layer) []Layer {
	if hasLayer(ls, l) {
		return ls
	}
	return append(ls, l)
}
