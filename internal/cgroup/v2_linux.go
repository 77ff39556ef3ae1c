package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs2"
	"golang.org/x/sys/unix"
)

// v2Controllers are the controllers Create enables for sandboxes on v2.
// Tests pass other lists to exercise the enabling logic on hosts whose v2
// mount lacks these.
var v2Controllers = []string{"memory", "pids", "cpu"}

// v2 is a sandbox cgroup on the unified hierarchy.
type v2 struct {
	dir string
	mgr *fs2.Manager
	// With a workload cgroup (Limits.WorkloadPids), dir holds no process
	// and hands the pids controller to two children: initDir, where the
	// init goes (Add, DirFD), and wdir, the workload's. Both "" without.
	initDir, wdir string
}

// ownV2Cgroup returns this process's cgroup v2 path, relative to the mount.
func ownV2Cgroup() (string, error) {
	m, err := cgroups.ParseCgroupFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("reading own cgroup: %w", err)
	}
	p, ok := m[""]
	if !ok {
		return "", errors.New("reading own cgroup: no v2 entry in /proc/self/cgroup")
	}
	return p, nil
}

// v2Base returns the directory of mcpbox's own v2 cgroup under root; when
// mcpbox already moved itself into selfLeaf, the cgroup above that.
func v2Base(root string) (string, error) {
	own, err := ownV2Cgroup()
	if err != nil {
		return "", err
	}
	if filepath.Base(own) == selfLeaf {
		own = filepath.Dir(own)
	}
	return filepath.Join(root, own), nil
}

// createV2 creates <own cgroup>/mcpbox/<id> under root, enabling the
// controllers of want that are available.
func createV2(root, id string, l Limits, want []string) (backend, error) {
	base, err := v2Base(root)
	if err != nil {
		return nil, fmt.Errorf("creating cgroup for %s: %w", id, err)
	}
	avail, err := readList(base, "cgroup.controllers")
	if err != nil {
		return nil, fmt.Errorf("creating cgroup for %s: %w", id, err)
	}
	var enable []string
	for _, c := range want {
		switch {
		case slices.Contains(avail, c):
			enable = append(enable, c)
		case needs(l, c):
			return nil, fmt.Errorf("creating cgroup for %s: %s not in %s/cgroup.controllers (not enabled by its parent or not delegated): %w",
				id, c, base, ErrControllerMissing)
		}
	}
	if err := enableControllers(base, enable, true); err != nil {
		return nil, fmt.Errorf("creating cgroup for %s: %w", id, err)
	}
	parent := filepath.Join(base, parentName)
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("creating cgroup for %s: %w", id, err)
	}
	if err := enableControllers(parent, enable, false); err != nil {
		return nil, fmt.Errorf("creating cgroup for %s: %w", id, err)
	}
	dir := filepath.Join(parent, id)
	if err := mkdirCgroup(dir); err != nil {
		return nil, fmt.Errorf("creating cgroup for %s: %w", id, err)
	}
	b, err := setV2(dir, l)
	if err == nil && l.WorkloadPids > 0 {
		err = b.nest(l.WorkloadPids)
	}
	if err != nil {
		_ = cgroups.RemovePath(dir)
		return nil, fmt.Errorf("setting limits of %s: %w", id, err)
	}
	return b, nil
}

// nest makes the init's and the workload's cgroups in b.dir, the
// workload's with the pids limit pids. Preconditions: b.dir holds no
// process yet, and the pids controller is available in it.
func (b *v2) nest(pids int64) error {
	if err := writeSubtreeControl(b.dir, []string{"pids"}); err != nil {
		return err
	}
	initDir, wdir := filepath.Join(b.dir, initLeaf), filepath.Join(b.dir, workloadLeaf)
	for _, d := range []string{initDir, wdir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if err := cgroups.WriteFile(wdir, "pids.max", strconv.FormatInt(pids, 10)); err != nil {
		return err
	}
	b.initDir, b.wdir = initDir, wdir
	return nil
}

func setV2(dir string, l Limits) (*v2, error) {
	r := resources(l)
	if l.Memory > 0 {
		r.MemorySwap = l.Memory // memory.swap.max = 0; ignored without swap
	}
	mgr, err := fs2.NewManager(&cgroups.Cgroup{Resources: r}, dir)
	if err != nil {
		return nil, err
	}
	if err := mgr.Set(r); err != nil {
		return nil, err
	}
	return &v2{dir: dir, mgr: mgr}, nil
}

// enableControllers adds ctrls to dir's cgroup.subtree_control. In
// mcpbox's own cgroup (mayMoveSelf) the kernel refuses that with EBUSY
// while the cgroup holds processes; if mcpbox is the only one, it moves
// itself into the leaf selfLeaf and tries again.
func enableControllers(dir string, ctrls []string, mayMoveSelf bool) error {
	cur, err := readList(dir, "cgroup.subtree_control")
	if err != nil {
		return err
	}
	var missing []string
	for _, c := range ctrls {
		if !slices.Contains(cur, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	err = writeSubtreeControl(dir, missing)
	if err == nil || !errors.Is(err, unix.EBUSY) || !mayMoveSelf {
		return err
	}
	if err := moveSelfToLeaf(dir); err != nil {
		return err
	}
	return writeSubtreeControl(dir, missing)
}

func writeSubtreeControl(dir string, ctrls []string) error {
	val := "+" + strings.Join(ctrls, " +")
	if err := cgroups.WriteFile(dir, "cgroup.subtree_control", val); err != nil {
		return fmt.Errorf("enabling controllers in %s: %w", dir, err)
	}
	return nil
}

// moveSelfToLeaf moves this process from dir into dir/selfLeaf, unless
// dir holds other processes, which mcpbox must not move.
func moveSelfToLeaf(dir string) error {
	pids, err := cgroups.GetPids(dir)
	if err != nil {
		return fmt.Errorf("listing processes of %s: %w", dir, err)
	}
	self := os.Getpid()
	others := slices.DeleteFunc(slices.Clone(pids), func(p int) bool { return p == self })
	if len(others) > 0 {
		return fmt.Errorf("enabling controllers in %s: it holds %d processes besides mcpbox (%s): %w",
			dir, len(others), pidSample(others), ErrInternalProcesses)
	}
	leaf := filepath.Join(dir, selfLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating %s: %w", leaf, err)
	}
	if err := cgroups.WriteCgroupProc(leaf, self); err != nil {
		return fmt.Errorf("moving mcpbox to %s: %w", leaf, err)
	}
	return nil
}

// pidSample formats up to five pids for an error message.
func pidSample(pids []int) string {
	var b strings.Builder
	for i, p := range pids {
		if i == 5 {
			b.WriteString(" ...")
			break
		}
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprint(&b, p)
	}
	return b.String()
}

// readList reads a space-separated cgroup file such as cgroup.controllers.
func readList(dir, file string) ([]string, error) {
	s, err := cgroups.ReadFile(dir, file)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, file), err)
	}
	return strings.Fields(s), nil
}

func (b *v2) add(pid int) error {
	if b.initDir != "" {
		return cgroups.WriteCgroupProc(b.initDir, pid)
	}
	return b.mgr.AddPid("", pid)
}

func (b *v2) procs() ([]int, error) {
	pids, err := readPids(b.dir)
	slices.Sort(pids)
	return pids, err
}

// signalAll uses cgroup.kill (Linux 5.14+), which also catches processes
// forked while it runs.
func (b *v2) signalAll() error {
	err := cgroups.WriteFile(b.dir, "cgroup.kill", "1")
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return b.signalEach()
}

// signalEach kills pid by pid, frozen so nothing forks meanwhile (a v2
// frozen task still dies of SIGKILL).
func (b *v2) signalEach() error {
	if b.setFrozen(true) == nil {
		defer func() { _ = b.setFrozen(false) }()
	}
	pids, err := b.procs()
	if err != nil {
		return err
	}
	return killPids(pids, b.procs)
}

func (b *v2) setFrozen(frozen bool) error {
	if !cgroups.PathExists(filepath.Join(b.dir, "cgroup.freeze")) {
		return fmt.Errorf("no cgroup.freeze in %s (Linux 5.2+): %w", b.dir, ErrUnsupported)
	}
	state := cgroups.Thawed
	if frozen {
		state = cgroups.Frozen
	}
	return b.mgr.Freeze(state)
}

func (b *v2) stats() (Stats, error) {
	st, err := b.mgr.Stats(&cgroups.StatsOptions{Controllers: cgroups.Memory | cgroups.Pids | cgroups.CPU})
	if st == nil {
		return Stats{}, err
	}
	errs := []error{err}
	s := Stats{
		MemoryCurrent: st.MemoryStats.Usage.Usage,
		MemoryPeak:    st.MemoryStats.Usage.MaxUsage,
		OOMKills:      optional(fs2.OOMKillCount(b.dir)),
		CPUUsage:      time.Duration(st.CpuStats.CpuUsage.TotalUsage),
		CPUThrottled:  time.Duration(st.CpuStats.ThrottlingData.ThrottledTime),
	}
	if cgroups.PathExists(filepath.Join(b.dir, "pids.current")) {
		s.PidsCurrent, s.PidsPeak, _ = pidsStats(b.dir, &errs)
		s.PidsLimitHits = b.pidsLimitHits()
	} else {
		// Without the pids controller the library counts cgroup.procs:
		// processes, not threads.
		s.PidsCurrent = st.PidsStats.Current
	}
	return s, errors.Join(errs...)
}

func (b *v2) dirs() map[string]string { return map[string]string{"unified": b.dir} }

func (b *v2) nested() []string {
	if b.wdir == "" {
		return nil
	}
	return []string{b.initDir, b.wdir}
}

// pidsLimitHits: on kernels with pids.events.local, pids.events counts
// hierarchically, where the limit was hit and above (the sandbox's then
// has them all); before, in the cgroup of the task whose fork was
// refused (the init's and the workload's, the sandbox's holding none).
func (b *v2) pidsLimitHits() uint64 {
	return max(pidsHits(b.dir), pidsHits(b.initDir)+pidsHits(b.wdir))
}

func (b *v2) workload(uid int) (*WorkloadFiles, error) {
	if b.wdir == "" {
		return nil, errors.New("no workload cgroup")
	}
	if uid != -1 && uid != os.Geteuid() {
		// The clone checks write access to the target's cgroup.procs
		// and to the common ancestor's (the sandbox's, which holds no
		// process and takes none: it hands out a controller).
		for _, d := range []string{b.wdir, b.dir} {
			if err := os.Chown(filepath.Join(d, "cgroup.procs"), uid, -1); err != nil {
				return nil, err
			}
		}
	}
	d, err := os.OpenFile(b.wdir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &WorkloadFiles{Dir: d}, nil
}
