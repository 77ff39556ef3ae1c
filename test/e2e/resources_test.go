package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestForkBomb runs a fork bomb under a small pids limit: it must be
// contained, reported, and the host must stay usable.
func TestForkBomb(t *testing.T) {
	m := rootMode(t)
	start := time.Now()
	r := m.sh(t, `bomb() { bomb | bomb & }; bomb; sleep 2; echo survived`, "--pids", "64", "--timeout", "20s")
	if r.code == 0 && !strings.Contains(r.stderr, "process limit") {
		t.Fatalf("fork bomb not reported:\n%s", r)
	}
	if !strings.Contains(r.stderr, "process limit") && r.code != 124 {
		t.Fatalf("fork bomb neither limited nor timed out:\n%s", r)
	}
	t.Logf("fork bomb contained in %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(r.stderr))
	// The host can still start processes, and no bomb process is left.
	if pid := findProcess("bomb; sleep 2; echo survived\x00"); pid != 0 {
		t.Fatalf("fork bomb process %d left behind", pid)
	}
}

// TestPidsLimitCountsTheWorkload: --pids is the command's own budget,
// exactly; the init's threads come on top, so a tiny limit still starts,
// and a command that forks up to its limit cannot take them.
func TestPidsLimitCountsTheWorkload(t *testing.T) {
	m := rootMode(t)
	want(t, m.sh(t, "echo started", "--pids", "2"), 0, "started")
	r := m.sh(t, "for i in 1 2 3 4 5 6; do sleep 1 & echo forked; done; wait; echo done", "--pids", "3")
	if !strings.Contains(r.stderr, "process limit") {
		t.Fatalf("6 background processes under --pids 3 were not refused:\n%s", r)
	}
	// The shell and two sleeps; the shell gives up at the refused fork.
	if n := strings.Count(r.stdout, "forked\n"); n != 2 {
		t.Fatalf("under --pids 3 the shell forked %d sleeps, want 2:\n%s", n, r)
	}
}

// TestMemoryHog allocates far beyond the memory limit.
func TestMemoryHog(t *testing.T) {
	m := rootMode(t)
	r := m.exec(t, "", "--memory", "64Mi", "--", "python3", "-c", "b = bytearray(512 << 20); b[::4096] = b'x' * len(b[::4096]); print('allocated')")
	if r.code == 0 || strings.Contains(r.stdout, "allocated") {
		t.Fatalf("memory hog not contained:\n%s", r)
	}
	if r.code != 137 || !strings.Contains(r.stderr, "memory limit") {
		t.Fatalf("want exit 137 and a memory-limit report:\n%s", r)
	}
}

// TestTmpFull writes past /tmp's size.
func TestTmpFull(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		r := m.sh(t, `dd if=/dev/zero of=/tmp/big bs=1M count=64 2>&1; ls -l /tmp/big | awk '{print "size", $5}'`, "--tmp-size", "8Mi")
		if !strings.Contains(r.stdout, "No space left") {
			t.Fatalf("filling /tmp did not hit its size:\n%s", r)
		}
		if !strings.Contains(r.stdout, "size 8388608") && !strings.Contains(r.stdout, "size 83") {
			t.Fatalf("unexpected /tmp file size:\n%s", r)
		}
	})
}

// TestTimeout kills a sandbox that runs too long.
func TestTimeout(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		start := time.Now()
		r := m.exec(t, "", "--timeout", "1s", "--", "sleep", "30")
		if r.code != 124 || !strings.Contains(r.stderr, "timeout") {
			t.Fatalf("want exit 124 after the timeout:\n%s", r)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Fatalf("timeout took %s", d)
		}
	})
}

// rootMode is the mode with cgroups on this host.
func rootMode(t *testing.T) mode {
	for _, m := range modes(t) {
		if len(m.flags) == 0 {
			return m
		}
	}
	t.Skip("cgroup limits need root or a delegated cgroup")
	return mode{}
}

// TestTmpfsBounds: the sandbox's memory-backed file systems are bounded
// in size and inodes even without a memory cgroup (an unprivileged run on
// a host without delegated cgroups).
func TestTmpfsBounds(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		r := m.sh(t, `df -k /dev/shm | tail -1 | awk '{print "shm-kib=" $2}'; df -i /tmp | tail -1 | awk '{print "tmp-inodes=" $2}'; `+
			`grep ' /dev/pts ' /proc/mounts | grep -o 'max=[0-9]*'`, "--tmp-size", "256Mi")
		want(t, r, 0, "shm-kib=65536", "tmp-inodes=65536", "max=256")
	})
}
