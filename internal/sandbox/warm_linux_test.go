package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"mcpbox/internal/landlock"
)

// prepare prepares spec, skipping where sandboxes cannot run, and closes
// it at cleanup.
func prepare(t testing.TB, spec Spec) *Prepared {
	t.Helper()
	if err := probeHost().usernsErr; err != nil {
		t.Skipf("user namespaces unavailable: %v", err)
	}
	w, err := Prepare(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

// The workload sent late runs with its own command, environment, working
// directory and stdio, and the exit code comes back as from Start.
func TestPreparedStart(t *testing.T) {
	w := prepare(t, quick("true"))
	spec := quick("sh", "-c", `echo "$GREETING $S $(pwd)"; echo err >&2; read line; echo "in: $line"; exit 7`)
	spec.Env = []string{"GREETING=hello"}
	spec.Secrets = []Secret{{Name: "S", Value: []byte("from-env")}} // arrives with the environment
	spec.Dir = "/tmp"
	var out, errb bytes.Buffer
	sb, err := w.Start(context.Background(), spec, Stdio{Stdin: strings.NewReader("typed\n"), Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 7 || out.String() != "hello from-env /tmp\nin: typed\n" || errb.String() != "err\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", res.ExitCode, out.String(), errb.String())
	}
	if _, err := w.Start(context.Background(), spec, Stdio{}); err == nil {
		t.Fatal("a prepared sandbox started twice")
	}
}

// A workload started late has every wall a cold one has: seccomp, no
// new privileges, no capabilities, the sandbox's own pid namespace (the
// init is pid 1 there), and no view of the host's root.
func TestPreparedWorkloadIsWalled(t *testing.T) {
	script := `grep -E '^(Seccomp|Seccomp_filters|NoNewPrivs|CapEff|CapPrm|CapBnd):' /proc/self/status; ` +
		// The filter, installed before the workload's command arrives in a
		// warm start, refuses a new user namespace.
		`unshare -U true 2>/dev/null && echo userns-allowed || echo userns-refused; ` +
		`echo "init=$(cat /proc/1/comm 2>&1)"; ls /root /home 2>&1 | head -2; [ $$ -lt 100 ] && echo own-pid-namespace; ` +
		// Only Landlock's signal scope keeps a process of the init's
		// kernel uid from signalling it: a warm workload must be under
		// the same Landlock domain as a cold one.
		`kill -0 1 2>/dev/null && echo init-signallable || echo init-unsignallable`
	cold, coldOut := runOut(t, quick("sh", "-c", script))
	w := prepare(t, quick("true"))
	var out bytes.Buffer
	sb, err := w.Start(context.Background(), quick("sh", "-c", script), Stdio{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Wait()
	if err != nil || res.ExitCode != cold.ExitCode {
		t.Fatalf("warm: exit %v, %v; cold exit %d", res, err, cold.ExitCode)
	}
	if out.String() != coldOut {
		t.Fatalf("the warm workload sees\n%s\nthe cold one\n%s", out.String(), coldOut)
	}
	wants := []string{"Seccomp:\t2", "Seccomp_filters:\t1", "userns-refused", "NoNewPrivs:\t1", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "own-pid-namespace"}
	if landlock.ABI() >= 6 {
		wants = append(wants, "init-unsignallable")
	}
	for _, want := range wants {
		if !strings.Contains(coldOut, want) {
			t.Fatalf("no %q in\n%s", want, coldOut)
		}
	}
}

// A workload started late holds nothing of its hand-over: only its
// stdin, stdout and stderr are open (no claim socket, report pipe or
// control socket of the init, nor the received copies of its stdio), as
// in a cold start, and its environment is the claim's alone.
func TestPreparedWorkloadHoldsOnlyItsStdio(t *testing.T) {
	// ls lists its own: 0-2, 3 its reading of the directory, and what
	// it inherited.
	script := `echo fds $(ls /proc/self/fd); env | sort`
	spec := quick("sh", "-c", script)
	spec.Env = []string{"ONLY=this"}
	cold, coldOut := runOut(t, spec)
	w := prepare(t, quick("true"))
	var out bytes.Buffer
	sb, err := w.Start(context.Background(), spec, Stdio{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Wait()
	if err != nil || res.ExitCode != cold.ExitCode || res.ExitCode != 0 {
		t.Fatalf("warm: exit %v, %v; cold exit %d", res, err, cold.ExitCode)
	}
	if out.String() != coldOut {
		t.Fatalf("the warm workload holds\n%s\nthe cold one\n%s", out.String(), coldOut)
	}
	if !strings.Contains(out.String(), "fds 0 1 2 3\n") || !strings.Contains(out.String(), "ONLY=this") {
		t.Fatalf("want fds 0 1 2 3 and ONLY=this in\n%s", out.String())
	}
}

func runOut(t *testing.T, spec Spec) (*Result, string) {
	t.Helper()
	var out bytes.Buffer
	res, err := Run(context.Background(), spec, Stdio{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	return res, out.String()
}

// A workload that cannot start fails in a prepared sandbox as it does in
// a cold one, with the same code and message, whether the lookup of its
// command (done by the init in a cold start, by the forked workload in a
// warm one) fails or its working directory or execve do, and the sandbox
// is gone.
func TestPreparedStartFailsAsCold(t *testing.T) {
	cases := map[string]func(*Spec){
		"not-found":     func(s *Spec) { s.Args = []string{"no-such-command-here"} },
		"no-dir":        func(s *Spec) { s.Args, s.Dir = []string{"/bin/true"}, "/no/such/dir" },
		"not-exec":      func(s *Spec) { s.Args = []string{"/etc/hostname"} },
		"not-exec-path": func(s *Spec) { s.Args = []string{"hostname"}; s.Env = []string{"PATH=/etc"} },
		"dir-in-path":   func(s *Spec) { s.Args = []string{"bin"}; s.Env = []string{"PATH=/usr::/nowhere"} },
		"relative":      func(s *Spec) { s.Args, s.Dir = []string{"./nothing"}, "/tmp" },
		"nul":           func(s *Spec) { s.Args = []string{"/bin/true", "a\x00b"} },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			spec := quick("true")
			edit(&spec)
			_, coldErr := Run(context.Background(), spec, Stdio{})
			var cold *StartError
			if !errors.As(coldErr, &cold) {
				t.Fatalf("cold: %v, want a StartError", coldErr)
			}
			w := prepare(t, quick("true"))
			pid := w.sb.cmd.Process.Pid
			_, err := w.Start(context.Background(), spec, Stdio{})
			var warm *StartError
			if !errors.As(err, &warm) {
				t.Fatalf("warm: %v, want a StartError", err)
			}
			if warm.Code != cold.Code || warm.Layer != cold.Layer || warm.Error() != cold.Error() {
				t.Fatalf("warm: %d %q %v; cold: %d %q %v", warm.Code, warm.Layer, warm, cold.Code, cold.Layer, cold)
			}
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Fatalf("the failed sandbox's init %d is still there: %v", pid, err)
			}
		})
	}
}

// Only a Spec equal but for the workload may use a prepared sandbox: any
// other wall (here a mount, a limit, a secret) refuses it, and the
// refused sandbox is gone.
func TestPreparedRefusesOtherSpecs(t *testing.T) {
	base := quick("true")
	dir := t.TempDir()
	others := map[string]func(*Spec){
		"mount":  func(s *Spec) { s.Mounts = []Mount{{Source: dir, Target: "/data"}} },
		"limit":  func(s *Spec) { s.Limits.TmpSize = 1 << 20 },
		"secret": func(s *Spec) { s.Secrets = []Secret{{Name: "S", Value: []byte("x"), AsFile: true}} },
		"id":     func(s *Spec) { s.ID = "sbx_mine" },
	}
	for name, edit := range others {
		t.Run(name, func(t *testing.T) {
			w := prepare(t, base)
			spec := quick("true")
			edit(&spec)
			if w.Matches(spec) {
				t.Fatal("Matches accepted a different spec")
			}
			pid := w.sb.cmd.Process.Pid
			if _, err := w.Start(context.Background(), spec, Stdio{}); err == nil {
				t.Fatal("Start accepted a different spec")
			}
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Fatalf("the refused sandbox's init %d is still there: %v", pid, err)
			}
		})
	}
	if _, err := Prepare(context.Background(), Spec{Args: []string{"true"}, ID: "sbx_x"}); err == nil {
		t.Fatal("Prepare accepted a spec with an ID")
	}
}

// Close ends a prepared sandbox that never ran anything, and a pool's
// Close ends all it holds.
func TestPreparedCloseAndPool(t *testing.T) {
	w := prepare(t, quick("true"))
	pid := w.sb.cmd.Process.Pid
	w.Close()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("init %d alive after Close: %v", pid, err)
	}
	p := NewPool(quick("true"), 2)
	waitReady(t, p, 2)
	var pids []int
	for _, w := range p.ready {
		pids = append(pids, w.sb.cmd.Process.Pid)
	}
	var out bytes.Buffer
	sb, err := p.Start(context.Background(), quick("echo", "warm"), Stdio{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Wait(); err != nil || out.String() != "warm\n" {
		t.Fatalf("pool start: %q, %v", out.String(), err)
	}
	waitReady(t, p, 2) // refilled
	for _, w := range p.ready {
		pids = append(pids, w.sb.cmd.Process.Pid)
	}
	p.Close()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("init %d alive after the pool's Close: %v", pid, err)
		}
	}
}

// A prepared sandbox whose init died while it waited is not handed the
// workload: the pool's Start takes the next or starts cold.
func TestPoolSkipsDeadPrepared(t *testing.T) {
	if err := probeHost().usernsErr; err != nil {
		t.Skipf("user namespaces unavailable: %v", err)
	}
	p := NewPool(quick("true"), 1)
	defer p.Close()
	waitReady(t, p, 1)
	p.mu.Lock()
	w := p.ready[0]
	p.mu.Unlock()
	if !w.alive() {
		t.Fatal("a prepared sandbox just made is not alive")
	}
	if err := w.sb.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(10 * time.Second); w.alive(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the killed init still looks alive after 10 s")
		}
	}
	var out bytes.Buffer
	sb, err := p.Start(context.Background(), quick("echo", "served"), Stdio{Stdout: &out})
	if err != nil {
		t.Fatalf("start with a dead prepared sandbox in the pool: %v", err)
	}
	if _, err := sb.Wait(); err != nil || out.String() != "served\n" {
		t.Fatalf("stdout %q, %v", out.String(), err)
	}
}

// The workload's process, forked ahead, dying while it waits (an OOM
// kill, a signal) makes the prepared sandbox dead too: the pool passes
// over it, and a Start of it fails without running anything.
func TestPoolSkipsDeadWaitingWorkload(t *testing.T) {
	if err := probeHost().usernsErr; err != nil {
		t.Skipf("user namespaces unavailable: %v", err)
	}
	killWaiting := func(t *testing.T, w *Prepared) {
		t.Helper()
		// The workload is forked on the init's walled thread, which then
		// ends: it is that thread's child, or, once the thread is gone,
		// the main thread's. So every thread's children are read.
		init := strconv.Itoa(w.sb.cmd.Process.Pid)
		var kids []string
		for end := time.Now().Add(10 * time.Second); len(kids) != 1; time.Sleep(time.Millisecond) {
			kids = nil
			tasks, _ := filepath.Glob("/proc/" + init + "/task/*/children")
			for _, f := range tasks {
				b, _ := os.ReadFile(f)
				kids = append(kids, strings.Fields(string(b))...)
			}
			if len(kids) != 1 && time.Now().After(end) {
				t.Fatalf("the prepared init's children: %q; want the waiting workload", kids)
			}
		}
		pid, _ := strconv.Atoi(kids[0])
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(10 * time.Second); w.alive(); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("the prepared sandbox still looks alive 10 s after its workload was killed")
			}
		}
	}
	w := prepare(t, quick("true"))
	killWaiting(t, w)
	if _, err := w.Start(context.Background(), quick("echo", "ran"), Stdio{}); err == nil {
		t.Fatal("a prepared sandbox whose workload died started")
	}
	p := NewPool(quick("true"), 1)
	defer p.Close()
	waitReady(t, p, 1)
	p.mu.Lock()
	w = p.ready[0]
	p.mu.Unlock()
	killWaiting(t, w)
	var out bytes.Buffer
	sb, err := p.Start(context.Background(), quick("echo", "served"), Stdio{Stdout: &out})
	if err != nil {
		t.Fatalf("start with a dead waiting workload in the pool: %v", err)
	}
	if _, err := sb.Wait(); err != nil || out.String() != "served\n" {
		t.Fatalf("stdout %q, %v", out.String(), err)
	}
}

func waitReady(t testing.TB, p *Pool, n int) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		k, err := p.Ready()
		if err != nil {
			t.Fatal(err)
		}
		if k >= n {
			return
		}
	}
	t.Fatalf("the pool did not prepare %d sandboxes in 30 s", n)
}

// BenchmarkWarmStart: starting /bin/true in a prepared sandbox from a
// pool against a cold Start, with all the layers and the limits (a
// cgroup where the host gives one). ns/op is the start to a running
// workload; Wait is not timed. Issue 19: ≤ 2 ms warm. The init is this
// test binary, unless MCPBOX_BENCH_INIT names another built from the same
// source (cmd/mcpbox-init, or mcpbox itself) to measure it:
//
//	MCPBOX_BENCH_INIT=/path/mcpbox-init go test ./internal/sandbox -run '^$' -bench WarmStart
func BenchmarkWarmStart(b *testing.B) {
	spec := Spec{Args: []string{"/bin/true"}, Limits: Limits{Memory: 256 << 20, Pids: 64},
		AllowDegraded: []Layer{LayerCgroups}}
	if err := probeHost().usernsErr; err != nil {
		b.Skipf("user namespaces unavailable: %v", err)
	}
	if p := os.Getenv("MCPBOX_BENCH_INIT"); p != "" {
		old := initPath
		initPath = func() string { return p }
		b.Cleanup(func() { initPath = old })
	}
	var cold time.Duration
	for _, warm := range []bool{false, true} {
		b.Run("pool="+strconv.FormatBool(warm), func(b *testing.B) {
			size := 0
			if warm {
				size = 2
			}
			p := NewPool(spec, size)
			defer p.Close()
			var took time.Duration
			for b.Loop() {
				if warm {
					b.StopTimer()
					waitReady(b, p, size) // a full pool, nothing being prepared: not what is measured
					b.StartTimer()
				}
				start := time.Now()
				sb, err := p.Start(context.Background(), spec, Stdio{})
				took += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if _, err := sb.Wait(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			per := took / time.Duration(b.N)
			b.ReportMetric(float64(per)/float64(time.Millisecond), "start-ms")
			if !warm {
				cold = per
			} else if cold > 0 {
				b.ReportMetric(float64(per)/float64(cold), "ratio-to-cold")
			}
		})
	}
}

// With an output size limit (RLIMIT_FSIZE in the workload), a regular
// file given as stdout takes more than the limit, as in a cold start:
// the limit is for the workspace, not for mcpbox's own output.
func TestPreparedStdoutFileOverSizeLimit(t *testing.T) {
	spec := quick("head", "-c", "100000", "/dev/zero")
	spec.Output = t.TempDir()
	spec.Limits.OutputSize = 10000
	w := prepare(t, spec)
	f, err := os.Create(t.TempDir() + "/out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sb, err := w.Start(context.Background(), spec, Stdio{Stdout: f})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sb.Wait(); err != nil || res.ExitCode != 0 {
		t.Fatalf("exit %v, %v", res, err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != 100000 {
		t.Fatalf("stdout file: %v, %v; want 100000 bytes", fi.Size(), err)
	}
}
