package sandbox

import (
	"context"
	"os"
	"runtime"
	"strconv"
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
