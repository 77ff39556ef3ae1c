package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"mcpbox/internal/egress"
)

// The test binary is the sandbox init of the sandboxes it starts (runc's
// trick, as in cmd/mcpbox).
func TestMain(m *testing.M) {
	Main()
	if os.Getenv(pauserEnv) != "" {
		os.Exit(runPauser())
	}
	if os.Getenv(spawnMainEnv) != "" {
		os.Exit(spawnOnMain())
	}
	os.Exit(m.Run())
}

// quick is a spec that runs on any host that can run sandboxes at all.
func quick(args ...string) Spec {
	return Spec{Args: args, AllowDegraded: []Layer{LayerCgroups}, Limits: Limits{Timeout: 30 * time.Second}}
}

func requireSandbox(t *testing.T) {
	t.Helper()
	if err := probeHost().usernsErr; err != nil {
		t.Skipf("user namespaces unavailable: %v", err)
	}
}

func TestRunOutputAndExitCode(t *testing.T) {
	requireSandbox(t)
	var out, errb bytes.Buffer
	res, err := Run(context.Background(), quick("sh", "-c", "echo out; echo err >&2; exit 7"), Stdio{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 7 || out.String() != "out\n" || errb.String() != "err\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", res.ExitCode, out.String(), errb.String())
	}
}

func TestStartErrors(t *testing.T) {
	requireSandbox(t)
	tests := []struct {
		name string
		spec Spec
		code int
		msg  string
	}{
		{"no command", Spec{}, exitSetup, "no command"},
		{"forward off loopback", Spec{Args: []string{"true"}, Network: Network{Forwards: []egress.Forward{{Listen: "0.0.0.0:80", To: "db:5432"}}}}, exitSetup, "loopback"},
		{"forward on the proxy port, mapped", Spec{Args: []string{"true"}, Network: Network{Forwards: []egress.Forward{{Listen: "[::ffff:127.0.0.1]:3128", To: "db:5432"}}}}, exitSetup, "other than"},
		{"forward in the DNS's range", Spec{Args: []string{"true"}, Network: Network{Forwards: []egress.Forward{{Listen: "127.128.0.1:8080", To: "db:5432"}}}}, exitSetup, "127.128.0.0/9"},
		{"not found", quick("no-such-program-anywhere"), exitNotFound, "not found"},
		{"not executable", quick("/etc/passwd"), exitNoExec, "permission denied"},
		{"relative mount", Spec{Args: []string{"true"}, Mounts: []Mount{{Source: "rel", Target: "/data"}}}, exitSetup, "absolute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Start(context.Background(), tt.spec, Stdio{})
			var se *StartError
			if !errors.As(err, &se) {
				t.Fatalf("Start error %v, want a *StartError", err)
			}
			if se.Code != tt.code || !strings.Contains(se.Error(), tt.msg) {
				t.Fatalf("Start error code %d %q, want code %d containing %q", se.Code, se.Error(), tt.code, tt.msg)
			}
		})
	}
}

func TestSignalForwarded(t *testing.T) {
	requireSandbox(t)
	startTermTrap(t, "", 30*time.Second).wantTermForwarded(t, "SIGTERM not forwarded to the workload")
}

// termTrap is a sandboxed shell that answers SIGTERM with got-term and
// status 0 (startTermTrap).
type termTrap struct {
	sb   *Sandbox
	out  syncBuffer
	once sync.Once
	res  *Result
	err  error
}

// startTermTrap starts a shell that runs setup, answers SIGTERM with
// got-term and status 0, and otherwise loops until timeout; it returns
// once the shell has said it is ready. The sandbox is killed and waited
// for at the test's end, whatever happened.
func startTermTrap(t *testing.T, setup string, timeout time.Duration) *termTrap {
	t.Helper()
	spec := quick("sh", "-c", setup+"trap 'echo got-term; exit 0' TERM; echo ready; while :; do sleep 0.05; done")
	spec.Limits.Timeout = timeout
	tr := &termTrap{}
	sb, err := Start(context.Background(), spec, Stdio{Stdout: &tr.out})
	if err != nil {
		t.Fatal(err)
	}
	tr.sb = sb
	t.Cleanup(func() {
		sb.Kill()
		_, _ = tr.wait()
	})
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(tr.out.String(), "ready"); {
		if time.Now().After(deadline) {
			t.Fatalf("the shell never said it was ready: %q", tr.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return tr
}

func (tr *termTrap) wait() (*Result, error) {
	tr.once.Do(func() { tr.res, tr.err = tr.sb.Wait() })
	return tr.res, tr.err
}

// wantTermForwarded sends SIGTERM to the sandbox and wants its shell to
// have caught it.
func (tr *termTrap) wantTermForwarded(t *testing.T, failure string) {
	t.Helper()
	if err := tr.sb.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	res, err := tr.wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.Contains(tr.out.String(), "got-term") {
		t.Fatalf("exit %d (timed out: %v), output %q: %s", res.ExitCode, res.TimedOut, tr.out.String(), failure)
	}
}

// The sandbox init survives every signal but SIGKILL, SIGSTOP and
// SIGTERM, sent to the process and to each of its threads (as a workload
// without Landlock's signal scope, or a host process, could), and still
// forwards SIGTERM, sent last. The workload ignores whatever the init
// forwards, so the test needs no list of the init's: a signal that Go's
// runtime would die or crash of, or one that stops the init, fails it.
func TestInitSurvivesSignals(t *testing.T) {
	requireSandbox(t)
	var sigs []unix.Signal
	var ignore []string
	for sig := unix.Signal(1); sig <= 64; sig++ {
		if sig != unix.SIGKILL && sig != unix.SIGSTOP && sig != unix.SIGTERM {
			sigs = append(sigs, sig)
			ignore = append(ignore, strconv.Itoa(int(sig)))
		}
	}
	tr := startTermTrap(t, "trap '' "+strings.Join(ignore, " ")+"; ", 10*time.Second)
	pid := tr.sb.cmd.Process.Pid
	for _, sig := range sigs {
		// Read again for each: the init may start threads as it goes.
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			t.Fatalf("the init's threads, before %v: %v", sig, err)
		}
		if err := unix.Kill(pid, sig); err != nil {
			t.Fatalf("kill %d %v: %v", pid, sig, err)
		}
		for _, task := range tasks {
			tid, _ := strconv.Atoi(task.Name())
			if err := unix.Tgkill(pid, tid, sig); err != nil && err != unix.ESRCH {
				t.Fatalf("tgkill %d %d %v: %v", pid, tid, sig, err)
			}
		}
	}
	tr.wantTermForwarded(t, "the init did not survive the signals to forward SIGTERM")
}

// The no-network hint, written to a stderr whose reader is gone, neither
// ends the init nor changes the workload's exit status: Go makes a
// process whose write to its own stderr, through os.File, fails with
// EPIPE raise SIGPIPE unless it catches it, and the init catches no
// SIGPIPE.
func TestHintToBrokenStderr(t *testing.T) {
	requireSandbox(t)
	// The lookup asks the sandbox's loopback, where nothing listens:
	// the init's hint follows the workload's exit.
	spec := quick("sh", "-c", "getent hosts example.com >/dev/null 2>&1; exit 3")
	var hint bytes.Buffer
	if res, err := Run(context.Background(), spec, Stdio{Stderr: &hint}); err != nil || res.ExitCode != 3 || !strings.Contains(hint.String(), "tried the network") {
		t.Fatalf("with a stderr read: %v, %+v, stderr %q; want exit 3 and the hint", err, res, hint.String())
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer w.Close()
	res, err := Run(context.Background(), spec, Stdio{Stderr: w})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 {
		t.Fatalf("exit %d, want the workload's 3", res.ExitCode)
	}
}

func TestContextCancelKills(t *testing.T) {
	requireSandbox(t)
	ctx, cancel := context.WithCancel(context.Background())
	sb, err := Start(ctx, quick("sleep", "60"), Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cancel()
	res, err := sb.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 128+int(syscall.SIGKILL) || time.Since(start) > 10*time.Second {
		t.Fatalf("exit %d after %s, want 137 at once", res.ExitCode, time.Since(start))
	}
}

func TestCancelledStartReportsTheContext(t *testing.T) {
	requireSandbox(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Start(ctx, quick("true"), Stdio{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Start with a cancelled context: %v, want context.Canceled", err)
	}
}

func TestTimeoutReported(t *testing.T) {
	requireSandbox(t)
	spec := quick("sleep", "60")
	spec.Limits.Timeout = 200 * time.Millisecond
	res, err := Run(context.Background(), spec, Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != 128+int(syscall.SIGKILL) {
		t.Fatalf("result %+v, want TimedOut and exit 137", res)
	}
}

// Library-level spawn cost (what the gateway pays per sandbox), next to a
// plain os/exec of the same command in the same run:
//
//	go test ./internal/sandbox -run '^$' -bench Run -count 10
func BenchmarkRunPlainExec(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRunSandbox(b *testing.B) {
	spec := Spec{Args: []string{"/bin/true"}, Limits: Limits{Memory: 256 << 20, Pids: 64}}
	if probeHost().usernsErr != nil {
		b.Skip("user namespaces unavailable")
	}
	for b.Loop() {
		res, err := Run(context.Background(), spec, Stdio{})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// syncBuffer is a bytes.Buffer that os/exec's copier goroutine may write
// while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer // guarded by mu
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestStartRefusesSymlinkedSources(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	if err := os.Symlink("/etc", dir+"/link"); err != nil {
		t.Fatal(err)
	}
	spec := quick("true")
	spec.Input = dir + "/link"
	_, err := Start(context.Background(), spec, Stdio{})
	if err == nil || !strings.Contains(err.Error(), "symlinks") {
		t.Fatalf("Start with a symlinked input: %v, want a refusal", err)
	}
}

func TestSpecCheckNestedTargets(t *testing.T) {
	s := Spec{Args: []string{"true"}, Output: "/o", Mounts: []Mount{{Source: "/x", Target: OutputDir + "/cache"}}}
	if err := s.check(); err == nil || !strings.Contains(err.Error(), "inside the mount") {
		t.Fatalf("nested target accepted: %v", err)
	}
	s = Spec{Args: []string{"true"}, Mounts: []Mount{{Source: "/x", Target: "/data/../etc"}}}
	if err := s.check(); err == nil {
		t.Fatal("unclean target accepted")
	}
}

// A stdin that never ends must not keep Wait from returning once the
// sandbox is gone.
func TestWaitWithEndlessStdin(t *testing.T) {
	requireSandbox(t)
	r, w := io.Pipe()
	defer w.Close()
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), quick("true"), Stdio{Stdin: r})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return while stdin stayed open")
	}
}

func TestAsHostIDRestoresTheThread(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	const id = rootModeBase + 4242
	// Stay on one thread across the call (LockOSThread nests), so the
	// checks after it look at the very thread asHostID changed.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var inside [2]int
	err := asHostID(id, func() error {
		inside[0], inside[1] = syscall.Geteuid(), syscall.Getegid()
		return errors.New("f's error")
	})
	if err == nil || err.Error() != "f's error" {
		t.Fatalf("asHostID returned %v, want f's error", err)
	}
	if inside != [2]int{id, id} {
		t.Fatalf("inside f: euid/egid %v, want %d", inside, id)
	}
	if syscall.Geteuid() != 0 || syscall.Getegid() != 0 {
		t.Fatalf("after asHostID: euid %d egid %d", syscall.Geteuid(), syscall.Getegid())
	}
	if d, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); d != 1 {
		t.Fatalf("process left non-dumpable (%d)", d)
	}
}

// TestFileMountCannotCoverSystemFile: a file mount onto a file the
// system view already shows (here /usr/bin/env) is refused, so a config
// or imported mount cannot silently replace a program the server runs;
// the same mount at a fresh path works.
func TestFileMountCannotCoverSystemFile(t *testing.T) {
	requireSandbox(t)
	src := filepath.Join(t.TempDir(), "fake-env")
	if err := os.WriteFile(src, []byte("#!/bin/sh\necho replaced\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := quick("/usr/bin/env", "true")
	spec.Mounts = []Mount{{Source: src, Target: "/usr/bin/env", Exec: true}}
	if res, err := Run(context.Background(), spec, Stdio{}); err == nil {
		t.Fatalf("a mount over /usr/bin/env ran (exit %d)", res.ExitCode)
	} else if !strings.Contains(err.Error(), "cover a file of the system view") {
		t.Fatalf("error %v, want the cover refusal", err)
	}
	spec = quick("cat", "/data/fake-env")
	spec.Mounts = []Mount{{Source: src, Target: "/data/fake-env"}}
	var out bytes.Buffer
	if res, err := Run(context.Background(), spec, Stdio{Stdout: &out}); err != nil || res.ExitCode != 0 || !strings.Contains(out.String(), "replaced") {
		t.Fatalf("a file mount at a fresh path: %v, %+v, %q", err, res, out.String())
	}
}
