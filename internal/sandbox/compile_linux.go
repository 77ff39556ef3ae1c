package sandbox

import (
	"fmt"
	"mcpbox/internal/egress"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"mcpbox/internal/cgroup"
	"mcpbox/internal/seccomp"
)

// workloadFilter is the workload's seccomp filter, packed as the init
// takes it: the same for every sandbox, so assembled once per process
// (~0.1 ms of CPU a start otherwise). Its callers only read it; its
// capacity is its length, so an append copies.
var workloadFilter = sync.OnceValues(func() ([]byte, error) {
	prog, err := seccomp.Program(seccomp.Options{})
	if err != nil {
		return nil, err
	}
	b := packFilter(prog)
	return b[:len(b):len(b)], nil
})

// testHookWorkload, if non-nil, edits the workload's config before it is
// sent: tests take walls down to show that the others hold alone. Nil
// outside tests.
var testHookWorkload func(*workloadConfig)

// testHookWorkloadCgroup, if non-nil, opens the workload cgroup's files
// instead of the sandbox cgroup's Workload: tests take the init through
// the other cgroup version's way. Nil outside tests.
var testHookWorkloadCgroup func(uid int) (*cgroup.WorkloadFiles, error)

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
	if s.Root != "" {
		dirs, err := imageDirs(s.Root)
		if err != nil {
			return nil, nil, &StartError{Code: exitSetup, Err: err}
		}
		system = dirs
	}
	cfg := &initConfig{
		Hostname:     "mcpbox",
		TTY:          sb.ttyFD >= 0,
		TmpSize:      tmp,
		ExecWritable: s.ExecWritable || underAny(s.ExecAllow, "/tmp"),
		Egress:       s.Network.Enabled(),
		SecretFiles:  s.secretFiles(),
		InputMasks:   s.InputMasks(),
		Forwards:     forwardSpecs(s.Network.Forwards),
		Transparent:  s.Network.TransparentPorts(),
		Hold:         s.hold,
		Workload: workloadConfig{
			Args:       s.Args,
			Env:        s.environ(),
			Dir:        s.workdir(),
			Landlock:   s.landlockRules(system),
			NoLandlock: hasLayer(sb.Degraded, LayerLandlock),
			FileSize:   s.fileSizeLimit(),
		},
	}
	if s.Limits.Pids > 0 && sb.cgroup() == nil {
		// No cgroup to hold the pids limit: RLIMIT_NPROC holds it,
		// counted in the workload's own user namespace.
		cfg.Workload.Nproc = s.Limits.Pids
	}
	if !hasLayer(sb.Degraded, LayerSeccomp) {
		filter, err := workloadFilter()
		if err != nil {
			return nil, nil, &StartError{Layer: LayerSeccomp, Code: exitSetup, Err: fmt.Errorf("assembling seccomp filter: %w", err)}
		}
		cfg.Workload.Seccomp = filter
	}
	if testHookWorkload != nil {
		testHookWorkload(&cfg.Workload)
	}
	if err := s.checkOverlay(); err != nil {
		return nil, nil, &StartError{Layer: LayerOverlay, Code: exitSetup, Err: err}
	}
	var fds []int
	var idmap *idmapUserns
	defer func() { idmap.close() }()
	// The sandbox's own mounts (the egress proxy socket) are exempt from
	// the socket check.
	user := len(s.allBinds())
	guarded := sb.socketsGuarded()
	for i, m := range append(s.allBinds(), sb.extraBinds...) {
		b, err := sb.vetBind(m, i < user && !guarded, &idmap, &fds)
		b.Cover = i >= user && sb.covers(m.Target)
		switch {
		case err != nil:
		case s.InputOverlay != nil && m.Target == InputDir:
			cfg.Overlay, err = sb.overlayConfig(b, &idmap, &fds)
		default:
			cfg.Binds = append(cfg.Binds, b)
		}
		if err != nil {
			return nil, fds, err
		}
	}
	if err := planGit(cfg.Binds, os.Getenv("HOME")); err != nil {
		return nil, fds, &StartError{Code: exitSetup, Err: err}
	}
	if s.Root != "" {
		b, err := sb.vetBind(Mount{Source: s.Root, Target: "/", Exec: true}, !guarded, &idmap, &fds)
		if err != nil {
			return nil, fds, err
		}
		if !b.File {
			cfg.Root = &b
		} else {
			return nil, fds, &StartError{Code: exitSetup, Err: fmt.Errorf("root %s is not a directory", s.Root)}
		}
	}
	if err := sb.workloadCgroup(&cfg.Workload, &fds); err != nil {
		return nil, fds, err
	}
	return cfg, fds, nil
}

// workloadCgroup tells the init how to start the workload in the cgroup
// nested for it (cgroup.Limits.WorkloadPids), with the files it needs
// added to fds: without it the workload's forks could take the pids the
// init keeps for its threads (initTasks).
func (sb *Sandbox) workloadCgroup(w *workloadConfig, fds *[]int) error {
	cg := sb.cgroup()
	if cg == nil || sb.spec.Limits.Pids <= 0 {
		return nil
	}
	uid := -1
	if sb.root {
		uid = sb.hostUID
	}
	open := cg.Workload
	if testHookWorkloadCgroup != nil {
		open = testHookWorkloadCgroup
	}
	files, err := open(uid)
	if err != nil {
		return &StartError{Layer: LayerCgroups, Code: exitSetup, Err: err}
	}
	defer files.Close()
	// Copies, which the caller closes with the others once they are sent.
	add := func(f *os.File) (int, error) {
		fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return 0, &StartError{Layer: LayerCgroups, Code: exitSetup, Err: fmt.Errorf("passing the workload's cgroup: %w", err)}
		}
		*fds = append(*fds, fd)
		return len(*fds), nil // 1-based, as IdmapFD
	}
	if files.Dir != nil {
		w.Cgroup = cgroupClone
		w.CgroupFD, err = add(files.Dir)
		return err
	}
	w.Cgroup, w.CgroupPids = cgroupMoveThread, files.Pids
	if w.CgroupFD, err = add(files.Into); err != nil {
		return err
	}
	if w.CgroupBackFD, err = add(files.Back); err != nil {
		return err
	}
	w.CgroupMaxFD, err = add(files.Max)
	return err
}

// vetBind opens m's source and describes its bind; as host root it adds
// an idmapped clone of the source to fds. With noSockets it refuses a
// source that is or holds a unix socket (refuseSockets).
func (sb *Sandbox) vetBind(m Mount, noSockets bool, idmap **idmapUserns, fds *[]int) (bindSpec, error) {
	src, err := openNoSymlinks(m.Source)
	if err != nil {
		return bindSpec{}, &StartError{Code: exitSetup, Err: fmt.Errorf(
			"mount source %s (must exist and contain no symlinks): %w", m.Source, err)}
	}
	defer unix.Close(src)
	b, err := vetSource(src, m, &sb.spec)
	if err == nil && noSockets {
		var st unix.Stat_t
		if err = unix.Fstat(src, &st); err == nil {
			err = refuseSockets(src, m, &st)
		}
	}
	if err == nil && sb.root {
		err = sb.idmapSource(src, &b, idmap, fds)
	}
	return b, err
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
		Dev: st.Dev, Ino: st.Ino, KeepGit: m.KeepGit,
	}, nil
}

func forwardSpecs(fs []egress.Forward) []forwardSpec {
	var out []forwardSpec
	for _, f := range fs {
		out = append(out, forwardSpec{Listen: f.Listen, To: f.To})
	}
	return out
}
