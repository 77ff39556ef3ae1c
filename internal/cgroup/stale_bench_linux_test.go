package cgroup

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkCleanupStale is the sweep every sandbox start runs while its
// workload does (internal/sandbox's watch, so each `mcpbox exec`): on a
// host with the starting sandbox's own cgroup (young) and one other
// sandbox's, old and holding a process, neither of which it may remove.
// Other sandboxes on the host at the time add to it. cpu-µs/op is this
// process's CPU time per sweep.
func BenchmarkCleanupStale(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: creates cgroups")
	}
	if c, ok := Probe().Controller("pids"); !ok || !c.Usable {
		b.Skipf("cgroup controller pids not usable here: %s", c.Reason)
	}
	newCgroup := func(l Limits) *Cgroup {
		c, err := Create(testID(), l)
		if err != nil {
			b.Fatalf("Create: %v", err)
		}
		b.Cleanup(func() {
			if err := c.Destroy(); err != nil {
				b.Errorf("Destroy: %v", err)
			}
		})
		return c
	}
	newCgroup(Limits{Memory: 1 << 30, Pids: 512}) // the starting sandbox's own
	live := newCgroup(Limits{})
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = sleep.Wait(); close(done) }()
	b.Cleanup(func() { // before live's Destroy: cleanups run last first
		_ = sleep.Process.Kill()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			b.Errorf("pid %d did not exit after SIGKILL", sleep.Process.Pid)
		}
	})
	if err := live.Add(sleep.Process.Pid); err != nil {
		b.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	for _, d := range live.Paths() {
		if err := os.Chtimes(d, old, old); err != nil {
			b.Fatal(err)
		}
	}
	cpu := func() time.Duration {
		var ru unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0 := cpu()
	failed := 0
	for b.Loop() {
		// Errors are counted, not fatal: another mcpbox (or test) on the
		// host may remove or fill a leftover during the sweep.
		if _, err := CleanupStale(); err != nil {
			if failed == 0 {
				b.Logf("CleanupStale: %v", err)
			}
			failed++
		}
	}
	b.ReportMetric(float64(failed)/float64(b.N), "errors/op")
	b.ReportMetric(float64((cpu()-c0).Microseconds())/float64(b.N), "cpu-µs/op")
}
