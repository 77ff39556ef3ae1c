package cgroup

// These tests run the v2 code against the controller-less v2 mount of a
// hybrid host (/sys/fs/cgroup/unified), which has cgroup.kill,
// cgroup.freeze and cgroup.procs but usually no memory, pids or cpu. On a
// pure v2 host they skip, and the tests in cgroup_linux_test.go run the v2
// code with real controllers instead.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

const unifiedRoot = "/sys/fs/cgroup/unified"

func requireHybridV2(t *testing.T) {
	t.Helper()
	requireRoot(t)
	var st unix.Statfs_t
	if unix.Statfs(unifiedRoot, &st) != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		t.Skip("no cgroup v2 mount at " + unifiedRoot + " (not a hybrid host); the other tests cover v2 on a v2 host")
	}
}

// createUnified makes a v2 sandbox cgroup on the hybrid v2 mount, destroyed
// when the test ends.
func createUnified(t *testing.T) *Cgroup {
	t.Helper()
	id := testID()
	b, err := createV2(unifiedRoot, id, Limits{}, v2Controllers)
	if err != nil {
		t.Fatalf("createV2: %v", err)
	}
	c := &Cgroup{id: id, b: b}
	t.Cleanup(func() {
		if err := c.Destroy(); err != nil {
			t.Errorf("Destroy: %v", err)
		}
		if d := c.Paths()["unified"]; exists(d) {
			t.Errorf("%s exists after Destroy", d)
		}
	})
	return c
}

func TestV2Lifecycle(t *testing.T) {
	requireHybridV2(t)
	c := createUnified(t)
	own, err := ownV2Cgroup()
	if err != nil {
		t.Fatal(err)
	}
	dir := c.Paths()["unified"]
	if want := filepath.Join(unifiedRoot, own, parentName, c.ID()); dir != want {
		t.Errorf("dir = %s, want %s", dir, want)
	}

	p := startGated(t, "while :; do :; done")
	if err := c.Add(p.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "cgroup.procs")); got != strconv.Itoa(p.cmd.Process.Pid) {
		t.Errorf("cgroup.procs = %q, want the busy loop's pid", got)
	}
	p.release(t)

	if err := c.Freeze(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "cgroup.freeze")); got != "1" {
		t.Errorf("cgroup.freeze = %s after Freeze", got)
	}
	st1, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	st2, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if d := st2.CPUUsage - st1.CPUUsage; d > 5*time.Millisecond {
		t.Errorf("frozen busy loop used %v CPU", d)
	}
	if st2.PidsCurrent != 1 {
		t.Errorf("PidsCurrent = %d, want 1", st2.PidsCurrent)
	}
	if err := c.Thaw(); err != nil {
		t.Fatal(err)
	}
	// A loaded host may give it little CPU, but it must get some.
	running := pollUntil(3*time.Second, func() bool {
		st3, err := c.Stats()
		return err == nil && st3.CPUUsage-st2.CPUUsage > 20*time.Millisecond
	})
	if !running {
		t.Error("thawed busy loop used no CPU in 3s")
	}

	if err := c.Freeze(); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(); err != nil { // cgroup.kill, on a frozen cgroup
		t.Fatal(err)
	}
	if err := p.wait(t, 5*time.Second); err == nil {
		t.Error("busy loop exited cleanly after Kill")
	}
}

// TestV2KillWithoutCgroupKill runs the pid-by-pid kill that kernels
// before 5.14 need, against a shell that keeps forking.
func TestV2KillWithoutCgroupKill(t *testing.T) {
	requireHybridV2(t)
	c := createUnified(t)
	p := startGated(t, "while :; do sleep 30 & done")
	if err := c.Add(p.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	p.release(t)
	if !pollUntil(5*time.Second, func() bool { pids, _ := c.Pids(); return len(pids) > 5 }) {
		t.Fatal("the shell did not fork")
	}
	b := c.b.(*v2)
	emptied := pollUntil(5*time.Second, func() bool {
		if err := b.signalEach(); err != nil {
			t.Fatal(err)
		}
		pids, err := c.Pids()
		return err == nil && len(pids) == 0
	})
	if !emptied {
		pids, _ := c.Pids()
		t.Fatalf("%d processes left after 5s of signalEach", len(pids))
	}
	if err := p.wait(t, 5*time.Second); err == nil {
		t.Error("the shell exited cleanly")
	}
	if got := readFile(t, filepath.Join(b.dir, "cgroup.freeze")); got != "0" {
		t.Errorf("cgroup.freeze = %s after signalEach, want thawed", got)
	}
}

func TestV2MissingController(t *testing.T) {
	requireHybridV2(t)
	avail, err := readList(unifiedRoot, "cgroup.controllers")
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(avail, "memory") {
		t.Skip("memory is on the v2 mount here")
	}
	b, err := createV2(unifiedRoot, testID(), Limits{Memory: 64 << 20}, v2Controllers)
	if err == nil {
		_ = cgroups.RemovePath(b.dirs()["unified"])
		t.Fatal("createV2 with a memory limit succeeded without the memory controller")
	}
	if !errors.Is(err, ErrControllerMissing) {
		t.Errorf("error %v, want ErrControllerMissing", err)
	}
}

func TestProbeV2(t *testing.T) {
	requireHybridV2(t)
	own, err := ownV2Cgroup()
	if err != nil {
		t.Fatal(err)
	}
	if own != "/" {
		t.Skipf("own v2 cgroup is %s, not the root", own)
	}
	avail, err := readList(unifiedRoot, "cgroup.controllers")
	if err != nil {
		t.Fatal(err)
	}
	var want, got []bool
	for _, c := range probeV2(unifiedRoot) {
		// Root has no internal-process rule: usable exactly when available.
		want = append(want, c.Name == "freezer" || slices.Contains(avail, c.Name))
		got = append(got, c.Usable)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("usable (-want +got):\n%s", diff)
	}
}

// TestV2NoInternalProcesses runs createV2 in a helper process that sits in
// a non-root cgroup T, enabling hugetlb (the one controller a hybrid host
// tends to leave on v2) to hit the no-internal-processes rule for real.
func TestV2NoInternalProcesses(t *testing.T) {
	requireHybridV2(t)
	enableOnRoot(t, "hugetlb")
	tests := []struct {
		name      string
		crowded   bool // another process in T
		wantOwn   string
		wantError bool
	}{
		{name: "alone moves itself to a leaf", wantOwn: selfLeaf},
		{name: "crowded fails", crowded: true, wantOwn: "", wantError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tdir := filepath.Join(unifiedRoot, testID())
			mkdirTemp(t, tdir)
			t.Cleanup(func() { _ = cgroups.RemovePath(tdir) }) // runs before mkdirTemp's
			if tt.crowded {
				p := startGated(t, "sleep 30")
				if err := cgroups.WriteCgroupProc(tdir, p.cmd.Process.Pid); err != nil {
					t.Fatal(err)
				}
			}
			out := runHelperProcess(t, "enable", tdir)

			rel := strings.TrimPrefix(tdir, unifiedRoot)
			if want := filepath.Join(rel, tt.wantOwn); out["own"] != want {
				t.Errorf("helper's cgroup = %s, want %s", out["own"], want)
			}
			if tt.wantError {
				if out["internal"] != "true" || !strings.Contains(out["err"], tdir) {
					t.Errorf("createV2 error %q, want ErrInternalProcesses naming %s", out["err"], tdir)
				}
				if out["probe"] != "false" {
					t.Errorf("canEnableIn = %s, want false", out["probe"])
				}
				return
			}
			if out["err"] != "" {
				t.Fatalf("createV2: %s", out["err"])
			}
			if !strings.Contains(out["reason"], selfLeaf) {
				t.Errorf("canEnableIn reason %q does not mention %s", out["reason"], selfLeaf)
			}
			for _, d := range []string{tdir, filepath.Join(tdir, parentName)} {
				if sc, _ := readList(d, "cgroup.subtree_control"); !slices.Contains(sc, "hugetlb") {
					t.Errorf("%s/cgroup.subtree_control = %v, want hugetlb", d, sc)
				}
			}
		})
	}
}

// enableOnRoot enables ctrl in the v2 root's subtree_control for the test
// when the host has it there, undoing that afterwards.
func enableOnRoot(t *testing.T, ctrl string) {
	t.Helper()
	avail, err := readList(unifiedRoot, "cgroup.controllers")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(avail, ctrl) {
		t.Skipf("%s not available on %s", ctrl, unifiedRoot)
	}
	if on, _ := readList(unifiedRoot, "cgroup.subtree_control"); slices.Contains(on, ctrl) {
		return
	}
	if err := cgroups.WriteFile(unifiedRoot, "cgroup.subtree_control", "+"+ctrl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// EBUSY while another run of this test still uses it; it then
		// stays enabled, which limits nothing.
		if err := cgroups.WriteFile(unifiedRoot, "cgroup.subtree_control", "-"+ctrl); err != nil {
			t.Logf("disabling %s on %s: %v", ctrl, unifiedRoot, err)
		}
	})
}

// runHelperProcess runs helper scenario name in a re-exec of the test
// binary and returns the key=value lines it prints.
func runHelperProcess(t *testing.T, name string, args ...string) map[string]string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+name)
	timer := time.AfterFunc(30*time.Second, func() {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
	})
	defer timer.Stop()
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %s: %v\n%s", name, err, b)
	}
	out := make(map[string]string)
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = v
		}
	}
	return out
}

// runHelper runs a helper scenario in this process, which a test started.
func runHelper(name string) int {
	switch name {
	case "enable":
		return helperEnable(os.Args[1])
	case leaderHelper:
		return helperLeader()
	case selfKillHelper:
		return helperSelfKill()
	case hybridNoPidsHelper:
		return helperHybridNoPids()
	}
	fmt.Fprintf(os.Stderr, "unknown helper %q\n", name)
	return 2
}

// helperEnable moves this process into tdir, probes, then creates a sandbox
// cgroup enabling hugetlb, and reports what happened. The sandbox cgroup is
// left for the test to inspect and remove.
func helperEnable(tdir string) int {
	if err := cgroups.WriteCgroupProc(tdir, os.Getpid()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ok, reason := canEnableIn(tdir)
	fmt.Printf("probe=%v\nreason=%s\n", ok, reason)
	_, err := createV2(unifiedRoot, "sbx", Limits{}, []string{"hugetlb"})
	if err != nil {
		fmt.Printf("err=%v\ninternal=%v\n", err, errors.Is(err, ErrInternalProcesses))
	}
	own, err := ownV2Cgroup()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("own=%s\n", own)
	return 0
}
