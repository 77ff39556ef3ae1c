package kubetest

import (
	"os/exec"
	"runtime"
	"sync"

	"mcpbox/internal/procgroup"
)

// Every process kubetest starts gets PDEATHSIG SIGKILL, so a test binary
// that dies without its cleanups (a go test timeout) takes the control
// plane and the pods with it. The kernel sends that signal when the
// forking thread exits, not the process, so, as in package sandbox, all
// forks happen on one thread locked for the life of the process.
var (
	spawnOnce sync.Once
	spawnReqs chan func()
)

// startCmd starts cmd on the spawn thread.
func startCmd(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnReqs = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for f := range spawnReqs {
				f()
			}
		}()
	})
	done := make(chan error, 1)
	spawnReqs <- func() { done <- cmd.Start() }
	return <-done
}

// startLeader starts cmd, which leads its own process group (Setpgid), on
// the spawn thread and holds that group by a pidfd of the leader, opened
// before anything can reap it: the kills at the end reach this group only,
// never one that another program (a sandbox init, timeout(1)) leads under
// the same number after the leader was reaped.
func startLeader(cmd *exec.Cmd) (*procgroup.Group, error) {
	if err := startCmd(cmd); err != nil {
		return nil, err
	}
	return procgroup.OpenStarted(cmd)
}
