package cgroup

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// limitFile names a file holding a limit: v1 by controller and file, v2 by
// file in the single directory.
type limitFile struct{ ctrl, file string }

func (f limitFile) path(c *Cgroup) string {
	if dir, ok := c.Paths()["unified"]; ok {
		return filepath.Join(dir, f.file)
	}
	return filepath.Join(c.Paths()[f.ctrl], f.file)
}

func TestCreateWritesLimits(t *testing.T) {
	requireControllers(t, "memory", "pids", "cpu")
	const unlimitedV1 = "9223372036854771712" // page-aligned LONG_MAX
	tests := []struct {
		name   string
		l      Limits
		v1, v2 map[limitFile]string
	}{{
		name: "all",
		l:    Limits{Memory: 64 << 20, Pids: 50, CPU: 0.5},
		v1: map[limitFile]string{
			{"memory", "memory.limit_in_bytes"}: "67108864",
			{"pids", "pids.max"}:                "50",
			{"cpu", "cpu.cfs_quota_us"}:         "50000",
			{"cpu", "cpu.cfs_period_us"}:        "100000",
		},
		v2: map[limitFile]string{
			{"", "memory.max"}: "67108864",
			{"", "pids.max"}:   "50",
			{"", "cpu.max"}:    "50000 100000",
		},
	}, {
		name: "none",
		l:    Limits{},
		v1: map[limitFile]string{
			{"memory", "memory.limit_in_bytes"}: unlimitedV1,
			{"pids", "pids.max"}:                "max",
			{"cpu", "cpu.cfs_quota_us"}:         "-1",
		},
		v2: map[limitFile]string{
			{"", "memory.max"}: "max",
			{"", "pids.max"}:   "max",
			{"", "cpu.max"}:    "max 100000",
		},
	}, {
		name: "cpu only",
		l:    Limits{CPU: 1.5},
		v1: map[limitFile]string{
			{"cpu", "cpu.cfs_quota_us"}:         "150000",
			{"memory", "memory.limit_in_bytes"}: unlimitedV1,
		},
		v2: map[limitFile]string{{"", "cpu.max"}: "150000 100000", {"", "memory.max"}: "max"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := create(t, tt.l)
			want := tt.v1
			if _, ok := c.Paths()["unified"]; ok {
				want = tt.v2
			}
			got := make(map[limitFile]string)
			for f := range want {
				got[f] = readFile(t, f.path(c))
			}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(limitFile{})); diff != "" {
				t.Errorf("limit files (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCreateLimitsSwap checks that a memory limit leaves no extra swap
// where the kernel accounts swap.
func TestCreateLimitsSwap(t *testing.T) {
	requireControllers(t, "memory")
	const limit = 48 << 20
	c := create(t, Limits{Memory: limit})
	swap, want := limitFile{"memory", "memory.memsw.limit_in_bytes"}, strconv.Itoa(limit)
	if _, ok := c.Paths()["unified"]; ok {
		swap, want = limitFile{"", "memory.swap.max"}, "0"
	}
	if !exists(swap.path(c)) {
		t.Skipf("no %s: the kernel does not account swap", swap.file)
	}
	if got := readFile(t, swap.path(c)); got != want {
		t.Errorf("%s = %s, want %s", swap.file, got, want)
	}
}

func TestAddKillDestroy(t *testing.T) {
	requireControllers(t, "memory", "pids", "cpu")
	c, err := Create(testID(), Limits{Memory: 64 << 20, Pids: 20, CPU: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	p := startGated(t, "sleep 30")
	pid := p.cmd.Process.Pid
	if err := c.Add(pid); err != nil {
		t.Fatal(err)
	}
	for ctrl, dir := range c.Paths() {
		procs := strings.Fields(readFile(t, filepath.Join(dir, "cgroup.procs")))
		if !slices.Contains(procs, strconv.Itoa(pid)) {
			t.Errorf("%s cgroup.procs = %v, want it to list %d", ctrl, procs, pid)
		}
	}
	p.release(t)
	// sh forks sleep inside the cgroup.
	if !pollUntil(5*time.Second, func() bool { pids, _ := c.Pids(); return len(pids) == 2 }) {
		pids, err := c.Pids()
		t.Fatalf("Pids() = %v, %v; want sh and sleep", pids, err)
	}
	if st, err := c.Stats(); err != nil || st.PidsCurrent != 2 {
		t.Errorf("Stats() = %+v, %v; want PidsCurrent 2", st, err)
	}

	if err := c.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	// Kill returned before the test reaped sh: zombies must not count.
	err = p.wait(t, 5*time.Second)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("sh exited with %v, want SIGKILL", err)
	}
	if pids, err := c.Pids(); err != nil || len(pids) != 0 {
		t.Errorf("after Kill, Pids() = %v, %v", pids, err)
	}

	dirs := dirsOf(c)
	for range 2 { // idempotent
		if err := c.Destroy(); err != nil {
			t.Fatalf("Destroy: %v", err)
		}
	}
	for _, d := range dirs {
		if exists(d) {
			t.Errorf("%s still exists after Destroy", d)
		}
	}
}

func TestDestroyKillsProcesses(t *testing.T) {
	requireControllers(t, "pids")
	c, err := Create(testID(), Limits{Pids: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	p := startGated(t, "sleep 30")
	if err := c.Add(p.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	p.release(t)
	if err := c.Destroy(); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if err := p.wait(t, 5*time.Second); err == nil {
		t.Error("sh exited cleanly; Destroy should have killed it")
	}
	for _, d := range dirsOf(c) {
		if exists(d) {
			t.Errorf("%s still exists after Destroy", d)
		}
	}
}

func TestMemoryLimitOOMKill(t *testing.T) {
	requireControllers(t, "memory")
	const limit = 32 << 20
	c := create(t, Limits{Memory: limit})
	// tail keeps the whole newline-free input in memory: 200 MiB.
	p := startGated(t, "head -c 200M /dev/zero | tail >/dev/null")
	if err := c.Add(p.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	p.release(t)
	if err := p.wait(t, 60*time.Second); err == nil {
		t.Fatal("the memory hog exited cleanly")
	}
	st, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stats after the hog: %+v", st)
	if st.OOMKills < 1 {
		t.Errorf("Stats().OOMKills = %d, want >= 1 (%+v)", st.OOMKills, st)
	}
	if st.MemoryPeak == 0 || st.MemoryPeak > limit {
		t.Errorf("Stats().MemoryPeak = %d, want in (0, %d]", st.MemoryPeak, limit)
	}
	checkExitStats(t, c, st)
}

// checkExitStats checks that ExitStats agrees with Stats st on the
// fields it reads.
func checkExitStats(t *testing.T, c *Cgroup, st Stats) {
	t.Helper()
	ex, err := c.ExitStats()
	if err != nil {
		t.Fatalf("ExitStats: %v", err)
	}
	want := Stats{MemoryPeak: st.MemoryPeak, OOMKills: st.OOMKills, PidsLimitHits: st.PidsLimitHits}
	if diff := cmp.Diff(want, ex); diff != "" {
		t.Errorf("ExitStats differs from Stats (-Stats +ExitStats):\n%s", diff)
	}
}

func TestPidsLimitBoundsForkBomb(t *testing.T) {
	requireControllers(t, "pids")
	const limit = 16
	c := create(t, Limits{Pids: limit})
	// 100 attempts, far past the limit; the shell may give up at the first
	// refused fork, leaving the sleeps behind.
	p := startGated(t, `i=0; while [ $i -lt 100 ]; do sleep 30 & i=$((i+1)); done; wait`)
	if err := c.Add(p.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	p.release(t)

	var peak uint64
	full := pollUntil(10*time.Second, func() bool {
		st, err := c.Stats()
		if err != nil {
			t.Fatal(err)
		}
		peak = max(peak, st.PidsCurrent)
		return st.PidsLimitHits > 0
	})
	st, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stats after the bomb: %+v (peak seen %d)", st, peak)
	if !full {
		t.Fatalf("no fork refused in 10s: %+v", st)
	}
	if peak > limit || st.PidsCurrent > limit || st.PidsPeak > limit {
		t.Errorf("task count exceeded pids limit %d: seen %d, %+v", limit, peak, st)
	}
	if st.PidsPeak != 0 && st.PidsPeak != limit {
		t.Errorf("PidsPeak = %d, want %d: the bomb tried more than the limit", st.PidsPeak, limit)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if pids, err := c.Pids(); err != nil || len(pids) != 0 {
		t.Errorf("after Kill, Pids() = %v, %v", pids, err)
	}
	// Nothing runs any more: the figures hold still between the reads.
	if st, err = c.Stats(); err != nil {
		t.Fatal(err)
	}
	checkExitStats(t, c, st)
}

func TestCPULimitThrottles(t *testing.T) {
	requireControllers(t, "cpu")
	c := create(t, Limits{CPU: 0.1})
	p := startGated(t, "while :; do :; done")
	if err := c.Add(p.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p.release(t)
	var st Stats
	throttled := pollUntil(3*time.Second, func() bool {
		var err error
		if st, err = c.Stats(); err != nil {
			t.Fatal(err)
		}
		return st.CPUThrottled > 0 && time.Since(start) > 500*time.Millisecond
	})
	elapsed := time.Since(start)
	if !throttled {
		t.Errorf("Stats().CPUThrottled = 0 after %v of a busy loop under 0.1 CPU: %+v", elapsed, st)
	}
	if st.CPUUsage > 0 && st.CPUUsage > elapsed*3/10 {
		t.Errorf("busy loop used %v CPU in %v under a 0.1 CPU limit", st.CPUUsage, elapsed)
	}
}

func TestFreezeThaw(t *testing.T) {
	requireControllers(t, "freezer")
	c := create(t, Limits{})
	p := startGated(t, "while :; do :; done")
	if err := c.Add(p.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	p.release(t)
	usage := func() time.Duration {
		st, err := c.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return st.CPUUsage
	}
	time.Sleep(100 * time.Millisecond)
	if usage() == 0 {
		t.Skip("no CPU usage accounting (cpuacct) to observe freezing with")
	}
	if err := c.Freeze(); err != nil {
		t.Fatal(err)
	}
	frozenAt := usage()
	time.Sleep(300 * time.Millisecond)
	if got := usage(); got-frozenAt > 5*time.Millisecond {
		t.Errorf("frozen busy loop used %v CPU in 300ms", got-frozenAt)
	}
	if err := c.Thaw(); err != nil {
		t.Fatal(err)
	}
	// A loaded host may give it little CPU, but it must get some.
	if !pollUntil(3*time.Second, func() bool { return usage()-frozenAt > 20*time.Millisecond }) {
		t.Error("thawed busy loop used no CPU in 3s")
	}
	// Kill must work on a frozen cgroup too.
	if err := c.Freeze(); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(); err != nil {
		t.Fatalf("Kill of a frozen cgroup: %v", err)
	}
	if err := p.wait(t, 5*time.Second); err == nil {
		t.Error("busy loop exited cleanly after Kill")
	}
}

func TestCreateRejects(t *testing.T) {
	requireControllers(t, "memory", "pids", "cpu")
	first := create(t, Limits{Pids: 5})
	tests := []struct {
		name string
		id   string
		l    Limits
		is   error
	}{
		{"existing id", first.ID(), Limits{}, ErrExists},
		{"bad id", "../x", Limits{}, errBadID},
		{"negative memory", testID(), Limits{Memory: -1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Create(tt.id, tt.l)
			if err == nil {
				_ = c.Destroy()
				t.Fatal("Create succeeded")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("Create error %v, want %v", err, tt.is)
			}
		})
	}
	// The failed Create of the same id must leave the first one whole.
	for ctrl, dir := range first.Paths() {
		if !exists(dir) {
			t.Errorf("%s dir %s gone after a failed Create of the same id", ctrl, dir)
		}
	}
}

func TestCleanupStale(t *testing.T) {
	requireControllers(t, "pids")
	stale := create(t, Limits{})
	ageDirs(t, dirsOf(stale)...)

	live := create(t, Limits{})
	p := startGated(t, "sleep 30")
	if err := live.Add(p.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	ageDirs(t, dirsOf(live)...)

	young := create(t, Limits{}) // within the grace period

	// A process in only one of a sandbox's directories still keeps all.
	partial := create(t, Limits{})
	q := startGated(t, "sleep 30")
	var one string
	for _, d := range partial.Paths() {
		one = d
		break
	}
	if err := os.WriteFile(filepath.Join(one, "cgroup.procs"), []byte(strconv.Itoa(q.cmd.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	ageDirs(t, dirsOf(partial)...)

	// Not sandboxes: a bad name inside mcpbox/, a valid name outside it.
	parent := filepath.Dir(one)
	badName := filepath.Join(parent, "Not-An-Id")
	outside := filepath.Join(filepath.Dir(parent), testID())
	mkdirTemp(t, badName)
	mkdirTemp(t, outside)
	ageDirs(t, badName, outside)

	removed, err := CleanupStale()
	if err != nil {
		t.Fatalf("CleanupStale: %v", err)
	}
	// Another mcpbox starting meanwhile (tests run packages in parallel)
	// may have removed it first: what counts is that it is gone, below.
	if !slices.Contains(removed, stale.ID()) && exists(dirsOf(stale)[0]) {
		t.Errorf("CleanupStale removed %v, want it to include %s", removed, stale.ID())
	}
	for _, c := range []*Cgroup{live, young, partial} {
		if slices.Contains(removed, c.ID()) {
			t.Errorf("CleanupStale removed %s", c.ID())
		}
		for _, d := range dirsOf(c) {
			if !exists(d) {
				t.Errorf("CleanupStale removed %s", d)
			}
		}
	}
	for _, d := range dirsOf(stale) {
		if exists(d) {
			t.Errorf("stale %s still exists", d)
		}
	}
	for _, d := range []string{badName, outside} {
		if !exists(d) {
			t.Errorf("CleanupStale removed %s", d)
		}
	}
	if pids, err := live.Pids(); err != nil || len(pids) != 1 {
		t.Errorf("live sandbox's Pids() = %v, %v after CleanupStale", pids, err)
	}
}

// TestProbe checks Probe against the mount table.
func TestProbe(t *testing.T) {
	r := Probe()
	var st unix.Statfs_t
	want := ""
	switch {
	case unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC:
		want = "v2"
	case unix.Statfs("/sys/fs/cgroup/unified", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC:
		want = "hybrid"
	case len(v1Mounted(t)) > 0:
		want = "v1"
	}
	if r.Version != want {
		t.Errorf("Probe().Version = %q, want %q", r.Version, want)
	}
	var names []string
	for _, c := range r.Controllers {
		names = append(names, c.Name)
		if !c.Usable && c.Reason == "" {
			t.Errorf("%s unusable without a reason", c.Name)
		}
	}
	if diff := cmp.Diff(reported, names); diff != "" {
		t.Errorf("controllers (-want +got):\n%s", diff)
	}
	if r.Version != "v1" && r.Version != "hybrid" || os.Geteuid() != 0 {
		return
	}
	// As root, a v1 controller is usable exactly when it is mounted.
	mounted := v1Mounted(t)
	for _, c := range r.Controllers {
		if c.Usable != mounted[c.Name] {
			t.Errorf("%s: Usable = %v, mounted = %v (%s)", c.Name, c.Usable, mounted[c.Name], c.Reason)
		}
	}
}

// v1Mounted lists the controllers mounted as v1 hierarchies.
func v1Mounted(t *testing.T) map[string]bool {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]bool)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[2] != "cgroup" {
			continue
		}
		for _, opt := range strings.Split(f[3], ",") {
			m[opt] = true
		}
	}
	return m
}
