//go:build linux && amd64

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStartLeavesHostMemoryWritable: the init's clone shares the host's
// address space (vfork_unsafe.go), so a start leaves none of the host's
// pages write-protected. A fork would: the host's next write to each page
// it had written before the start would fault.
func TestStartLeavesHostMemoryWritable(t *testing.T) {
	requireSandbox(t)
	const pages = 2048
	buf := make([]byte, pages*4096)
	touch := func() {
		for i := 0; i < len(buf); i += 4096 {
			buf[i]++
		}
	}
	touch()
	touch() // every page present and written
	res, err := Run(context.Background(), quick("true"), Stdio{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("sandbox: %v %+v", err, res)
	}
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	touch()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	// Other goroutines of the test may fault a little meanwhile.
	if faults := after.Minflt - before.Minflt; faults > pages/8 {
		t.Fatalf("writing %d pages after a start took %d page faults: the start write-protected the host's memory", pages, faults)
	}
}

// TestVforkReportsChildFailure: a step that fails in the clone's child
// (here its execve) comes back as the start's error, with the child
// reaped and no process set; a command asking for what the child does
// not do (a clone flag that is not a namespace) is left to os/exec.
func TestVforkReportsChildFailure(t *testing.T) {
	if err := probeHost().usernsErr; err != nil {
		t.Skipf("user namespaces unavailable: %v", err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	cmd := func(path string, flags uintptr) *exec.Cmd {
		c := exec.Command(path)
		c.ExtraFiles = []*os.File{null, null} // the init's two: startVfork takes five descriptors
		c.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  flags,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
			Credential:  &syscall.Credential{NoSetGroups: true},
		}
		return c
	}
	runtime.LockOSThread() // startVfork's precondition
	defer runtime.UnlockOSThread()
	c := cmd("/nonexistent/mcpbox-init", unix.CLONE_NEWUSER)
	err = startVfork(c)
	if err == nil || errors.Is(err, errNoVfork) || !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), "executing") {
		t.Fatalf("start of a missing binary: %v, want the child's execve error", err)
	}
	if c.Process != nil {
		t.Fatalf("process set after a failed start: %v", c.Process)
	}
	c = cmd("/bin/true", unix.CLONE_NEWUSER)
	if err := startVfork(c); err != nil {
		t.Fatalf("start of /bin/true: %v", err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("/bin/true: %v", err)
	}
	if err := startVfork(cmd("/bin/true", unix.CLONE_NEWUSER|unix.CLONE_FILES)); !errors.Is(err, errNoVfork) {
		t.Fatalf("CLONE_FILES: %v, want errNoVfork", err)
	}
}

// TestVforkClonesIntoV2Cgroup: the vfork start's clone3 with
// CLONE_INTO_CGROUP, which sandboxes take on cgroup v2 only (a hybrid
// host's use v1), puts the init in the cgroup from its first
// instruction. The test makes a v2 cgroup of its own beside this process
// on the v2 mount (a clone into it needs no controller) and starts the
// sandbox init as initCommand makes it for a user who is not root, by
// startVfork itself, so that no fallback to os/exec can hide a failure.
func TestVforkClonesIntoV2Cgroup(t *testing.T) {
	requireSandbox(t)
	mnt, own := v2Mount(t)
	dir := filepath.Join(mnt, own, fmt.Sprintf("mcpbox-vfork-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("no writable cgroup v2 here: %v", err)
	}
	var c *exec.Cmd
	t.Cleanup(func() {
		if c != nil && c.Process != nil && c.ProcessState == nil {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
		// A process that just exited may hold it for a moment.
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
	cgFD, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cgFD.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctl, child := os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control-child")
	defer ctl.Close()
	defer child.Close()
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer cfgR.Close()
	defer cfgW.Close()
	sb := &Sandbox{spec: quick("true")} // root false: the init's ids are this process's
	c = initCommand(sb, Stdio{}, child, cfgR)
	c.SysProcAttr.UseCgroupFD, c.SysProcAttr.CgroupFD = true, int(cgFD.Fd())
	runtime.LockOSThread() // startVfork's precondition; the init's parent-death signal follows it
	defer runtime.UnlockOSThread()
	if err := startVfork(c); err != nil {
		t.Fatalf("starting the init into %s: %v", dir, err)
	}
	pid := strconv.Itoa(c.Process.Pid)
	// The init waits for its config meanwhile.
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil || strings.TrimSpace(string(procs)) != pid {
		t.Errorf("%s holds %q (%v), want the init %s alone", dir, procs, err, pid)
	}
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	want := "0::" + filepath.Join("/", own, filepath.Base(dir)) + "\n"
	if err != nil || !strings.Contains(string(b), want) {
		t.Errorf("the init's /proc/PID/cgroup:\n%s(%v), want the line %q", b, err, want)
	}
	ctl.Close()
	cfgW.Close()
	err = c.Wait() // the init gives up without its config
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitSetup {
		t.Errorf("the init without a config: %v, want exit %d", err, exitSetup)
	}
}

// nofileChildEnv carries, to the test run again under a lowered soft
// limit on open files, that limit.
const nofileChildEnv = "MCPBOX_TEST_NOFILE_SOFT"

// TestWorkloadGetsTheNofileLimit: a workload gets the soft limit on open
// files that a plain child of the host gets, which os/exec restores to
// what the host started with (Go raised its own), whether the init was
// started by the vfork clone or by os/exec: both the init's start and the
// init's fork of the workload put it back. The test runs itself again
// under a soft limit below the hard one.
func TestWorkloadGetsTheNofileLimit(t *testing.T) {
	requireSandbox(t)
	want := os.Getenv(nofileChildEnv)
	if want == "" {
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
		const soft = 300
		if lim.Max < soft+2 {
			t.Skipf("hard limit on open files %d: no room below it", lim.Max)
		}
		cmd := exec.Command("/bin/sh", "-c", `ulimit -Sn `+strconv.Itoa(soft)+` && exec "$0" -test.run '^TestWorkloadGetsTheNofileLimit$' -test.v`, os.Args[0])
		cmd.Env = append(os.Environ(), nofileChildEnv+"="+strconv.Itoa(soft))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if strings.Contains(string(out), "--- SKIP") {
			t.Skipf("%s", out)
		}
		return
	}
	var now syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil || strconv.FormatUint(now.Cur, 10) == want {
		t.Fatalf("limit now %d (%v): Go did not raise the soft limit %s it started with", now.Cur, err, want)
	}
	plain, err := exec.Command("/bin/sh", "-c", "ulimit -Sn").Output()
	if err != nil || strings.TrimSpace(string(plain)) != want {
		t.Fatalf("a plain child's soft limit %q (%v), want %s", plain, err, want)
	}
	defer func() { testNoVfork = false }()
	for _, noVfork := range []bool{false, true} {
		testNoVfork = noVfork
		// A file: startVfork takes files only, and leaves other stdio
		// to os/exec.
		out, err := os.CreateTemp(t.TempDir(), "out")
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(context.Background(), quick("sh", "-c", "ulimit -Sn"), Stdio{Stdout: out})
		out.Close()
		got, _ := os.ReadFile(out.Name())
		if err != nil || res.ExitCode != 0 || strings.TrimSpace(string(got)) != want {
			t.Errorf("init started by os/exec %v: the workload's soft limit %q (%v, %+v), want a plain child's %s", noVfork, got, err, res, want)
		}
	}
}
