package cgroup

import (
	"os/exec"
	"testing"
	"time"
)

// killPids signals a listed pid only if the listing after its pidfd was
// opened still names it: a pid that left the cgroup (exited, and its
// number given to a process elsewhere) is not killed.
func TestKillPidsChecksMembershipAfterOpening(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	pid := cmd.Process.Pid

	// Listed once, gone from the cgroup by the check: spared.
	if err := killPids([]int{pid}, func() ([]int, error) { return []int{pid + 1}, nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		t.Fatal("killPids killed a pid the second listing no longer named")
	case <-time.After(200 * time.Millisecond):
	}
	// Still listed: killed.
	if err := killPids([]int{pid}, func() ([]int, error) { return []int{pid}, nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("killPids did not kill a pid the second listing named")
	}
}
