//go:build linux

package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const reuseHelperEnv = "KUBETEST_REUSE_HELPER"

func init() {
	// Runs before TestMain: the helper needs none of the test set-up.
	if os.Getenv(reuseHelperEnv) == "1" {
		if err := reuseHelper(); err != nil {
			fmt.Fprintln(os.Stderr, "reuse helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// A container that ended during another container's grace period is
// still killed when that grace runs out (killAll), and terminated every
// second before. By then its unshare's number may belong to another
// program: here, forced with ns_last_pid in a private pid namespace,
// timeout(1) running a command, as scripts/bench.sh runs each benchmark (a
// test binary's sandbox init, another group leader with a child, is as
// likely to get the number). kill and terminate must leave it alone; the
// old kill by number (kill(-pid), and SIGKILL to the first child listed
// in /proc/PID/task/PID/children) ended both.
func TestContainerKillSparesReusedPid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: ns_last_pid of a private pid namespace")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), reuseHelperEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// reuseHelper runs as pid 1 of a private pid namespace: see
// TestContainerKillSparesReusedPid.
func reuseHelper() error {
	// A /proc of this namespace, in a mount namespace of its own.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return err
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return err
	}
	old := exec.Command("/bin/true")
	old.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p, err := startContainerProc(old)
	if err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		return errors.New("the container did not end")
	}
	num := old.Process.Pid
	var victim *exec.Cmd
	for range 100 { // a runtime thread may take the number first
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(num-1)), 0); err != nil {
			return err
		}
		// As scripts/bench.sh runs a benchmark: timeout(1) puts itself
		// in a group of its own and runs the benchmark as its child.
		c := exec.Command("timeout", "30", "sleep", "30")
		if err := c.Start(); err != nil {
			return err
		}
		if c.Process.Pid == num {
			victim = c
			break
		}
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	if victim == nil {
		return fmt.Errorf("could not give pid %d to a new process", num)
	}
	defer func() { _ = syscall.Kill(-num, syscall.SIGKILL); _ = victim.Wait() }() // our own, unreaped
	// The premise: the number now leads a group, and has a child.
	var kids string
	for end := time.Now().Add(5 * time.Second); kids == "" && time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", num, num))
		kids = strings.TrimSpace(string(b))
	}
	if kids == "" {
		return errors.New("premise: the newcomer has no child")
	}
	if err := syscall.Kill(-num, 0); err != nil {
		return fmt.Errorf("premise: kill(-%d, 0): %v", num, err)
	}
	p.terminate()
	p.kill()
	time.Sleep(100 * time.Millisecond) // a signal sent would have acted
	var st syscall.WaitStatus
	if got, err := syscall.Wait4(num, &st, syscall.WNOHANG, nil); err != nil || got != 0 {
		return fmt.Errorf("the newcomer holding pid %d ended (%v, %v)", num, st, err)
	}
	child, _ := strconv.Atoi(strings.Fields(kids)[0])
	if err := syscall.Kill(child, 0); err != nil {
		return fmt.Errorf("the newcomer's child %d ended: %v", child, err)
	}
	return nil
}
