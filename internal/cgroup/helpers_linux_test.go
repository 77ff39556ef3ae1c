package cgroup

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// helperEnv makes the test binary run a helper scenario instead of the
// tests (see v2_linux_test.go); the scenarios change the cgroup of the
// process they run in, which the test process must not do to itself.
const helperEnv = "MCPBOX_CGROUP_TEST_HELPER"

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		os.Exit(runHelper(name))
	}
	os.Exit(m.Run())
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates cgroups, which only root can do without a delegated subtree")
	}
}

// requireControllers skips unless Probe reports every name usable.
func requireControllers(t *testing.T, names ...string) {
	t.Helper()
	requireRoot(t)
	r := Probe()
	for _, n := range names {
		c, ok := r.Controller(n)
		if !ok || !c.Usable {
			t.Skipf("cgroup controller %s not usable here (version %q): %s", n, r.Version, c.Reason)
		}
	}
}

var idSeq atomic.Int64

// testID returns an id unique to this test process, so concurrent runs of
// the package don't collide.
func testID() string {
	return fmt.Sprintf("t%d_%d", os.Getpid(), idSeq.Add(1))
}

// create makes a cgroup that is destroyed when the test ends, and checks
// that Destroy leaves no directory behind.
func create(t *testing.T, l Limits) *Cgroup {
	t.Helper()
	c, err := Create(testID(), l)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Destroy(); err != nil {
			t.Errorf("Destroy: %v", err)
		}
		for _, dir := range c.Paths() {
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("after Destroy, stat %s: %v", dir, err)
			}
		}
	})
	return c
}

// proc is a process the test started.
type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error // receives cmd.Wait's result
}

// startGated starts sh -c script, which first waits for a line on stdin so
// the test can Add it to a cgroup before it does anything. The process is
// killed and reaped when the test ends.
func startGated(t *testing.T, script string) *proc {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "read _go; "+script)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %q: %v", script, err)
	}
	p := &proc{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Errorf("pid %d did not exit after SIGKILL", cmd.Process.Pid)
		}
	})
	return p
}

// release lets the gated script run.
func (p *proc) release(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, "\n"); err != nil {
		t.Fatalf("releasing pid %d: %v", p.cmd.Process.Pid, err)
	}
}

// wait returns the process's exit error, failing the test after timeout.
func (p *proc) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		return err
	case <-time.After(timeout):
		t.Fatalf("pid %d still running after %v", p.cmd.Process.Pid, timeout)
		return nil
	}
}

// readFile reads a cgroup file, trimmed.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// pollUntil calls cond every 10ms until it is true or timeout passes.
func pollUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ageDirs backdates dirs so CleanupStale's grace period has passed.
func ageDirs(t *testing.T, dirs ...string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	for _, d := range dirs {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
}

// mkdirTemp creates dir for the test and removes it (it must be an empty
// cgroup by then) when the test ends.
func mkdirTemp(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("removing %s: %v", dir, err)
		}
	})
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func dirsOf(c *Cgroup) []string {
	var out []string
	for _, d := range c.Paths() {
		out = append(out, d)
	}
	return out
}
