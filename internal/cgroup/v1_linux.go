package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"github.com/opencontainers/cgroups/fscommon"
	"golang.org/x/sys/unix"
)

// v1Controllers are the hierarchies a v1 sandbox joins: the three that
// limit, cpuacct for CPU usage and freezer for Freeze and a race-free Kill.
var v1Controllers = []string{"memory", "pids", "cpu", "cpuacct", "freezer"}

// v1 is a sandbox cgroup on cgroup v1: one directory per hierarchy.
type v1 struct {
	paths map[string]string // controller -> directory; mounted ones only
	// homes: controller -> the own cgroup, as ownCgroupFile names it, the
	// directory was made under; SpawnInside moves its thread back there.
	homes map[string]string
	// wdir is the pids hierarchy's cgroup nested for the workload
	// (Limits.WorkloadPids), or "". The other hierarchies have none: the
	// workload shares the sandbox's memory, cpu and freezer cgroups with
	// the init, as before.
	wdir  string
	wpids int64 // the workload's limit, WorkloadPids
}

// needs reports whether l needs controller ctrl.
func needs(l Limits, ctrl string) bool {
	switch ctrl {
	case "memory":
		return l.Memory > 0
	case "pids":
		return l.Pids > 0
	case "cpu":
		return l.CPU > 0
	}
	return false
}

// v1Parent returns <mount>/<own cgroup>/mcpbox for ctrl, and the own
// cgroup as ownCgroupFile names it.
func v1Parent(ctrl string) (parent, own string, err error) {
	m, err := cgroups.ParseCgroupFile(ownCgroupFile)
	if err != nil {
		return "", "", err
	}
	return v1ParentOf(m, ctrl)
}

// v1ParentOf is v1Parent with ownCgroupFile already parsed into m.
func v1ParentOf(m map[string]string, ctrl string) (parent, own string, err error) {
	path, own, err := ownV1(m, ctrl)
	if err != nil {
		return "", "", err
	}
	return filepath.Join(path, parentName), own, nil
}

// ownCgroupFile is where ownV1 reads the process's own v1 cgroups: the
// calling thread's, not /proc/self/cgroup. On v1 a thread can be elsewhere
// than its process, and /proc/self/cgroup shows the thread group leader's
// cgroups, which is where the spawn thread stands, inside a sandbox's
// cgroup, during a fork (SpawnInside) if the leader is that thread. Read
// then, it made a concurrent Create nest the new sandbox's cgroup in the
// other sandbox's (<sandbox>/mcpbox/<id>), whose SpawnInside then "moved
// back" into the other sandbox for good; that sandbox's Kill listed the
// process's pid and killed it. Every thread but the spawn thread is where
// the process is, and the spawn thread is back home whenever SpawnInside
// reads it (it moves back before returning, or panics).
var ownCgroupFile = "/proc/thread-self/cgroup"

// ownV1 is cgroups.GetOwnCgroupPath(ctrl) from m, ownCgroupFile parsed:
// <mount of ctrl>/<own cgroup for ctrl, relative to the mount's root>;
// and the own cgroup as the file names it.
func ownV1(m map[string]string, ctrl string) (path, own string, err error) {
	own, ok := m[ctrl]
	if !ok {
		return "", "", cgroups.NewNotFoundError(ctrl)
	}
	mnt, root, err := cgroups.FindCgroupMountpointAndRoot("", ctrl)
	if err != nil {
		return "", "", err
	}
	rel, err := filepath.Rel(root, own)
	if err != nil {
		return "", "", err
	}
	return filepath.Join(mnt, rel), own, nil
}

func createV1(id string, l Limits) (backend, error) {
	b := &v1{paths: make(map[string]string), homes: make(map[string]string)}
	// Read once for all hierarchies: one look at where this thread is.
	own, ownErr := cgroups.ParseCgroupFile(ownCgroupFile)
	for _, ctrl := range v1Controllers {
		parent, home, err := "", "", ownErr
		if ownErr == nil {
			parent, home, err = v1ParentOf(own, ctrl)
		}
		if err != nil {
			if needs(l, ctrl) {
				return nil, fmt.Errorf("creating cgroup for %s: v1 controller %s: %w: %w", id, ctrl, ErrControllerMissing, err)
			}
			continue
		}
		b.paths[ctrl] = filepath.Join(parent, id)
		b.homes[ctrl] = home
	}
	if len(b.paths) == 0 {
		return nil, fmt.Errorf("creating cgroup for %s: no usable v1 hierarchy: %w", id, ErrUnsupported)
	}

	var made []string
	undo := func() {
		for _, dir := range made {
			_ = cgroups.RemovePath(dir)
		}
	}
	for _, ctrl := range v1Controllers {
		dir, ok := b.paths[ctrl]
		if !ok || slices.Contains(made, dir) { // co-mounted, e.g. cpu,cpuacct
			continue
		}
		if err := mkdirCgroup(dir); err != nil {
			undo()
			return nil, fmt.Errorf("creating cgroup for %s: %w", id, err)
		}
		made = append(made, dir)
	}
	if err := b.set(l); err != nil {
		undo()
		return nil, fmt.Errorf("setting limits of %s: %w", id, err)
	}
	if l.WorkloadPids > 0 {
		// The pids hierarchy is there: the Pids limit needs it.
		dir := filepath.Join(b.paths["pids"], workloadLeaf)
		if err := os.Mkdir(dir, 0o755); err != nil {
			undo()
			return nil, fmt.Errorf("creating cgroup for %s: %w", id, err)
		}
		b.wdir, b.wpids = dir, l.WorkloadPids
		p := l.WorkloadPids + 1 // and the forking thread (WorkloadFiles)
		if err := (&fs.PidsGroup{}).Set(dir, &cgroups.Resources{PidsLimit: &p}); err != nil {
			undo()
			return nil, fmt.Errorf("setting limits of %s: %w", id, err)
		}
	}
	return b, nil
}

// mkdirCgroup creates dir (failing with ErrExists if it is there) and its
// missing parents.
func mkdirCgroup(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(dir), err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("creating %s: %w", dir, ErrExists)
		}
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	return nil
}

func (b *v1) set(l Limits) error {
	r := resources(l)
	if p, ok := b.paths["memory"]; ok && l.Memory > 0 {
		// memsw exists only with swap accounting; without it swap is
		// unlimited and there is nothing to set.
		if cgroups.PathExists(filepath.Join(p, "memory.memsw.limit_in_bytes")) {
			r.MemorySwap = l.Memory
		}
		if err := (&fs.MemoryGroup{}).Set(p, r); err != nil {
			return err
		}
	}
	if p, ok := b.paths["pids"]; ok && l.Pids > 0 {
		if err := (&fs.PidsGroup{}).Set(p, r); err != nil {
			return err
		}
	}
	if p, ok := b.paths["cpu"]; ok && l.CPU > 0 {
		if err := (&fs.CpuGroup{}).Set(p, r); err != nil {
			return err
		}
	}
	return nil
}

func (b *v1) add(pid int) error {
	for _, ctrl := range v1Controllers {
		if dir, ok := b.paths[ctrl]; ok {
			if err := cgroups.WriteCgroupProc(dir, pid); err != nil {
				return err
			}
		}
	}
	return nil
}

// procs is the union over all hierarchies: a process that left one of
// them (only root can do that) still counts.
func (b *v1) procs() ([]int, error) {
	var all []int
	for _, dir := range b.paths {
		pids, err := readPids(dir)
		if err != nil {
			return nil, err
		}
		for _, p := range pids {
			if !slices.Contains(all, p) {
				all = append(all, p)
			}
		}
	}
	slices.Sort(all)
	return all, nil
}

// signalAll freezes the cgroup first, when it can, so no process forks
// between listing and killing; frozen processes die once thawed.
func (b *v1) signalAll() error {
	if dir, ok := b.paths["freezer"]; ok {
		// A cgroup that won't freeze (the library gives up after a
		// while) is still killed, just not race-free.
		if err := setV1Freezer(dir, true); err == nil {
			defer func() { _ = setV1Freezer(dir, false) }()
		}
	}
	pids, err := b.procs()
	if err != nil {
		return err
	}
	return killPids(pids, b.procs)
}

func (b *v1) setFrozen(frozen bool) error {
	dir, ok := b.paths["freezer"]
	if !ok {
		return fmt.Errorf("v1 freezer not mounted: %w", ErrUnsupported)
	}
	return setV1Freezer(dir, frozen)
}

func setV1Freezer(dir string, frozen bool) error {
	state := cgroups.Thawed
	if frozen {
		state = cgroups.Frozen
	}
	// The v1 freezer can stay in FREEZING while its processes are busy
	// (runc's loop gives up after 1000 tries: "unable to freeze"); on a
	// loaded host a later round, after a thaw and a pause, usually
	// takes. Five rounds, pausing 50 ms and then twice as long each time
	// (1.5 s in all), bound it: three rounds of 50 ms failed on a 2-core
	// host running two test suites.
	var err error
	pause := 50 * time.Millisecond
	for round := 0; round < 5; round++ {
		if err = (&fs.FreezerGroup{}).Set(dir, &cgroups.Resources{Freezer: state}); err == nil || !frozen {
			return err
		}
		_ = (&fs.FreezerGroup{}).Set(dir, &cgroups.Resources{Freezer: cgroups.Thawed})
		time.Sleep(pause)
		pause *= 2
	}
	return err
}

func (b *v1) stats() (Stats, error) {
	var s Stats
	var errs []error
	st := cgroups.NewStats()
	if p, ok := b.paths["memory"]; ok {
		errs = append(errs, (&fs.MemoryGroup{}).GetStats(p, st))
		s.MemoryCurrent = st.MemoryStats.Usage.Usage
		s.MemoryPeak = st.MemoryStats.Usage.MaxUsage
		s.OOMKills = optional(fs.OOMKillCount(p))
	}
	if p, ok := b.paths["pids"]; ok {
		s.PidsCurrent, s.PidsPeak, _ = pidsStats(p, &errs)
		s.PidsLimitHits = b.pidsLimitHits()
	}
	if p, ok := b.paths["cpu"]; ok {
		errs = append(errs, (&fs.CpuGroup{}).GetStats(p, st))
		s.CPUThrottled = time.Duration(st.CpuStats.ThrottlingData.ThrottledTime)
	}
	if p, ok := b.paths["cpuacct"]; ok {
		errs = append(errs, (&fs.CpuacctGroup{}).GetStats(p, st))
		s.CPUUsage = time.Duration(st.CpuStats.CpuUsage.TotalUsage)
	}
	return s, errors.Join(errs...)
}

// pidsStats reads the pids files both versions share, appending hard
// errors to errs.
func pidsStats(dir string, errs *[]error) (current, peak, hits uint64) {
	current, err := fscommon.GetCgroupParamUint(dir, "pids.current")
	*errs = append(*errs, err)
	peak = optional(fscommon.GetCgroupParamUint(dir, "pids.peak"))
	hits = optional(fscommon.GetValueByKey(dir, "pids.events", "max"))
	return current, peak, hits
}

// optional drops the error of a read whose file may not exist on older
// kernels; 0 then means unknown.
func optional(v uint64, err error) uint64 {
	if err != nil {
		return 0
	}
	return v
}

func (b *v1) dirs() map[string]string { return b.paths }

func (b *v1) nested() []string {
	if b.wdir == "" {
		return nil
	}
	return []string{b.wdir}
}

// pidsLimitHits adds the sandbox's and the workload's: a v1 pids cgroup
// counts the forks refused to its own tasks, whichever limit refused them.
func (b *v1) pidsLimitHits() uint64 {
	return pidsHits(b.paths["pids"]) + pidsHits(b.wdir)
}

func (b *v1) workload(uid int) (*WorkloadFiles, error) {
	if b.wdir == "" {
		return nil, errors.New("no workload cgroup")
	}
	w := &WorkloadFiles{Pids: b.wpids}
	for _, f := range []struct {
		f    **os.File
		path string
	}{
		{&w.Into, filepath.Join(b.wdir, "tasks")},
		{&w.Back, filepath.Join(b.paths["pids"], "tasks")},
		{&w.Max, filepath.Join(b.wdir, "pids.max")},
	} {
		var err error
		if *f.f, err = os.OpenFile(f.path, os.O_WRONLY|unix.O_CLOEXEC, 0); err != nil {
			w.Close()
			return nil, err
		}
	}
	return w, nil
}
