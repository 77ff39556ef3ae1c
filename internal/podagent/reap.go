//go:build linux

package podagent

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// reaper waits for the orphans the kernel hands a container's PID 1 (the
// agent, as a pod's entrypoint): processes the server started and left,
// which would otherwise stay zombies until the pod ends. The server itself
// is left to its exec.Cmd.
type reaper struct {
	// mu is held while the server starts, so that a server that ends at
	// once is not reaped before its pid is known.
	mu     sync.Mutex
	server atomic.Int64 // the server's pid, once started
}

// subreaper makes the agent the reaper of its descendants' orphans even
// when it is not PID 1.
func subreaper() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return fmt.Errorf("becoming a subreaper: %w", errno)
	}
	return nil
}

const prSetChildSubreaper = 36 // PR_SET_CHILD_SUBREAPER, linux/prctl.h

// starting runs start (which starts the server) with reaping held off.
func (r *reaper) starting(start func() (pid int, err error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := start()
	if err == nil {
		r.server.Store(int64(pid))
	}
	return err
}

// run reaps on every SIGCHLD (and every few seconds, in case signals
// merged) until ctx ends.
func (r *reaper) run(ctx context.Context) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGCHLD)
	defer signal.Stop(ch)
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-tick.C:
		}
		r.reap()
	}
}

// reap waits for each child that is a zombie, except the server.
func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, field := range bytes.Fields(b) {
			pid, err := strconv.Atoi(string(field))
			if err != nil || int64(pid) == r.server.Load() || !zombie(pid) {
				continue
			}
			var st syscall.WaitStatus
			syscall.Wait4(pid, &st, syscall.WNOHANG, nil)
		}
	}
}

// zombie reports whether process pid has ended and awaits its parent.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which may hold spaces or ')'.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
