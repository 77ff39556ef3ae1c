package sandbox

import (
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

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
	if err := onSpawnThread(cmd.Start); err != nil { // for Pdeathsig
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
