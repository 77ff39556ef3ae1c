package procgroup

import (
	"bytes"
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

	"golang.org/x/sys/unix"
)

const reuseHelperEnv = "MCPBOX_PROCGROUP_REUSE_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(reuseHelperEnv); mode != "" {
		if err := reuseHelper(mode == "bynumber"); err != nil {
			fmt.Fprintln(os.Stderr, "reuse helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// waitExit waits up to 10 s for the process of pidfd fd to exit.
func waitExit(fd int) error {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		n, err := unix.Poll(fds, 100)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		if n > 0 {
			return nil
		}
	}
	return errors.New("still running after 10 s")
}

// A leader that has exited and been reaped leaves its background child in
// the group: Signal still reaches it (as kill(-pgid) does while the group
// has members). Before Linux 6.9 (bynumber) a reaped leader's group is
// left alone instead: its number can no longer be trusted.
func TestSignalAfterLeaderReaped(t *testing.T) {
	for _, bn := range []bool{false, true} {
		t.Run(map[bool]string{false: "pidfd", true: "bynumber"}[bn], func(t *testing.T) {
			byNumber = bn
			t.Cleanup(func() { byNumber = false })
			var out bytes.Buffer
			cmd := exec.Command("/bin/sh", "-c", "sleep 30 </dev/null >/dev/null 2>&1 & echo $!")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Stdout = &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			g, err := Open(cmd.Process)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if err := cmd.Wait(); err != nil {
				t.Fatal(err)
			}
			member, err := strconv.Atoi(strings.TrimSpace(out.String()))
			if err != nil {
				t.Fatalf("member pid %q: %v", out.String(), err)
			}
			// The member is alive (sleep 30) and the leader's group holds
			// its number, so the pidfd is the member's.
			mfd, err := unix.PidfdOpen(member, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(mfd)
			defer unix.PidfdSendSignal(mfd, unix.SIGKILL, nil, 0)
			if pg, err := unix.Getpgid(member); err != nil || pg != cmd.Process.Pid {
				t.Fatalf("premise: member %d in group %d (%v), want %d", member, pg, err, cmd.Process.Pid)
			}
			err = g.Signal(unix.SIGKILL)
			if bn {
				if !errors.Is(err, os.ErrProcessDone) {
					t.Fatalf("Signal after the leader was reaped (by number): %v, want ErrProcessDone", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Signal: %v", err)
			}
			if err := waitExit(mfd); err != nil {
				t.Fatalf("the member of the reaped leader's group: %v", err)
			}
		})
	}
}

// The attack: the leader is reaped, its group empties, and the kernel
// gives its number to a new process that leads a group of its own (here
// forced with ns_last_pid in a private pid namespace; on a busy host with
// pid_max 32768 it happens by itself within minutes). kill(-number) now
// reaches the newcomer; Signal must not.
func TestSignalSparesReusedNumber(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: ns_last_pid of a private pid namespace")
	}
	for _, mode := range []string{"pidfd", "bynumber"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), reuseHelperEnv+"="+mode)
			cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWPID, Pdeathsig: unix.SIGKILL}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// reuseHelper runs as pid 1 of a private pid namespace: see
// TestSignalSparesReusedNumber.
func reuseHelper(bn bool) error {
	byNumber = bn
	a := exec.Command("/bin/true")
	a.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := a.Start(); err != nil {
		return err
	}
	g, err := Open(a.Process)
	if err != nil {
		return err
	}
	defer g.Close()
	if err := a.Wait(); err != nil {
		return err
	}
	num := a.Process.Pid
	var b *exec.Cmd
	for range 100 { // a runtime thread may take the number first
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(num-1)), 0); err != nil {
			return err
		}
		c := exec.Command("/bin/sleep", "30")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			return err
		}
		if c.Process.Pid == num {
			b = c
			break
		}
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	if b == nil {
		return fmt.Errorf("could not give pid %d to a new process", num)
	}
	defer func() { _ = b.Process.Kill(); _ = b.Wait() }()
	// The premise: the number now names the newcomer's group.
	if err := unix.Kill(-num, 0); err != nil {
		return fmt.Errorf("premise: kill(-%d, 0): %v", num, err)
	}
	if err := g.Signal(unix.SIGKILL); !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("Signal to the reaped leader's group: %v, want ErrProcessDone", err)
	}
	time.Sleep(100 * time.Millisecond) // a SIGKILL sent would have acted
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, num, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil {
		return err
	}
	if info.Signo != 0 {
		return fmt.Errorf("the newcomer holding pid %d was killed", num)
	}
	return nil
}
