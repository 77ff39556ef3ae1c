package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"mcpbox/internal/cgroup"
)

// forkLoop forks sleeps in the background, one line per fork that
// succeeded, until one is refused: dash then gives up ("Cannot fork",
// exit 2). Only builtins besides the sleeps.
const forkLoop = `i=0; while [ $i -lt 40 ]; do sleep 30 & echo forked; i=$((i+1)); done; wait`

// TestPidsLimitIsTheWorkloads: Limits.Pids holds on the workload's own
// processes and threads, exactly, and however many it forks the init
// keeps the threads its runtime needs (initTasks): it reaps the workload,
// reports its status and the pids exhaustion, and the sandbox's cgroups
// are removed. Without a cgroup of the workload's own, the workload took
// the init's share too (more forks than its limit), and a Go runtime that
// then could not start a thread crashed the init.
func TestPidsLimitIsTheWorkloads(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root for cgroups on this kind of host")
	}
	for _, pids := range []int64{1, 3, 5} {
		spec := Spec{Args: []string{"sh", "-c", forkLoop}, Limits: Limits{Memory: 256 << 20, Pids: pids, Timeout: time.Minute}}
		var out, errb syncBuffer
		sb, err := Start(context.Background(), spec, Stdio{Stdout: &out, Stderr: &errb})
		if err != nil {
			t.Fatalf("--pids %d: %v", pids, err)
		}
		cg := sb.cgroup()
		if cg == nil {
			t.Fatalf("--pids %d: no cgroup", pids)
		}
		dirs := cg.Paths()
		res, err := sb.Wait()
		if err != nil {
			t.Fatalf("--pids %d: %v", pids, err)
		}
		// The workload is one of the pids: sh and pids-1 sleeps.
		forked := int64(strings.Count(out.String(), "forked\n"))
		if forked != pids-1 || res.ExitCode != 2 || !res.PidsExhausted || res.TimedOut {
			t.Errorf("--pids %d: %d forks, exit %d, %+v, want %d forks refused then, exit 2 (dash's), pids exhausted\nstderr: %s",
				pids, forked, res.ExitCode, res, pids-1, errb.String())
		}
		if !strings.Contains(errb.String(), "Cannot fork") || strings.Contains(errb.String(), "runtime") {
			t.Errorf("--pids %d: stderr %q, want dash's refused fork and nothing from the init", pids, errb.String())
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Errorf("--pids %d: cgroup %s left after Wait (%v)", pids, d, err)
			}
		}
	}
}

// TestForkBombSparesTheInit: a workload that keeps forking under a small
// pids limit (forkBomb: 100 tries) gets exactly its limit, every other
// fork refused, while the init, whose share the bomb cannot reach, goes
// on: it reaps and reports the workload's own exit.
func TestForkBombSparesTheInit(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root for cgroups on this kind of host")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 to fork with")
	}
	const pids = 3
	spec := Spec{Args: []string{"python3", "-c", forkBomb}, Limits: Limits{Memory: 256 << 20, Pids: pids, Timeout: time.Minute}}
	var out, errb syncBuffer
	res, err := Run(context.Background(), spec, Stdio{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		got[k], _ = strconv.Atoi(v)
	}
	// python3 is one of the pids.
	if res.ExitCode != 0 || !res.PidsExhausted || got["forked"] != pids-1 || got["refused"] != 100-(pids-1) {
		t.Fatalf("fork bomb under --pids %d: exit %d, %+v, %v, want %d forked and the rest refused\nstderr: %s",
			pids, res.ExitCode, res, got, pids-1, errb.String())
	}
}

// v2Mount returns the cgroup v2 mount (a v2 host's or a hybrid host's)
// and this process's cgroup in it, or skips.
func v2Mount(t *testing.T) (mnt, own string) {
	t.Helper()
	for _, m := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st unix.Statfs_t
		if unix.Statfs(m, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			mnt = m
			break
		}
	}
	if mnt == "" {
		t.Skip("no cgroup v2 mount")
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return mnt, p
		}
	}
	t.Skip("no cgroup v2 entry in /proc/self/cgroup")
	return "", ""
}

// TestWorkloadClonedIntoCgroupV2: the init's way on cgroup v2, a clone
// with CLONE_INTO_CGROUP into the workload's cgroup (a hybrid host's
// sandboxes take the v1 way). The test hands the init a cgroup of its own
// on the v2 mount (a clone into it needs no controller) in place of the
// workload cgroup, and finds the workload there, its cgroup namespace
// rooted at it.
func TestWorkloadClonedIntoCgroupV2(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root for cgroups on this kind of host")
	}
	mnt, own := v2Mount(t)
	dir := filepath.Join(mnt, own, fmt.Sprintf("mcpbox-workload-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("no writable cgroup v2 here: %v", err)
	}
	t.Cleanup(func() {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			err := unix.Rmdir(dir)
			if err == nil || err == unix.ENOENT {
				break
			}
			if err != unix.EBUSY || time.Now().After(deadline) {
				t.Errorf("removing %s: %v", dir, err)
				break
			}
		}
	})
	testHookWorkloadCgroup = func(uid int) (*cgroup.WorkloadFiles, error) {
		if uid != -1 { // the init's uid, as for the sandbox's own cgroup
			if err := os.Chown(filepath.Join(dir, "cgroup.procs"), uid, -1); err != nil {
				return nil, err
			}
			if err := os.Chown(filepath.Join(filepath.Dir(dir), "cgroup.procs"), uid, -1); err != nil {
				return nil, err
			}
		}
		d, err := os.Open(dir)
		return &cgroup.WorkloadFiles{Dir: d}, err
	}
	defer func() { testHookWorkloadCgroup = nil }()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	spec := Spec{Args: []string{"sh", "-c", "cat /proc/self/cgroup; read _; exit 0"}, Limits: Limits{Memory: 256 << 20, Pids: 8, Timeout: time.Minute}}
	var out syncBuffer
	sb, err := Start(context.Background(), spec, Stdio{Stdin: r, Stdout: &out})
	if err != nil {
		w.Close()
		t.Fatal(err)
	}
	var procs []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !strings.Contains(out.String(), "\n0::"); time.Sleep(10 * time.Millisecond) {
	}
	procs, _ = os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	w.Close()
	res, err := sb.Wait()
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("sandbox: %v %+v", err, res)
	}
	// sh, and cat or read's sh: the workload's processes only.
	if n := len(strings.Fields(string(procs))); n == 0 || n > 2 {
		t.Errorf("%s holds %q, want the workload", dir, procs)
	}
	if !strings.Contains(out.String(), "0::/\n") {
		t.Errorf("the workload's /proc/self/cgroup:\n%s\nwant its v2 cgroup as its namespace's root, 0::/", out.String())
	}
}

// TestWorkloadInItsV1PidsCgroup: on cgroup v1 the workload, and only it,
// is in its sandbox's nested pids cgroup, under its own limit exactly
// (no room left there for a thread of the init), and its cgroup
// namespace is rooted there, as a child born inside would have it.
func TestWorkloadInItsV1PidsCgroup(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root for cgroups on this kind of host")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	spec := Spec{Args: []string{"sh", "-c", "cat /proc/self/cgroup; read _; exit 0"}, Limits: Limits{Memory: 256 << 20, Pids: 8, Timeout: time.Minute}}
	var out syncBuffer
	sb, err := Start(context.Background(), spec, Stdio{Stdin: r, Stdout: &out})
	if err != nil {
		w.Close()
		t.Fatal(err)
	}
	defer func() {
		w.Close()
		_, _ = sb.Wait()
	}()
	cg := sb.cgroup()
	if cg == nil {
		t.Fatal("no cgroup")
	}
	dir, ok := cg.Paths()["pids"]
	if !ok {
		t.Skip("no v1 pids hierarchy on this host")
	}
	leaf := filepath.Join(dir, "workload")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !strings.Contains(out.String(), ":pids:"); time.Sleep(10 * time.Millisecond) {
	}
	tasks, err := os.ReadFile(filepath.Join(leaf, "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	init := strconv.Itoa(sb.cmd.Process.Pid)
	initTasks, _ := os.ReadDir("/proc/" + init + "/task")
	for _, tid := range strings.Fields(string(tasks)) {
		for _, it := range initTasks {
			if it.Name() == tid {
				t.Errorf("%s holds the init's thread %s: %q", leaf, tid, tasks)
			}
		}
	}
	// sh, and cat or read's sh: the workload's processes only.
	if n := len(strings.Fields(string(tasks))); n == 0 || n > 2 {
		t.Errorf("%s holds %q, want the workload", leaf, tasks)
	}
	if max, _ := os.ReadFile(filepath.Join(leaf, "pids.max")); strings.TrimSpace(string(max)) != "8" {
		t.Errorf("%s: pids.max %q, want the workload's limit 8", leaf, max)
	}
	if !strings.Contains(out.String(), ":pids:/\n") {
		t.Errorf("the workload's /proc/self/cgroup:\n%s\nwant its pids cgroup as its namespace's root, :pids:/", out.String())
	}
}

// TestWorkloadCgroupMoveFailsClosed: when the workload cannot be put
// into its nested v1 pids cgroup (here the tasks file handed to the init
// is not writable), the start fails, as a cgroups failure, and no
// workload runs outside its limit.
func TestWorkloadCgroupMoveFailsClosed(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root for cgroups on this kind of host")
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	own := ""
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && f[1] == "pids" {
			own = f[2]
		}
	}
	mnt := "/sys/fs/cgroup/pids"
	var st unix.Statfs_t
	if own == "" || unix.Statfs(mnt, &st) != nil || st.Type != unix.CGROUP_SUPER_MAGIC {
		t.Skip("no v1 pids hierarchy")
	}
	dir := filepath.Join(mnt, own, fmt.Sprintf("mcpbox-wfail-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("no writable v1 pids cgroup here: %v", err)
	}
	t.Cleanup(func() {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			err := unix.Rmdir(dir)
			if err == nil || err == unix.ENOENT {
				break
			}
			if err != unix.EBUSY || time.Now().After(deadline) {
				t.Errorf("removing %s: %v", dir, err)
				break
			}
		}
	})
	testHookWorkloadCgroup = func(int) (*cgroup.WorkloadFiles, error) {
		w := &cgroup.WorkloadFiles{Pids: 4}
		var err error
		if w.Into, err = os.Open(filepath.Join(dir, "tasks")); err != nil { // read-only
			return nil, err
		}
		if w.Back, err = os.OpenFile(filepath.Join(filepath.Dir(dir), "tasks"), os.O_WRONLY, 0); err != nil {
			w.Close()
			return nil, err
		}
		if w.Max, err = os.OpenFile(filepath.Join(dir, "pids.max"), os.O_WRONLY, 0); err != nil {
			w.Close()
			return nil, err
		}
		return w, nil
	}
	defer func() { testHookWorkloadCgroup = nil }()
	spec := Spec{Args: []string{"true"}, Limits: Limits{Memory: 256 << 20, Pids: 4, Timeout: time.Minute}}
	res, err := Run(context.Background(), spec, Stdio{})
	var se *StartError
	if !errors.As(err, &se) || se.Layer != LayerCgroups || !strings.Contains(err.Error(), "moving into the workload's cgroup") {
		t.Fatalf("start with an unwritable tasks file: %v, %+v; want a cgroups start error moving into the workload's cgroup", err, res)
	}
	if tasks, _ := os.ReadFile(filepath.Join(dir, "tasks")); len(strings.TrimSpace(string(tasks))) != 0 {
		t.Errorf("%s holds %q after the failed start", dir, tasks)
	}
}
