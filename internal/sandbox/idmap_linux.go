package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// initConfig compiles the Spec into what the init needs. As host root it
// also prepares an idmapped, detached clone of every user mount (returned
// as fds, to be sent along): the sandbox's uid maps to an unprivileged host
// uid, and the idmapping makes files it writes land owned by the invoking
// user while host files owned by that user look like the sandbox's own.
func (sb *Sandbox) initConfig(host *hostInfo, degraded []Layer) (*initConfig, []int, error) {
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
		TmpSize:      tmp,
		ExecWritable: s.ExecWritable || underAny(s.ExecAllow, "/tmp"),
		Stage2: stage2Config{
			Args:       s.Args,
			Env:        s.environ(),
			Dir:        s.workdir(),
			Landlock:   s.landlockRules(system),
			NoLandlock: hasLayer(degraded, LayerLandlock),
			NoSeccomp:  hasLayer(degraded, LayerSeccomp),
		},
	}
	var fds []int
	var usernsFD = -1
	defer func() {
		if usernsFD >= 0 {
			unix.Close(usernsFD)
		}
	}()
	for _, m := range s.allBinds() {
		fi, err := os.Stat(m.Source)
		if err != nil {
			return nil, fds, &StartError{Code: exitSetup, Err: fmt.Errorf("mount source: %w", err)}
		}
		b := bindSpec{
			Source: m.Source, Target: m.Target, Writable: m.Writable,
			Exec: m.Exec || underAny(s.ExecAllow, m.Target), File: !fi.IsDir(),
		}
		if host.root {
			if usernsFD < 0 {
				usernsFD, err = unix.Open("/proc/"+strconv.Itoa(sb.cmd.Process.Pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
				if err != nil {
					return nil, fds, &StartError{Layer: LayerIdmap, Code: exitSetup, Err: fmt.Errorf("opening sandbox user namespace: %w", err)}
				}
			}
			fd, err := idmappedClone(m.Source, usernsFD)
			if err != nil {
				if !s.degradable(LayerIdmap) {
					return nil, fds, &StartError{Layer: LayerIdmap, Code: exitSetup, Err: err}
				}
				sb.Degraded = appendOnce(sb.Degraded, LayerIdmap)
			} else {
				fds = append(fds, fd)
				b.IdmapFD = len(fds)
			}
		}
		cfg.Binds = append(cfg.Binds, b)
	}
	return cfg, fds, nil
}

// idmappedClone returns a detached copy of the mount tree at path, idmapped
// through the user namespace usernsFD (Linux 5.12; the filesystem must
// support idmapped mounts: ext4, xfs, btrfs, tmpfs since 6.3, ...).
func idmappedClone(path string, usernsFD int) (int, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
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
