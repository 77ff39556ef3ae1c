package cgroup

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"github.com/opencontainers/cgroups/fs2"
	"github.com/opencontainers/cgroups/fscommon"
	"golang.org/x/sys/unix"
)

const (
	// parentName is the directory under mcpbox's own cgroup that holds the
	// sandbox cgroups; CleanupStale looks nowhere else.
	parentName = "mcpbox"
	// selfLeaf is the v2 leaf mcpbox moves itself into so that its own
	// cgroup may enable controllers for parentName.
	selfLeaf = "mcpbox-self"
	// v2Root is where the unified hierarchy is mounted on a pure v2 host.
	v2Root = "/sys/fs/cgroup"
	// workloadLeaf is the cgroup nested in a sandbox's for its workload
	// (Limits.WorkloadPids): on v1 in the pids hierarchy only, on v2 next
	// to initLeaf, where the sandbox's init is (a v2 cgroup that hands
	// the pids controller to its children may hold no process itself).
	// Neither is a directory CleanupStale takes for a sandbox: those live
	// in parentName directories only.
	workloadLeaf = "workload"
	initLeaf     = "init"

	// killTimeout bounds Kill and the kill in Destroy.
	killTimeout = 5 * time.Second
	// killPoll is how often Kill checks for survivors.
	killPoll = 10 * time.Millisecond
)

// Cgroup is one sandbox's cgroup (one directory per v1 hierarchy, or one v2
// directory). Its methods are safe for concurrent use.
type Cgroup struct {
	id string
	b  backend

	// mu serializes the operations that change state (Add, Freeze, Thaw,
	// Kill, Destroy), since Kill freezes and thaws.
	mu sync.Mutex
}

// backend is one cgroup version's implementation.
type backend interface {
	add(pid int) error
	// procs lists the processes in the cgroup and its descendants; a
	// missing directory counts as empty.
	procs() ([]int, error)
	// signalAll kills everything in the cgroup, once.
	signalAll() error
	// setFrozen freezes or thaws; errors wrap ErrUnsupported without a
	// freezer.
	setFrozen(frozen bool) error
	stats() (Stats, error)
	dirs() map[string]string
	// nested lists the cgroups made inside those of dirs, which go first
	// when they are removed.
	nested() []string
	// pidsLimitHits counts the forks a pids limit refused in the cgroup,
	// nested ones included; 0 without the pids controller.
	pidsLimitHits() uint64
	// workload opens the files of WorkloadFiles.
	workload(uid int) (*WorkloadFiles, error)
}

// Create makes the cgroup for sandbox id under mcpbox's parent cgroup and
// applies l; see the package doc for where it goes. Call it before starting
// the sandbox's first process: on v2 it may need mcpbox to be alone in its
// own cgroup, and then moves mcpbox into a leaf. On error nothing is left
// behind but the parent directories and enabled v2 controllers.
func Create(id string, l Limits) (*Cgroup, error) {
	if err := validateID(id); err != nil {
		return nil, err
	}
	if err := l.validate(); err != nil {
		return nil, err
	}
	var b backend
	var err error
	switch version() {
	case "v2":
		b, err = createV2(v2Root, id, l, v2Controllers)
	case "v1", "hybrid":
		b, err = createV1(id, l)
	default:
		return nil, fmt.Errorf("creating cgroup for %s: no cgroup file system mounted: %w", id, ErrUnsupported)
	}
	if err != nil {
		return nil, err
	}
	return &Cgroup{id: id, b: b}, nil
}

// version tells how cgroups are mounted: "v2", "v1", "hybrid" or "".
// Asked once per process: the library reads the mount table once too,
// and each answer cost a parse of /proc/self/cgroup (every Create).
var version = sync.OnceValue(mountedVersion)

func mountedVersion() string {
	if cgroups.IsCgroup2UnifiedMode() {
		return "v2"
	}
	mounts, err := cgroups.GetCgroupMounts(false)
	if err != nil || len(mounts) == 0 {
		return ""
	}
	if cgroups.IsCgroup2HybridMode() {
		return "hybrid"
	}
	return "v1"
}

// ID returns the sandbox id the cgroup was created for.
func (c *Cgroup) ID() string { return c.id }

// Add moves process pid (with all its threads) into the cgroup (on v2
// with a workload cgroup, into the init's beside it). Children it forks
// afterwards are born inside. Add the sandbox init before it starts the
// payload.
func (c *Cgroup) Add(pid int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.b.add(pid); err != nil {
		return fmt.Errorf("adding pid %d to cgroup of %s: %w", pid, c.id, err)
	}
	return nil
}

// Pids lists the processes in the cgroup.
func (c *Cgroup) Pids() ([]int, error) {
	pids, err := c.b.procs()
	if err != nil {
		return nil, fmt.Errorf("listing processes of cgroup %s: %w", c.id, err)
	}
	return pids, nil
}

// Kill sends SIGKILL to every process in the cgroup and waits, at most
// killTimeout, until none is left. Zombies don't count: they leave the
// cgroup when they exit, before their parent reaps them.
func (c *Cgroup) Kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kill(time.Now().Add(killTimeout))
}

// Preconditions: c.mu is held.
func (c *Cgroup) kill(deadline time.Time) error {
	for {
		pids, err := c.b.procs()
		if err != nil {
			return fmt.Errorf("killing cgroup %s: %w", c.id, err)
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("killing cgroup %s: %d processes left after %v (%s)", c.id, len(pids), killTimeout, pidSample(pids))
		}
		if err := c.b.signalAll(); err != nil {
			return fmt.Errorf("killing cgroup %s: %w", c.id, err)
		}
		time.Sleep(killPoll)
	}
}

// Freeze stops every process in the cgroup until Thaw (v1 freezer, v2
// cgroup.freeze). The error wraps ErrUnsupported without a freezer.
func (c *Cgroup) Freeze() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.b.setFrozen(true); err != nil {
		return fmt.Errorf("freezing cgroup %s: %w", c.id, err)
	}
	return nil
}

// Thaw resumes the processes Freeze stopped.
func (c *Cgroup) Thaw() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.b.setFrozen(false); err != nil {
		return fmt.Errorf("thawing cgroup %s: %w", c.id, err)
	}
	return nil
}

// Stats returns the cgroup's accounting; see Stats for what is 0 when.
func (c *Cgroup) Stats() (Stats, error) {
	st, err := c.b.stats()
	if err != nil {
		return st, fmt.Errorf("reading stats of cgroup %s: %w", c.id, err)
	}
	return st, nil
}

// Destroy kills every process (bounded by killTimeout) and removes the
// cgroup directories. It may be called again, also after an error.
//
// It tries the rmdirs first: the kernel refuses (EBUSY) to remove a
// cgroup that still holds a process, here or below (a zombie has left
// it already), so an empty one, the usual case once its sandbox has
// exited, goes without the listing and killing of every directory,
// some fifty system calls on v1. Only what is left is killed and
// removed then.
func (c *Cgroup) Destroy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	left := false
	for _, dir := range c.b.nested() {
		if err := unix.Rmdir(dir); err != nil && err != unix.ENOENT {
			left = true
		}
	}
	for _, dir := range c.b.dirs() {
		if err := unix.Rmdir(dir); err != nil && err != unix.ENOENT {
			left = true
		}
	}
	if !left {
		return nil
	}
	killErr := c.kill(time.Now().Add(killTimeout))
	var errs []error
	if killErr != nil {
		errs = append(errs, killErr)
	}
	for _, dir := range c.b.dirs() {
		// RemovePath removes the nested cgroups first.
		if err := cgroups.RemovePath(dir); err != nil {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// Paths returns the cgroup's directories: on v1 keyed by controller
// (memory, pids, cpu, cpuacct, freezer; only the mounted ones), on v2 the
// single key "unified".
func (c *Cgroup) Paths() map[string]string {
	m := make(map[string]string)
	for k, v := range c.b.dirs() {
		m[k] = v
	}
	return m
}

// readPids reads the processes of dir and its descendants; a missing dir
// has none.
func readPids(dir string) ([]int, error) {
	pids, err := cgroups.GetAllPids(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return pids, err
}

// resources converts l for the library; MemorySwap is left to the caller
// since v1 can set it only with swap accounting.
func resources(l Limits) *cgroups.Resources {
	r := &cgroups.Resources{}
	if l.Memory > 0 {
		r.Memory = l.Memory
	}
	if l.Pids > 0 {
		p := l.Pids
		r.PidsLimit = &p
	}
	if l.CPU > 0 {
		r.CpuQuota = l.cpuQuota()
		r.CpuPeriod = cpuPeriod
	}
	return r
}

// killPids sends SIGKILL to each of pids, which list listed just before,
// that is still in the cgroup; one that is already gone is fine. A pid
// whose process exited and was reaped since (a thawed task dies at once)
// may have been given to a process elsewhere, so each pid is opened as a
// pidfd first and signalled only if list, run after the opens, still
// names it: then the pidfd is that member, or a process that has died
// since and takes no signal. This process is never signalled.
func killPids(pids []int, list func() ([]int, error)) error {
	fds := make(map[int]int, len(pids))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	self := os.Getpid()
	for _, pid := range pids {
		if pid == self {
			// On v1 a cgroup lists the process of every thread in it: a
			// thread of ours in a sandbox's cgroup (SpawnInside's, had it
			// not come back) must not make the sandbox's kill ours.
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if errors.Is(err, unix.ESRCH) {
			continue
		}
		if err != nil {
			return fmt.Errorf("opening a pidfd of %d: %w", pid, err)
		}
		fds[pid] = fd
	}
	if len(fds) == 0 {
		return nil
	}
	still, err := list()
	if err != nil {
		return err
	}
	for _, pid := range still {
		fd, ok := fds[pid]
		if !ok {
			continue // forked since: the next round kills it
		}
		if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("sending SIGKILL to %d: %w", pid, err)
		}
	}
	return nil
}

// ExitStats returns the part of Stats that tells how a sandbox ended:
// MemoryPeak, OOMKills and PidsLimitHits; the other fields are 0. It reads
// three files (four with a workload cgroup on v1, five on v2) where Stats
// reads every controller's statistics, a cost a sandbox's exit waits for.
func (c *Cgroup) ExitStats() (Stats, error) {
	var s Stats
	var errs []error
	switch b := c.b.(type) {
	case *v1:
		if mem := b.paths["memory"]; mem != "" {
			s.MemoryPeak, errs = readUint(mem, "memory.max_usage_in_bytes", errs)
			s.OOMKills = optional(fs.OOMKillCount(mem))
		}
	case *v2:
		s.MemoryPeak = optional(fscommon.GetCgroupParamUint(b.dir, "memory.peak"))
		s.OOMKills = optional(fs2.OOMKillCount(b.dir))
	}
	s.PidsLimitHits = c.b.pidsLimitHits()
	if err := errors.Join(errs...); err != nil {
		return s, fmt.Errorf("reading exit stats of cgroup %s: %w", c.id, err)
	}
	return s, nil
}

func readUint(dir, file string, errs []error) (uint64, []error) {
	v, err := fscommon.GetCgroupParamUint(dir, file)
	if err != nil {
		errs = append(errs, err)
	}
	return v, errs
}

// pidsHits reads the "max" line of dir's pids.events: forks refused by a
// pids limit, 0 where the file is missing.
func pidsHits(dir string) uint64 {
	if dir == "" {
		return 0
	}
	return optional(fscommon.GetValueByKey(dir, "pids.events", "max"))
}

// WorkloadFiles is how the sandbox's init puts its workload into the
// cgroup nested for it (Limits.WorkloadPids): exactly one of the ways is
// set. The init holds no capability over the cgroup file system, and
// sees none of it: the files are opened here.
type WorkloadFiles struct {
	// Into and Back (cgroup v1) are the tasks files of the workload's
	// pids cgroup and of the sandbox's: the thread that forks the
	// workload writes "0" to Into, which moves that thread alone, forks,
	// and writes "0" to Back. The child is born inside. The thread counts
	// against the limit while inside, so the cgroup starts with room for
	// it: once back, it writes Pids, the workload's own limit, to Max
	// (pids.max), before the workload runs. (A cold start's clone on
	// amd64 writes Pids to Max first and its child writes "0" to Into
	// itself: Back goes unused.)
	Into, Back, Max *os.File
	Pids            int64
	// Dir (cgroup v2) is the workload cgroup's directory, for a clone
	// with CLONE_INTO_CGROUP.
	Dir *os.File
}

// Close closes the files that are set.
func (w *WorkloadFiles) Close() {
	for _, f := range []*os.File{w.Into, w.Back, w.Max, w.Dir} {
		if f != nil {
			f.Close()
		}
	}
}

// Workload opens the files that put a process into the workload's
// nested cgroup; the cgroup must have been created with a WorkloadPids
// limit. On cgroup v2 a clone into the nested cgroup needs write access
// to the sandbox cgroup's cgroup.procs (the common ancestor of where the
// init is and where the child goes) for the cloning process's own uid:
// uid, if not -1, is the host uid the sandbox's init runs as, and the file
// is given to it when it is not this process's. The caller closes the
// files.
func (c *Cgroup) Workload(uid int) (*WorkloadFiles, error) {
	w, err := c.b.workload(uid)
	if err != nil {
		return nil, fmt.Errorf("opening the workload cgroup of %s: %w", c.id, err)
	}
	return w, nil
}
