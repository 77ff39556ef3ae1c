package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"mcpbox/internal/cgroup"
	"mcpbox/internal/egress"
)

// counter prints 1, 2, 3, ... every 10 ms.
const counter = `i=0; while :; do i=$((i+1)); echo $i; sleep 0.01; done`

// limited is a spec with a cgroup (memory and pids limits), so that it
// can be paused.
func limited(args ...string) Spec {
	return Spec{Args: args, Limits: Limits{Memory: 256 << 20, Pids: 64, Timeout: time.Minute}}
}

// startPausable starts spec, skipping when this host gives it no cgroup
// or no freezer. It returns the sandbox and an idempotent Wait; at cleanup
// the sandbox is killed and waited for.
func startPausable(t *testing.T, spec Spec, stdio Stdio) (*Sandbox, func() (*Result, error)) {
	t.Helper()
	requireSandbox(t)
	sb, err := Start(context.Background(), spec, stdio)
	var se *StartError
	if errors.As(err, &se) && se.Layer == LayerCgroups {
		t.Skipf("no cgroups for sandboxes here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	wait := sync.OnceValues(sb.Wait)
	t.Cleanup(func() {
		sb.Kill()
		if _, err := waitWithin(wait, 20*time.Second); err != nil {
			t.Error(err)
		}
	})
	if err := sb.Pause(); errors.Is(err, cgroup.ErrUnsupported) {
		t.Skipf("no freezer: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	if err := sb.Resume(); err != nil {
		t.Fatal(err)
	}
	return sb, wait
}

// waitWithin calls wait, failing when it takes longer than d.
func waitWithin(wait func() (*Result, error), d time.Duration) (*Result, error) {
	type ret struct {
		res *Result
		err error
	}
	done := make(chan ret, 1)
	go func() {
		res, err := wait()
		done <- ret{res, err}
	}()
	select {
	case r := <-done:
		return r.res, r.err
	case <-time.After(d):
		return nil, fmt.Errorf("sandbox still running after %v", d)
	}
}

// waitFor polls cond for at most 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// lines returns the complete lines of out.
func lines(out *syncBuffer) []string {
	s := out.String()
	return strings.Split(s[:strings.LastIndexByte(s, '\n')+1], "\n")[:strings.Count(s, "\n")]
}

func TestPauseStopsAndResumeContinues(t *testing.T) {
	var out syncBuffer
	sb, _ := startPausable(t, limited("sh", "-c", counter), Stdio{Stdout: &out})
	waitFor(t, "the counter to reach 5", func() bool { return len(lines(&out)) >= 5 })
	for range 2 { // idempotent
		if err := sb.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	if !sb.Paused() {
		t.Fatal("Paused() is false after Pause")
	}
	// What was in the pipe already still arrives: wait for it (a counter
	// that was not frozen never settles).
	before := out.String()
	for settled := time.Now().Add(2 * time.Second); ; before = out.String() {
		time.Sleep(30 * time.Millisecond)
		if out.String() == before {
			break
		}
		if time.Now().After(settled) {
			t.Fatalf("output goes on after Pause: %q", out.String())
		}
	}
	time.Sleep(200 * time.Millisecond)
	if after := out.String(); after != before {
		t.Fatalf("output while paused: %q", strings.TrimPrefix(after, before))
	}
	st, err := sb.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.MemoryCurrent == 0 || (st.MemoryPeak != 0 && st.MemoryPeak < st.MemoryCurrent) {
		t.Fatalf("stats while paused: %+v, want memory charged", st)
	}
	for range 2 {
		if err := sb.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	if sb.Paused() {
		t.Fatal("Paused() is true after Resume")
	}
	n := len(lines(&out))
	waitFor(t, "output after Resume", func() bool { return len(lines(&out)) >= n+5 })
	// The shell kept its state: the count goes on without a gap.
	for i, l := range lines(&out) {
		if l != strconv.Itoa(i+1) {
			t.Fatalf("line %d is %q, want %d (output %q)", i+1, l, i+1, out.String())
		}
	}
}

// On cgroup v1 a frozen task dies of SIGKILL only once thawed: Kill must
// see to it.
func TestKillWhilePaused(t *testing.T) {
	var out syncBuffer
	sb, wait := startPausable(t, limited("sh", "-c", counter), Stdio{Stdout: &out})
	waitFor(t, "the counter to start", func() bool { return len(lines(&out)) >= 1 })
	if err := sb.Pause(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sb.Kill()
	res, err := waitWithin(wait, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Kill of a paused sandbox took %v", time.Since(start))
	if res.ExitCode != 128+int(syscall.SIGKILL) || sb.Paused() {
		t.Fatalf("exit %d, paused %v; want 137, not paused", res.ExitCode, sb.Paused())
	}
	if err := sb.Pause(); !errors.Is(err, ErrExited) {
		t.Fatalf("Pause after Wait: %v, want ErrExited", err)
	}
	if err := sb.Resume(); err != nil {
		t.Fatalf("Resume after Wait: %v", err)
	}
	if _, err := sb.Stats(); err == nil {
		t.Fatal("Stats after Wait succeeded; the cgroup should be gone")
	}
}

// A stop thaws a paused sandbox, and no Pause lands after it (an idle
// pause racing the client's end): the workload runs to see its input end
// and exits by itself. Before, a stop that missed a Pause in progress, or
// came just before one, left the server frozen until the kill.
func TestResumeToStop(t *testing.T) {
	for _, pausedFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("paused=%v", pausedFirst), func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			sb, wait := startPausable(t, limited("cat"), Stdio{Stdin: r})
			r.Close()
			if pausedFirst {
				if err := sb.Pause(); err != nil {
					t.Fatal(err)
				}
			}
			if err := sb.ResumeToStop(); err != nil {
				t.Fatal(err)
			}
			if err := sb.Pause(); err == nil || sb.Paused() {
				t.Fatalf("Pause after ResumeToStop: %v, paused %v; want it refused", err, sb.Paused())
			}
			w.Close()
			res, err := waitWithin(wait, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != 0 {
				t.Fatalf("exit %d, want 0: the workload ends by itself at the end of its input", res.ExitCode)
			}
		})
	}
}

func TestTimeoutWhilePaused(t *testing.T) {
	spec := limited("sleep", "60")
	spec.Limits.Timeout = time.Second
	sb, wait := startPausable(t, spec, Stdio{})
	if err := sb.Pause(); err != nil {
		t.Fatal(err)
	}
	res, err := waitWithin(wait, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut {
		t.Fatalf("result %+v, want TimedOut", res)
	}
}

// A Pause racing with the workload's exit (and Wait's cleanup) returns,
// and the sandbox still ends: resumed it exits with its own status,
// killed with that or SIGKILL's.
func TestPauseRacesExit(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			paused := 0
			defer func() { t.Logf("%d of 10 Pauses came before the exit", paused) }()
			for i := range 10 {
				sb, wait := startPausable(t, limited("sh", "-c", "sleep 0.005; exit 3"), Stdio{})
				go func() { _, _ = wait() }()
				time.Sleep(time.Duration(i) * time.Millisecond)
				perr := make(chan error, 1)
				go func() { perr <- sb.Pause() }()
				select {
				case err := <-perr:
					if err != nil && !errors.Is(err, ErrExited) {
						t.Fatalf("Pause: %v, want nil or ErrExited", err)
					}
					if err == nil {
						paused++
					}
				case <-time.After(10 * time.Second):
					t.Fatal("Pause hung")
				}
				want := map[int]bool{3: true}
				if kill {
					sb.Kill()
					want[128+int(syscall.SIGKILL)] = true
				} else if err := sb.Resume(); err != nil {
					t.Fatal(err)
				}
				res, err := waitWithin(wait, 10*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if !want[res.ExitCode] {
					t.Fatalf("exit %d, want one of %v", res.ExitCode, want)
				}
			}
		})
	}
}

// Without a cgroup (no limits, or cgroups degraded as for an unprivileged
// user) there is no freezer: Pause says so.
func TestPauseWithoutCgroup(t *testing.T) {
	requireSandbox(t)
	sb, err := Start(context.Background(), quick("sleep", "60"), Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sb.Kill()
		if _, err := waitWithin(sb.Wait, 20*time.Second); err != nil {
			t.Error(err)
		}
	}()
	if err := sb.Pause(); !errors.Is(err, cgroup.ErrUnsupported) {
		t.Fatalf("Pause without a cgroup: %v, want cgroup.ErrUnsupported", err)
	}
	if _, err := sb.Stats(); !errors.Is(err, cgroup.ErrUnsupported) {
		t.Fatalf("Stats without a cgroup: %v, want cgroup.ErrUnsupported", err)
	}
	if err := sb.Resume(); err != nil || sb.Paused() {
		t.Fatalf("Resume without a cgroup: %v, paused %v", err, sb.Paused())
	}
}

// The egress proxy and the forwards run in mcpbox, outside the frozen
// cgroup: a connection open across a pause survives, and what the peer
// sent meanwhile arrives after Resume.
func TestPauseKeepsEgressConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	second := make(chan struct{})
	sent := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			sent <- err
			return
		}
		defer c.Close()
		if _, err := c.Write([]byte("one\n")); err != nil {
			sent <- err
			return
		}
		<-second
		_, err = c.Write([]byte("two\n"))
		sent <- err
		_, _ = bufio.NewReader(c).ReadString('\n') // until the sandbox ends
	}()
	spec := limited("bash", "-c", `exec 3<>/dev/tcp/127.0.0.1/7000 && while read -r l <&3; do echo "$l"; done`)
	spec.Network.Forwards = []egress.Forward{{Listen: "127.0.0.1:7000", To: ln.Addr().String()}}
	var out syncBuffer
	sb, _ := startPausable(t, spec, Stdio{Stdout: &out})
	waitFor(t, `"one" through the forward`, func() bool { return out.String() == "one\n" })
	if err := sb.Pause(); err != nil {
		t.Fatal(err)
	}
	close(second)
	select {
	case err := <-sent:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the peer could not send while the sandbox was paused")
	}
	time.Sleep(200 * time.Millisecond)
	if got := out.String(); got != "one\n" {
		t.Fatalf("output while paused: %q", got)
	}
	if err := sb.Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, `"two" after Resume`, func() bool { return out.String() == "one\ntwo\n" })
}
