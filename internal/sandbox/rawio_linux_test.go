package sandbox

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// awaitParked waits, up to 10 s, until a goroutine whose stack holds fn
// waits in the poller ("IO wait"), not in a blocking system call.
func awaitParked(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	var last string
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		all := string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(all, "\n\n") {
			if strings.Contains(g, fn) {
				last = g
				if strings.Contains(strings.SplitN(g, "\n", 2)[0], "[IO wait") {
					return
				}
			}
		}
	}
	t.Fatalf("no goroutine in %s waits in the poller; last seen:\n%s", fn, last)
}

// TestReportAwaitedInPoller: the host waits for the init's report in the
// poller, not in a blocking read (rawio_unsafe.go), and gets it whole.
func TestReportAwaitedInPoller(t *testing.T) {
	host, child, err := controlSocket()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	defer child.Close()
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		buf := make([]byte, 64)
		n, err := readRaw(host, buf)
		done <- result{buf[:n], err}
	}()
	awaitParked(t, "sandbox.readRaw")
	msg := []byte("a report")
	if _, err := child.Write(msg); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || !bytes.Equal(r.b, msg) {
			t.Fatalf("read %q, %v; want %q", r.b, r.err, msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the report was not read within 10 s")
	}
}

// TestWaitAwaitsExitInPoller: Wait waits for the init's exit in the
// poller, then gets its status.
func TestWaitAwaitsExitInPoller(t *testing.T) {
	requireSandbox(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	sb, err := Start(context.Background(), quick("sh", "-c", "read x; exit 3"), Stdio{Stdin: r})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		res *Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := sb.Wait()
		done <- result{res, err}
	}()
	awaitParked(t, "sandbox.awaitExit")
	w.Close()
	select {
	case got := <-done:
		if got.err != nil || got.res.ExitCode != 3 {
			t.Fatalf("Wait: %+v, %v; want exit 3", got.res, got.err)
		}
	case <-time.After(30 * time.Second):
		sb.Kill()
		t.Fatal("Wait did not return within 30 s of the workload's input closing")
	}
}
