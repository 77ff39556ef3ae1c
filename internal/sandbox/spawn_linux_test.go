package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// PDEATHSIG follows the thread that forked the init: a sandbox started
// from a goroutine whose thread then exits must live on.
func TestInitOutlivesItsStartingThread(t *testing.T) {
	requireSandbox(t)
	sb, tid, err := startOnExitingThread(quick("sleep", "30"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *Result, 1)
	go func() {
		res, _ := sb.Wait()
		done <- res
	}()
	defer func() {
		sb.Kill()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the sandbox did not end within 10 s of Kill")
		}
	}()
	task := "/proc/self/task/" + strconv.Itoa(tid)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(task); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d that started the sandbox did not exit", tid)
		}
	}
	select {
	case res := <-done:
		done <- res // for the deferred check
		t.Fatalf("the sandbox ended when the thread that started it exited: %+v", res)
	case <-time.After(time.Second):
	}
}

// startOnExitingThread calls Start on a thread that ends right after, and
// returns the thread's id.
func startOnExitingThread(spec Spec) (*Sandbox, int, error) {
	type started struct {
		sb  *Sandbox
		tid int
		err error
	}
	ch := make(chan started, 1)
	var start func()
	start = func() {
		// Never unlocked: the runtime ends the thread with the goroutine.
		runtime.LockOSThread()
		tid := unix.Gettid()
		if tid == unix.Getpid() {
			// The runtime parks the main thread instead of ending it: hold
			// it here and start from another.
			next := make(chan struct{})
			go func() { start(); close(next) }()
			<-next
			runtime.UnlockOSThread()
			return
		}
		sb, err := Start(context.Background(), spec, Stdio{})
		ch <- started{sb, tid, err}
	}
	go start()
	s := <-ch
	return s.sb, s.tid, s.err
}

// spawnMainEnv makes the test binary run spawnOnMain (TestMain) instead
// of the tests.
const spawnMainEnv = "MCPBOX_SANDBOX_TEST_SPAWN_MAIN"

func init() {
	if os.Getenv(spawnMainEnv) != "" {
		runtime.LockOSThread() // main runs on the main thread
	}
}

// TestSpawnThreadIsNotMain: the spawn thread stands in each new
// sandbox's cgroups for the fork (cgroup v1), and must not be the main
// thread, whose cgroups are the process's as /proc/PID/cgroup shows them
// and whose memory cgroup the process's memory is charged to. In a helper
// process with one P, the first request comes from the main goroutine on
// the main thread, which then blocks: the spawn goroutine, next to run,
// gets the main thread.
func TestSpawnThreadIsNotMain(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), spawnMainEnv+"=1")
	timer := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
	out, err := cmd.CombinedOutput()
	timer.Stop()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "spawn thread: not main" {
		t.Errorf("helper says %q, want %q", got, "spawn thread: not main")
	}
}

// spawnOnMain is TestSpawnThreadIsNotMain's helper: it makes the first
// spawn request from the main thread and says which thread ran it.
func spawnOnMain() int {
	runtime.GOMAXPROCS(1)
	runtime.UnlockOSThread() // still on it until it blocks
	if unix.Gettid() != unix.Getpid() {
		fmt.Println("not on the main thread")
		return 1
	}
	var main bool
	_ = onSpawnThread(func() error {
		main = unix.Gettid() == unix.Getpid()
		return nil
	})
	if main {
		fmt.Println("spawn thread: main")
	} else {
		fmt.Println("spawn thread: not main")
	}
	return 0
}
