//go:build linux && amd64

package initproc

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"mcpbox/internal/landlock"
)

// TestColdWorkloadSharesMemory: a cold start's workload is cloned sharing
// the init's address space (vfork_unsafe.go), so the start leaves none
// of the init's pages write-protected, as a copy would. The child puts
// its walls up on itself: the workload runs with no_new_privs, no
// capabilities and, where the kernel has it, in a Landlock domain of its
// own, none of which reaches the caller's thread; and the shared address
// space is non-dumpable before the workload runs. Run here in the test
// process, which stands for the init.
func TestColdWorkloadSharesMemory(t *testing.T) {
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		t.Skip("no user namespaces")
	}
	// The child's non-dumpable flag is the test process's too: put back.
	defer unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
	dir, other := t.TempDir(), t.TempDir()
	out := filepath.Join(dir, "status")
	c := &workloadConfig{
		Args: []string{"sh", "-c", "grep -E '^(NoNewPrivs|CapEff|CapBnd):' /proc/self/status > " + out + "; (echo x > " + other + "/probe) 2>/dev/null && echo walls-down >> " + out + "; exit 0"},
		Env:  []string{"PATH=/usr/bin:/bin"},
		Dir:  "/",
	}
	if landlock.ABI() == 0 {
		c.NoLandlock = true
	} else {
		c.Landlock = []pathRule{{Path: "/", Read: true, Exec: true}, {Path: "/dev/null", Read: true, Write: true}, {Path: dir, Read: true, Write: true}}
	}
	const pages = 2048
	buf := make([]byte, pages*4096)
	touch := func() {
		for i := 0; i < len(buf); i += 4096 {
			buf[i]++
		}
	}
	touch()
	touch() // every page present and written
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, werr := startCold(c)
	if werr != nil {
		t.Fatalf("starting the workload: %+v", werr)
	}
	if d, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); d != 0 {
		t.Errorf("the starting process is dumpable (%d) once the workload runs", d)
	}
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	touch()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
			break
		}
	}
	if !ws.Exited() || ws.ExitStatus() != 0 {
		t.Fatalf("workload ended with %v", ws)
	}
	// Other goroutines of the test may fault a little meanwhile.
	if faults := after.Minflt - before.Minflt; faults > pages/8 {
		t.Errorf("writing %d pages after a start took %d page faults: the start write-protected the starter's memory", pages, faults)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"NoNewPrivs:\t1", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000"} {
		if !strings.Contains(got, want) {
			t.Errorf("the workload's status lacks %q:\n%s", want, got)
		}
	}
	if !c.NoLandlock && strings.Contains(got, "walls-down") {
		t.Errorf("the workload wrote outside its Landlock rules:\n%s", got)
	}
	self, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(self), "NoNewPrivs:\t0") {
		t.Error("no_new_privs reached the starting thread")
	}
	// The starting thread is in no Landlock domain: it may still write
	// outside the workload's rules.
	if err := os.WriteFile(filepath.Join(t.TempDir(), "after"), nil, 0o600); err != nil {
		t.Errorf("the starting thread was walled: %v", err)
	}
}
