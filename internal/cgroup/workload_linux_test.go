package cgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
)

// TestWorkloadCgroup: a cgroup with a WorkloadPids limit nests one for
// the workload, whose limit is the workload's alone once it is in: on v1
// a thread steps in to fork it, steps out and sets the limit; on v2 a
// clone puts it there. The processes in it count for the sandbox
// (Pids), and Destroy and CleanupStale remove the nested cgroups with it.
func TestWorkloadCgroup(t *testing.T) {
	requireControllers(t, "pids")
	const total, own = 10, 3
	c := create(t, Limits{Pids: total, WorkloadPids: own})
	w, err := c.Workload(-1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var wdir string
	cmd := exec.Command("sleep", "30")
	if w.Dir != nil { // v2
		wdir = w.Dir.Name()
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(w.Dir.Fd())}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	} else {
		wdir = filepath.Dir(w.Into.Name())
		if got := readFile(t, filepath.Join(wdir, "pids.max")); got != strconv.Itoa(own+1) {
			t.Errorf("v1 workload pids.max before the fork = %s, want room for the forking thread, %d", got, own+1)
		}
		done := make(chan error, 1)
		// Back is the sandbox's cgroup, where an init's thread comes
		// from, not this process's: the thread goes home after it, where
		// the sandbox's directory was made. Left in the sandbox's, it
		// would keep the cgroup busy: a goroutine that ends locked ends
		// its thread, but not the main thread, which the runtime parks.
		home, err := os.OpenFile(filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(wdir))), "tasks"), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer home.Close()
		go func() {
			runtime.LockOSThread()
			if _, err := w.Into.Write([]byte("0")); err != nil {
				done <- err
				return // locked: the thread ends with the goroutine
			}
			err := cmd.Start()
			if _, berr := w.Back.Write([]byte("0")); berr != nil {
				done <- berr
				return
			}
			if _, herr := home.Write([]byte("0")); herr != nil {
				done <- herr
				return
			}
			runtime.UnlockOSThread()
			done <- err
		}()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, err := w.Max.Write([]byte(strconv.FormatInt(w.Pids, 10))); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	if got := readFile(t, filepath.Join(wdir, "pids.max")); got != strconv.Itoa(own) {
		t.Errorf("workload pids.max = %s, want %d", got, own)
	}
	if got := readFile(t, filepath.Join(wdir, "cgroup.procs")); got != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("workload cgroup holds %q, want the child %d alone", got, cmd.Process.Pid)
	}
	if pids, err := c.Pids(); err != nil || !slices.Contains(pids, cmd.Process.Pid) {
		t.Errorf("Pids() = %v, %v: the workload's child is the sandbox's too", pids, err)
	}

	// A stale one, nested cgroup and all, goes.
	stale, err := Create(testID(), Limits{Pids: total, WorkloadPids: own})
	if err != nil {
		t.Fatal(err)
	}
	ageDirs(t, dirsOf(stale)...)
	if _, err := CleanupStale(); err != nil {
		t.Errorf("CleanupStale: %v", err)
	}
	for _, d := range dirsOf(stale) {
		if exists(d) {
			t.Errorf("stale %s still exists", d)
			_ = stale.Destroy()
		}
	}
}
