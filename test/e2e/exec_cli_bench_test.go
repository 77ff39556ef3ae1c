package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkExecCLI is `mcpbox exec -- /bin/true` as a user runs it, the
// CLI's own start-up included, against plain exec and bubblewrap started
// in turn in every round (as internal/sandbox's BenchmarkExecTrue does for
// the library), so that load on the host shifts both sides alike:
//
//   - mcpbox, mcpbox-nolimits: mcpbox with no mcpbox-init next to it, which
//     re-executes itself as the sandbox init and so pays its own start-up
//     twice: the binary TestMain built (no VCS stamp), or, with
//     MCPBOX_BENCH_BIN, a copy of that mcpbox alone in a temp dir;
//   - lean, lean-nolimits: MCPBOX_BENCH_BIN's mcpbox, with the mcpbox-init
//     of the same -buildvcs=true build next to it (scripts/bench.sh and
//     scripts/bench-density.sh build them from a clean clone), which is
//     what an install per docs/quickstart.md runs. Checked, not assumed:
//     the benchmark fails if its sandbox init is not mcpbox-init.
//
// Each reports ms-over-plain and x-bwrap (wall time), and cpu-ms/op and
// cpu-x-bwrap: the user and system time of the command and of all its
// descendants, from wait4, which other load inflates much less than wall
// time. bwrap exits without reaping the sandbox's pid 1, which then tears
// down the namespaces (~3 ms of CPU) as an orphan whose time its parent's
// wait4 never sees; the benchmark is a child subreaper and reaps such
// orphans itself, so that their time counts, for every command alike.
//
//	MCPBOX_BENCH_BIN=DIR go test ./test/e2e -run '^$' -bench ExecCLI -count 5
func BenchmarkExecCLI(b *testing.B) {
	bwrap, _ := exec.LookPath("bwrap")
	if err := setSubreaper(true); err != nil {
		b.Fatalf("becoming a child subreaper: %v", err)
	}
	b.Cleanup(func() { _ = setSubreaper(false) })
	leanDir := os.Getenv("MCPBOX_BENCH_BIN")
	alone := mcpboxBin
	if leanDir != "" {
		alone = filepath.Join(b.TempDir(), "mcpbox")
		copyExec(b, filepath.Join(leanDir, "mcpbox"), alone)
	}
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			timedRun(b, "/bin/true")
			b.StopTimer()
			reapOrphans(b)
			b.StartTimer()
		}
	})
	b.Run("bwrap", func(b *testing.B) {
		if bwrap == "" {
			b.Skip("bwrap not installed (apt-get install bubblewrap)")
		}
		for b.Loop() {
			timedRun(b, bwrap, bwrapArgs...)
			b.StopTimer() // bwrap has returned; its orphan is not waited for
			reapOrphans(b)
			b.StartTimer()
		}
	})
	for _, c := range []struct {
		name  string
		lean  bool
		flags []string
	}{
		{"mcpbox", false, nil},
		{"mcpbox-nolimits", false, []string{"--memory", "0", "--pids", "0"}},
		{"lean", true, nil},
		{"lean-nolimits", true, []string{"--memory", "0", "--pids", "0"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			bin := alone
			if c.lean {
				if leanDir == "" {
					b.Skip("MCPBOX_BENCH_BIN: a directory with mcpbox and mcpbox-init of one -buildvcs=true build (scripts/bench.sh builds them)")
				}
				bin = filepath.Join(leanDir, "mcpbox")
			}
			checkInitBinary(b, bin, c.lean)
			args := append(append([]string{"exec"}, c.flags...), "--", "/bin/true")
			timedRun(b, bin, args...) // warm: the first start probes the host
			reapOrphans(b)
			var own, base, bwrapT, ownCPU, bwrapCPU time.Duration
			for b.Loop() {
				// Wall times end when the command returns; CPU times
				// also count the orphans it left.
				w, cpu := timedRun(b, bin, args...)
				b.StopTimer()
				cpu += reapOrphans(b)
				pw, _ := timedRun(b, "/bin/true")
				reapOrphans(b)
				var bw, bcpu time.Duration
				if bwrap != "" {
					bw, bcpu = timedRun(b, bwrap, bwrapArgs...)
					bcpu += reapOrphans(b)
				}
				b.StartTimer()
				own += w
				base += pw
				bwrapT += bw
				ownCPU += cpu
				bwrapCPU += bcpu
			}
			n := float64(b.N)
			b.ReportMetric((own-base).Seconds()*1e3/n, "ms-over-plain")
			b.ReportMetric(ownCPU.Seconds()*1e3/n, "cpu-ms/op")
			if bwrap != "" {
				b.ReportMetric(float64(own)/float64(bwrapT), "x-bwrap")
				b.ReportMetric(float64(ownCPU)/float64(bwrapCPU), "cpu-x-bwrap")
			}
		})
	}
}

// timedRun runs name until it returns and returns its wall time and the
// CPU time of it and of the descendants it reaped (wait4's rusage); the
// caller adds those of the orphans it left (reapOrphans).
func timedRun(b *testing.B, name string, args ...string) (wall, cpu time.Duration) {
	b.Helper()
	cmd := exec.Command(name, args...)
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	wall = time.Since(t0)
	if err != nil {
		b.Fatalf("%s: %v: %s", name, err, out)
	}
	return wall, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// reapOrphans waits, up to 10 s, for every child this process has left
// (the benchmark starts one command at a time, so these are orphans of
// the last one) and returns their CPU time.
func reapOrphans(b *testing.B) time.Duration {
	b.Helper()
	var cpu time.Duration
	for end := time.Now().Add(10 * time.Second); ; {
		var ws unix.WaitStatus
		var ru unix.Rusage
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG|waitAll, &ru)
		switch {
		case err == unix.ECHILD:
			return cpu
		case err == unix.EINTR:
		case err != nil:
			b.Fatalf("reaping orphans: %v", err)
		case pid > 0:
			cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		case time.Now().After(end):
			b.Fatal("an orphan of the last command still runs after 10 s")
		default:
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// checkInitBinary fails b unless bin's sandbox init is mcpbox-init (lean)
// or mcpbox itself (not lean): it starts `bin exec -- cat`, reads the
// executable of the init, and ends the sandbox.
func checkInitBinary(b *testing.B, bin string, lean bool) {
	b.Helper()
	cmd := exec.Command(bin, "exec", "--", "cat")
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		in.Close() // cat reads EOF and exits, and the sandbox with it
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	exe := ""
	for end := time.Now().Add(20 * time.Second); exe == ""; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			b.Fatalf("%s exec: no sandbox init within 20s: %s", bin, stderr.String())
		}
		if init := initOf(b, cmd.Process.Pid); init > 0 {
			exe, _ = os.Readlink(fmt.Sprintf("/proc/%d/exe", init))
		}
	}
	if got := filepath.Base(exe) == "mcpbox-init"; got != lean {
		b.Fatalf("the sandbox init of %s runs %s; want the lean init: %v", bin, exe, lean)
	}
}
