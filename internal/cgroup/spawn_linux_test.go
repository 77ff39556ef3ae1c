package cgroup

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/cgroups"
)

// TestSpawnInside checks that a process started inside SpawnInside is
// born in every hierarchy of the cgroup, under its limits, and that the
// thread that started it, and the rest of this process, end up back where
// they were: a Kill of the sandbox's cgroup must not reach us.
func TestSpawnInside(t *testing.T) {
	requireControllers(t, "memory", "pids")
	if version() == "v2" {
		t.Skip("SpawnInside is for cgroup v1; v2 starts processes inside with DirFD")
	}
	c := create(t, Limits{Memory: 64 << 20, Pids: 20})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", "read _go")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SpawnInside(cmd.Start); err != nil {
		t.Fatalf("SpawnInside: %v", err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	after, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Errorf("the spawning thread did not move back:\nbefore %s\nafter %s", before, after)
	}
	pid := cmd.Process.Pid
	for ctrl, dir := range c.Paths() {
		procs := strings.Fields(readFile(t, dir+"/cgroup.procs"))
		if !slices.Equal(procs, []string{strconv.Itoa(pid)}) {
			t.Errorf("%s cgroup.procs = %v, want only the child %d (not this process, %d)", ctrl, procs, pid, os.Getpid())
		}
	}
	if st, err := c.Stats(); err != nil || st.PidsCurrent != 1 {
		t.Errorf("Stats() = %+v, %v; want PidsCurrent 1", st, err)
	}
	// Every thread of ours is outside: the sandbox's Kill spares us.
	m, err := cgroups.ParseCgroupFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		tm, err := cgroups.ParseCgroupFile("/proc/self/task/" + task.Name() + "/cgroup")
		if err != nil {
			continue // the thread ended
		}
		for _, ctrl := range v1Controllers {
			if tm[ctrl] != m[ctrl] {
				t.Errorf("thread %s is in %s cgroup %s, the process in %s", task.Name(), ctrl, tm[ctrl], m[ctrl])
			}
		}
	}
	if err := c.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Errorf("child exited with %v, want killed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("child still running 5s after Kill")
	}
}

// TestSpawnInsideStartFails checks that start's error comes back and the
// thread still moves back.
func TestSpawnInsideStartFails(t *testing.T) {
	requireControllers(t, "memory", "pids")
	if version() == "v2" {
		t.Skip("SpawnInside is for cgroup v1")
	}
	c := create(t, Limits{Pids: 20})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, _ := os.ReadFile("/proc/thread-self/cgroup")
	want := errors.New("no start")
	if err := c.SpawnInside(func() error { return want }); !errors.Is(err, want) {
		t.Fatalf("SpawnInside = %v, want %v", err, want)
	}
	after, _ := os.ReadFile("/proc/thread-self/cgroup")
	if string(after) != string(before) {
		t.Errorf("the thread did not move back:\nbefore %s\nafter %s", before, after)
	}
	if pids, err := c.Pids(); err != nil || len(pids) != 0 {
		t.Errorf("Pids() = %v, %v; want none", pids, err)
	}
}

// TestDirFDClonesInto starts a process with CLONE_INTO_CGROUP on the fd
// DirFD gives, on the hybrid host's v2 mount: it is born in the cgroup.
func TestDirFDClonesInto(t *testing.T) {
	requireRoot(t)
	requireHybridV2(t)
	c := createUnified(t)
	f, err := c.DirFD()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("/bin/sh", "-c", "read _go")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting into the cgroup: %v", err)
	}
	defer func() {
		stdin.Close()
		_ = cmd.Wait()
	}()
	procs := strings.Fields(readFile(t, c.Paths()["unified"]+"/cgroup.procs"))
	if !slices.Equal(procs, []string{strconv.Itoa(cmd.Process.Pid)}) {
		t.Errorf("cgroup.procs = %v, want only %d", procs, cmd.Process.Pid)
	}
	if _, err := create(t, Limits{}).DirFD(); version() != "v2" && !errors.Is(err, ErrUnsupported) {
		t.Errorf("DirFD of a v1 cgroup: %v, want ErrUnsupported", err)
	}
}
