package cgroup

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Limits are the resource limits of one sandbox. The zero value limits
// nothing.
type Limits struct {
	// Memory is the memory limit in bytes; 0 means no limit. Swap is
	// limited to the same total (no extra swap) where the kernel accounts
	// swap: memory.swap.max = 0 on v2, memory.memsw.limit_in_bytes on v1.
	Memory int64
	// Pids is the maximum number of processes and threads; 0 means no limit.
	Pids int64
	// WorkloadPids, if positive, is the pids limit of a cgroup nested in
	// this one for the sandbox's workload (Cgroup.Workload): the
	// workload's processes and threads count against it and against Pids,
	// so that the rest of the cgroup (the sandbox's init) always keeps
	// Pids - WorkloadPids for itself, however many the workload forks. It
	// needs a Pids limit at least as large.
	WorkloadPids int64
	// CPU is the CPU bandwidth in cores: 1.0 is a quota of 100ms per 100ms
	// period, 0.5 half a core. 0 means no limit; the smallest limit is 0.01.
	CPU float64
}

// cpuPeriod is the CFS period in microseconds, the kernel default.
const cpuPeriod = 100000

func (l Limits) validate() error {
	switch {
	case l.Memory < 0:
		return fmt.Errorf("memory limit %d is negative", l.Memory)
	case l.Pids < 0:
		return fmt.Errorf("pids limit %d is negative", l.Pids)
	case l.WorkloadPids < 0 || l.WorkloadPids > 0 && l.Pids < l.WorkloadPids:
		return fmt.Errorf("workload pids limit %d is negative or above the pids limit %d", l.WorkloadPids, l.Pids)
	case math.IsNaN(l.CPU) || math.IsInf(l.CPU, 0) || l.CPU < 0:
		return fmt.Errorf("cpu limit %v is not a non-negative number", l.CPU)
	case l.CPU > 0 && l.cpuQuota() < 1000:
		// The kernel rejects quotas below 1ms.
		return fmt.Errorf("cpu limit %v is below the minimum of 0.01", l.CPU)
	case l.CPU > 1e6:
		return fmt.Errorf("cpu limit %v is too large", l.CPU)
	}
	return nil
}

// cpuQuota is the CFS quota in microseconds per cpuPeriod, 0 for no limit.
func (l Limits) cpuQuota() int64 {
	return int64(math.Round(l.CPU * cpuPeriod))
}

// Stats is a snapshot of a sandbox cgroup's accounting. A field is 0 when the
// kernel or the cgroup setup does not provide it; the comments say where
// each value comes from.
type Stats struct {
	// MemoryCurrent is the memory charged now, in bytes (v1
	// memory.usage_in_bytes, v2 memory.current).
	MemoryCurrent uint64
	// MemoryPeak is the highest memory charge seen, in bytes (v1
	// memory.max_usage_in_bytes, v2 memory.peak since Linux 5.19).
	MemoryPeak uint64
	// OOMKills counts processes the OOM killer killed in the cgroup (v1
	// memory.oom_control since Linux 4.13, v2 memory.events).
	OOMKills uint64
	// PidsCurrent is the number of tasks (processes and threads) now,
	// counting zombies not yet reaped (pids.current). On v2 without the
	// pids controller it counts processes in cgroup.procs instead.
	PidsCurrent uint64
	// PidsPeak is the highest task count seen (pids.peak, which older
	// kernels lack).
	PidsPeak uint64
	// PidsLimitHits counts forks refused because of a pids limit (the
	// "max" line of pids.events).
	PidsLimitHits uint64
	// CPUUsage is the CPU time consumed (v1 cpuacct.usage, v2 cpu.stat
	// usage_usec).
	CPUUsage time.Duration
	// CPUThrottled is the time the cgroup was throttled by its CPU limit
	// (cpu.stat).
	CPUThrottled time.Duration
}

// Report says which cgroup features this process can use, for doctor.
type Report struct {
	// Version is "v2", "v1", "hybrid" (v1 controllers, v2 mounted without
	// them; used as v1) or "" when no cgroup file system is mounted.
	Version string
	// Controllers lists memory, pids, cpu and freezer, in that order.
	Controllers []ControllerReport
}

// ControllerReport is one controller's line in a Report.
type ControllerReport struct {
	Name   string
	Usable bool
	// Parent is the directory sandbox cgroups would be created in, if known.
	Parent string
	// Reason says why the controller is not usable, or how it will be used.
	Reason string
}

// Controller returns the report for the named controller.
func (r Report) Controller(name string) (ControllerReport, bool) {
	for _, c := range r.Controllers {
		if c.Name == name {
			return c, true
		}
	}
	return ControllerReport{}, false
}

// maxIDLen keeps ids short enough for paths and logs.
const maxIDLen = 64

// validateID accepts 1 to maxIDLen characters from [a-z0-9_], so an id is
// always a single, harmless path element.
func validateID(id string) error {
	if id == "" || len(id) > maxIDLen {
		return fmt.Errorf("sandbox id %q: %w", id, errBadID)
	}
	for _, r := range id {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return fmt.Errorf("sandbox id %q: %w", id, errBadID)
		}
	}
	return nil
}

var errBadID = errors.New("want 1 to 64 characters from [a-z0-9_]")
