package sandbox

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
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
