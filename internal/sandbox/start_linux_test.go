package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkExecTrue is the start-to-exit cost of /bin/true in a sandbox,
// next to the same command run plainly and in bubblewrap, all in one run:
//
//	go test ./internal/sandbox -run '^$' -bench ExecTrue -count 10
//
// mcpbox has every layer (namespaces, rootfs, Landlock, seccomp) and the
// CLI's default limits (1 GiB, 512 pids: a cgroup); mcpbox-nolimits has no
// cgroup, like bubblewrap. Both start the init users run: the lean
// mcpbox-init (initbin_linux.go), built from this tree into a temp dir
// when the benchmark starts (or MCPBOX_BENCH_INIT, a prebuilt one); the
// same-build check is skipped for it, as a test build carries no VCS
// stamp. mcpbox-testinit is mcpbox with the test binary re-executed as
// the init instead, which links every test dependency and pays its
// package inits. Each mcpbox sub-benchmark reports its ratio to
// bwrap and its excess over plain in ms, measured side by side within the
// sub-benchmark (one plain and one bwrap start per round), so load on the
// host shifts both sides alike; cpu-ms/op and cpu-x-bwrap are the CPU time
// it took (this process and its children), which other load does not
// inflate. `mcpbox exec` adds mcpbox's own start-up (test/e2e's
// BenchmarkExecCLI).
//
// MCPBOX_BENCH_HEAP_MB=N gives this process a heap of N MiB, every page
// written, as a gateway's may be: the init's clone copies the page tables
// of the process that starts it (plain exec and bubblewrap's starts share
// them: CLONE_VM), and the process's next write to each page faults.
func BenchmarkExecTrue(b *testing.B) {
	if err := probeHost().usernsErr; err != nil {
		b.Skipf("user namespaces unavailable: %v", err)
	}
	if mb, _ := strconv.Atoi(os.Getenv("MCPBOX_BENCH_HEAP_MB")); mb > 0 {
		benchHeap = make([]byte, mb<<20)
		touchHeap()
		b.Cleanup(func() { benchHeap = nil })
	}
	bwrap, _ := exec.LookPath("bwrap")
	// bwrap exits without reaping the sandbox's pid 1, which tears down
	// the namespaces (~3 ms of CPU) as an orphan: as a child subreaper
	// this process inherits and reaps it, so that RUSAGE_CHILDREN counts
	// it, as it counts mcpbox's init.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		b.Fatalf("becoming a child subreaper: %v", err)
	}
	b.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	plain := func(b *testing.B) {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
	bw := func(b *testing.B) {
		if out, err := exec.Command(bwrap, bwrapArgs...).CombinedOutput(); err != nil {
			b.Fatalf("bwrap: %v: %s", err, out)
		}
	}
	box := func(l Limits) func(b *testing.B) {
		spec := Spec{Args: []string{"/bin/true"}, Limits: l}
		return func(b *testing.B) {
			res, err := Run(context.Background(), spec, Stdio{})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("sandbox: %v %+v", err, res)
			}
		}
	}
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			plain(b)
		}
	})
	b.Run("bwrap", func(b *testing.B) {
		if bwrap == "" {
			b.Skip("bwrap not installed (apt-get install bubblewrap)")
		}
		for b.Loop() {
			bw(b)
			b.StopTimer() // bwrap has returned; its orphan is not waited for
			reapOrphans(b)
			b.StartTimer()
		}
	})
	lean, leanErr := benchLeanInit()
	self := func() string { return "/proc/self/exe" }
	for _, c := range []struct {
		name   string
		limits Limits
		init   func() string // nil: the lean init
	}{
		{"mcpbox", Limits{Memory: 1 << 30, Pids: 512}, nil},
		{"mcpbox-nolimits", Limits{}, nil},
		{"mcpbox-testinit", Limits{Memory: 1 << 30, Pids: 512}, self},
	} {
		run := box(c.limits)
		b.Run(c.name, func(b *testing.B) {
			ip := c.init
			if ip == nil {
				if leanErr != nil {
					b.Skipf("no lean init: %v", leanErr)
				}
				ip = func() string { return lean }
			}
			old := initPath
			initPath = ip
			defer func() { initPath = old }()
			run(b) // warm: the first start probes the host
			var own, base, bwrapT, ownCPU, bwrapCPU, cow time.Duration
			for b.Loop() {
				// A live process writes its heap: each page the last
				// clone made copy-on-write faults once. Untimed, but
				// the first pass's excess over a second one is what the
				// clone's copy-on-write cost: cow-ms/op.
				if benchHeap != nil {
					h0 := time.Now()
					touchHeap()
					h1 := time.Now()
					touchHeap()
					cow += h1.Sub(h0) - time.Since(h1)
				}
				// Wall times end when the command returns; CPU times
				// also count the orphans it left (reapOrphans).
				t0, c0 := time.Now(), cpuTime()
				run(b)
				t1 := time.Now()
				reapOrphans(b)
				c1 := cpuTime()
				b.StopTimer()
				p0 := time.Now()
				plain(b)
				p1 := time.Now()
				reapOrphans(b)
				w0, k0 := time.Now(), cpuTime()
				if bwrap != "" {
					bw(b)
				}
				w1 := time.Now()
				reapOrphans(b)
				k1 := cpuTime()
				b.StartTimer()
				own += t1.Sub(t0)
				base += p1.Sub(p0)
				bwrapT += w1.Sub(w0)
				ownCPU += c1 - c0
				bwrapCPU += k1 - k0
			}
			n := float64(b.N)
			b.ReportMetric((own-base).Seconds()*1e3/n, "ms-over-plain")
			b.ReportMetric(ownCPU.Seconds()*1e3/n, "cpu-ms/op")
			if benchHeap != nil {
				b.ReportMetric(cow.Seconds()*1e3/n, "cow-ms/op")
			}
			if bwrap != "" {
				b.ReportMetric(float64(own)/float64(bwrapT), "x-bwrap")
				b.ReportMetric(float64(ownCPU)/float64(bwrapCPU), "cpu-x-bwrap")
			}
		})
	}
}

// benchHeap is the heap MCPBOX_BENCH_HEAP_MB asks BenchmarkExecTrue for.
var benchHeap []byte

// touchHeap writes a byte of each page of benchHeap.
func touchHeap() {
	for i := 0; i < len(benchHeap); i += 4096 {
		benchHeap[i]++
	}
}

// benchLeanInit builds cmd/mcpbox-init from this tree into a temp dir
// (or takes MCPBOX_BENCH_INIT) and opens it as the product does
// (openLeanInit), but without the same-build check: a test build carries
// no VCS stamp. Built and opened once per process.
var benchLeanInit = sync.OnceValues(func() (string, error) {
	path := os.Getenv("MCPBOX_BENCH_INIT")
	if path == "" {
		dir, err := os.MkdirTemp("", "mcpbox-bench-init-")
		if err != nil {
			return "", err
		}
		// Opened below and kept open: the file may go at once.
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, InitName)
		goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goBin); err != nil {
			goBin = "go"
		}
		cmd := exec.Command(goBin, "build", "-o", path, "mcpbox/cmd/mcpbox-init")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build mcpbox/cmd/mcpbox-init: %v: %s", err, out)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			return "", err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	return openLeanInit(path, self, func(*debug.BuildInfo) bool { return true })
})

// reapOrphans waits, up to 10 s, for every child this process has left:
// the benchmark runs one command at a time, so these are orphans of the
// last one, which it inherited as a child subreaper.
func reapOrphans(b *testing.B) {
	b.Helper()
	for end := time.Now().Add(10 * time.Second); ; {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WALL, nil)
		switch {
		case err == unix.ECHILD:
			return
		case err == unix.EINTR:
		case err != nil:
			b.Fatalf("reaping orphans: %v", err)
		case pid > 0:
		case time.Now().After(end):
			b.Fatal("an orphan of the last command still runs after 10 s")
		default:
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// cpuTime is the CPU time, user and system, of this process and of its
// reaped children (the sandbox init counts in full: it reaps its own).
// Unlike wall time it does not grow with other load on the host.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// bwrapArgs isolates like mcpbox's default policy, as far as bubblewrap
// goes: every namespace, the same read-only system binds and curated /etc
// files, fresh /proc, /dev and /tmp, no capabilities. It has no cgroup,
// Landlock or seccomp.
var bwrapArgs = []string{
	"--unshare-all", "--die-with-parent", "--new-session", "--uid", "1000", "--gid", "1000",
	"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
	"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
	"--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache", "--ro-bind", "/etc/ssl/certs", "/etc/ssl/certs",
	"--ro-bind-try", "/etc/localtime", "/etc/localtime", "--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
	"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", "/workspace",
	"--cap-drop", "ALL", "--chdir", "/workspace",
	"--", "/bin/true",
}

// TestInitBornInCgroup checks that the init starts inside the sandbox's
// cgroup (no move after the fact, which costs milliseconds), with its
// workload under the same limits, and that no thread of the host process
// is left there: a Kill of the sandbox's cgroup must not reach the host.
func TestInitBornInCgroup(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root for cgroups on this kind of host")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sb, err := Start(context.Background(), limited("cat"), Stdio{Stdin: r})
	if err != nil {
		w.Close()
		t.Fatal(err)
	}
	defer func() {
		w.Close()
		_, _ = sb.Wait()
	}()
	cg := sb.cgroup()
	if cg == nil {
		t.Skip("no cgroup on this host")
	}
	// On v2 host root forks the init as another uid, which may not use
	// CLONE_INTO_CGROUP: moved there, as before.
	if _, v2 := cg.Paths()["unified"]; !sb.born && !(v2 && sb.root) {
		t.Error("the init was moved into its cgroup, not born there")
	}
	var pids []int
	for deadline := time.Now().Add(10 * time.Second); len(pids) < 2 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		pids, _ = cg.Pids() // the init and cat
	}
	if len(pids) != 2 || !slices.Contains(pids, sb.cmd.Process.Pid) {
		t.Fatalf("cgroup holds %v, want the init %d and cat", pids, sb.cmd.Process.Pid)
	}
	if slices.Contains(pids, os.Getpid()) {
		t.Fatalf("cgroup holds the host process %d", os.Getpid())
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/cgroup")
		if err == nil && string(b) != string(self) {
			t.Errorf("host thread %s is in other cgroups than its process:\n%s\nvs\n%s", task.Name(), b, self)
		}
	}
}

// TestMountsHeldUntilReaped: the host holds the init's mount namespace
// while the sandbox runs (holdMounts), so that its teardown is off Wait's
// path, and lets it go once the init is reaped.
func TestMountsHeldUntilReaped(t *testing.T) {
	requireSandbox(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sb, err := Start(context.Background(), quick("cat"), Stdio{Stdin: r})
	if err != nil {
		w.Close()
		t.Fatal(err)
	}
	fd := sb.mntNS
	held, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	want, _ := os.Readlink("/proc/" + strconv.Itoa(sb.cmd.Process.Pid) + "/ns/mnt")
	w.Close()
	if _, err := sb.Wait(); err != nil {
		t.Fatal(err)
	}
	if fd < 0 || held == "" || held != want {
		t.Fatalf("held %q (fd %d), want the init's mount namespace %q", held, fd, want)
	}
	if sb.mntNS != -1 {
		t.Errorf("mount namespace still held after Wait (fd %d)", sb.mntNS)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if l, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); l != want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandbox's mount namespace is still open 10 s after Wait")
		}
	}
}

// TestStaleDue: starts remove crash leftovers at most once per staleEvery,
// the first start of a process included, and a clock that went back does
// not stop them for good.
func TestStaleDue(t *testing.T) {
	old := staleLast.Load()
	t.Cleanup(func() { staleLast.Store(old) })
	staleLast.Store(0)
	t0 := time.Now()
	for _, c := range []struct {
		at   time.Duration
		want bool
	}{
		{0, true}, // the first start
		{time.Millisecond, false},
		{staleEvery - time.Millisecond, false},
		{staleEvery, true},
		{staleEvery + time.Second, false},
		{-time.Hour, true}, // the clock went back
		{-time.Hour + time.Second, false},
	} {
		if got := staleDue(t0.Add(c.at)); got != c.want {
			t.Errorf("staleDue(t0%+v) = %v, want %v", c.at, got, c.want)
		}
	}
}
