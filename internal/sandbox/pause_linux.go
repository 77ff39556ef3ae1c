package sandbox

import (
	"fmt"

	"mcpbox/internal/cgroup"
)

// Pausing freezes the sandbox's cgroup (v1 freezer controller, v2
// cgroup.freeze): every process of the sandbox, the init included, stops
// where it is and keeps its memory. A paused sandbox still dies with
// mcpbox: on v2 frozen tasks die of SIGKILL, on v1 a thaw guard
// (thawguard_linux.go) thaws it when mcpbox is gone. Processes outside the cgroup are not
// touched: the egress proxy and the port forwards run in mcpbox itself, so
// they keep accepting and simply see a peer that does not read until the
// sandbox resumes.
//
// Pause, Resume and Kill are serialized by sb.pmu so that no freeze lands
// on a sandbox being killed: the v1 freezer can freeze a task whose SIGKILL
// is still pending, and that task would then never exit.

// Pause freezes every process of the sandbox: nothing runs, memory is kept.
// Pausing a paused sandbox does nothing. Wait keeps waiting while the
// sandbox is paused; Kill ends a paused sandbox as it ends a running one.
//
// It fails with an error wrapping cgroup.ErrUnsupported when the sandbox
// has no freezer: no cgroup (a Spec without limits, or cgroups degraded,
// as for an unprivileged user without a delegated subtree) or no freezer
// controller. Once the sandbox was killed or has exited it fails with
// ErrExited, and once ResumeToStop ran (a stop) it fails too.
func (sb *Sandbox) Pause() error {
	cg := sb.cgroup()
	if cg == nil {
		return fmt.Errorf("pausing sandbox %s: it has no cgroup: %w", sb.ID, cgroup.ErrUnsupported)
	}
	sb.pmu.Lock()
	defer sb.pmu.Unlock()
	if sb.ended {
		return fmt.Errorf("pausing sandbox %s: %w", sb.ID, ErrExited)
	}
	if sb.stopping {
		return fmt.Errorf("pausing sandbox %s: it is being stopped", sb.ID)
	}
	if sb.paused.Load() {
		return nil
	}
	// On v1 nothing frozen dies with mcpbox: a guard thaws it then
	// (thawguard_linux.go). No guard, no pause.
	thaw := cg.ThawFiles()
	if len(thaw) > 0 {
		if err := guard.watch(thaw); err != nil {
			return fmt.Errorf("pausing sandbox %s: %w", sb.ID, err)
		}
	}
	if err := cg.Freeze(); err != nil {
		// A freeze that gave up half-way must not leave processes
		// frozen that Paused says are running.
		_ = cg.Thaw()
		guard.unwatch(thaw)
		return fmt.Errorf("pausing sandbox %s: %w", sb.ID, err)
	}
	sb.paused.Store(true)
	return nil
}

// Resume thaws a paused sandbox. Resuming a sandbox that is not paused,
// or was killed, does nothing.
func (sb *Sandbox) Resume() error {
	sb.pmu.Lock()
	defer sb.pmu.Unlock()
	return sb.resume()
}

// ResumeToStop is Resume for a stop, and refuses every later Pause: the
// workload must run to see its input end. Unlike Paused and Resume
// called one after the other, it cannot miss a Pause in progress, which
// holds the freezer frozen before Paused says so, nor one that lands
// just after.
func (sb *Sandbox) ResumeToStop() error {
	sb.pmu.Lock()
	defer sb.pmu.Unlock()
	sb.stopping = true
	return sb.resume()
}

// resume thaws a paused sandbox; the caller holds pmu.
func (sb *Sandbox) resume() error {
	if !sb.paused.Load() {
		return nil
	}
	cg := sb.cgroup()
	if err := cg.Thaw(); err != nil {
		return fmt.Errorf("resuming sandbox %s: %w", sb.ID, err)
	}
	sb.paused.Store(false)
	guard.unwatch(cg.ThawFiles())
	return nil
}

// Paused reports whether the sandbox is paused. It does not wait for a
// Pause or Resume in progress.
func (sb *Sandbox) Paused() bool { return sb.paused.Load() }

// Stats returns the accounting of the sandbox's cgroup: memory charged now
// and at its peak, tasks, CPU time. It fails with an error wrapping
// cgroup.ErrUnsupported when the sandbox has no cgroup, and fails too once
// Wait has removed the cgroup (Result has the final figures).
func (sb *Sandbox) Stats() (cgroup.Stats, error) {
	cg := sb.cgroup()
	if cg == nil {
		return cgroup.Stats{}, fmt.Errorf("reading stats of sandbox %s: it has no cgroup: %w", sb.ID, cgroup.ErrUnsupported)
	}
	return cg.Stats()
}

// end marks the sandbox as ended (Kill ran, or the init exited) so that
// Pause refuses from now on, and reports whether it was paused. It waits
// for a Pause or Resume in progress, which the freezer bounds. The thaw
// guard still watches a paused sandbox: the caller tells it (unwatch)
// once the sandbox is thawed or gone, so that if mcpbox dies before, the
// guard thaws it and its pending SIGKILLs act.
func (sb *Sandbox) end() (wasPaused bool) {
	sb.pmu.Lock()
	defer sb.pmu.Unlock()
	sb.ended = true
	return sb.paused.Swap(false)
}

// unwatch tells the thaw guard that the sandbox, paused when it ended,
// is thawed or gone.
func (sb *Sandbox) unwatch() {
	if cg := sb.cgroup(); cg != nil {
		guard.unwatch(cg.ThawFiles())
	}
}
