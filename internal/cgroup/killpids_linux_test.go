package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
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

// selfKillHelper is the helper scenario of TestKillPidsSparesThisProcess.
const selfKillHelper = "selfkill"

// killPids never signals this process, though a cgroup listing names it
// (on v1, for a thread of ours in the cgroup): in a helper process, which
// would die of it.
func TestKillPidsSparesThisProcess(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+selfKillHelper)
	timer := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
	out, err := cmd.CombinedOutput()
	timer.Stop()
	if err != nil || strings.TrimSpace(string(out)) != "survived" {
		t.Fatalf("killPids of a listing naming the helper itself: %v\n%s", err, out)
	}
}

func helperSelfKill() int {
	self := []int{os.Getpid()}
	if err := killPids(self, func() ([]int, error) { return self, nil }); err != nil {
		fmt.Println(err)
		return 1
	}
	time.Sleep(100 * time.Millisecond) // a SIGKILL sent would have acted
	fmt.Println("survived")
	return 0
}
