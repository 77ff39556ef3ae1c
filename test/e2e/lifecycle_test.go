package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExitCodes: the command's status comes back, 128+N for a signal,
// 127 for a missing command.
func TestExitCodes(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		cases := []struct {
			script string
			code   int
		}{
			{"exit 0", 0},
			{"exit 3", 3},
			{"exit 255", 255},
			{"kill -TERM $$", 128 + int(syscall.SIGTERM)},
			{"kill -KILL $$", 128 + int(syscall.SIGKILL)},
		}
		for _, c := range cases {
			if r := m.sh(t, c.script); r.code != c.code {
				t.Errorf("%q: exit %d, want %d\n%s", c.script, r.code, c.code, r)
			}
		}
		if r := m.exec(t, "", "--", "no-such-command-here"); r.code != 127 {
			t.Errorf("missing command: exit %d, want 127\n%s", r.code, r)
		}
		if r := m.exec(t, "", "--", "/etc/passwd"); r.code != 126 {
			t.Errorf("non-executable command: exit %d, want 126\n%s", r.code, r)
		}
	})
}

// TestStdioPassthrough pipes data through a sandboxed cat, including
// something bigger than a pipe buffer.
func TestStdioPassthrough(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		in := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
		r := m.exec(t, in, "--", "sh", "-c", "cat; echo err >&2")
		if r.code != 0 || r.stdout != in || !strings.HasSuffix(r.stderr, "err\n") {
			t.Fatalf("stdio not passed through: exit %d, %d bytes out, stderr %q", r.code, len(r.stdout), r.stderr)
		}
	})
}

// TestBackgroundProcessesDie leaves a daemon behind and checks it is gone
// when the command exits.
func TestBackgroundProcessesDie(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		marker := strconv.FormatInt(time.Now().UnixNano()%1000000+200000, 10)
		r := m.sh(t, `(setsid sleep `+marker+`.25 </dev/null >/dev/null 2>&1 &) ; sleep 0.2; echo started`)
		want(t, r, 0, "started")
		waitGone(t, "sleep\x00"+marker+".25\x00")
	})
}

// TestMcpboxKilled SIGKILLs mcpbox itself: the sandbox must die with it,
// and the next start must remove the cgroup it left.
func TestMcpboxKilled(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		marker := strconv.FormatInt(time.Now().UnixNano()%1000000+300000, 10)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := m.command(ctx, append(append([]string{"exec"}, m.flags...), "--", "sh", "-c", "sleep "+marker+".75 & sleep "+marker+".5")...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		started := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var pid int
		for deadline := time.Now().Add(20 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			pid = findProcess("sleep\x00" + marker + ".75\x00")
		}
		if pid == 0 {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("sandbox did not start: %s", stderr.String())
		}
		// This sandbox's cgroups, not those of other tests running now.
		leftovers := crashCgroups(t, []crashProc{{pid: pid}})
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		waitGone(t, "sleep\x00"+marker+".75\x00")
		waitGone(t, "sleep\x00"+marker+".5\x00")
		if !m.root() || len(m.flags) > 0 {
			return // no cgroups in this mode
		}
		if len(leftovers) == 0 {
			t.Fatal("no sandbox cgroup found while the sandbox ran")
		}
		// The next start cleans up the crashed run's cgroup once it is older
		// than the grace period that protects sandboxes being created.
		time.Sleep(time.Until(started.Add(staleGrace)))
		want(t, m.sh(t, "true"), 0)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			left := 0
			for _, dir := range leftovers {
				if _, err := os.Stat(dir); err == nil {
					left++
				}
			}
			if left == 0 {
				return
			}
		}
		t.Fatalf("crash leftovers not removed: %v", leftovers)
	})
}

// staleGrace is a little over internal/cgroup's grace period for stale
// sandbox cgroups.
const staleGrace = 6 * time.Second

// sandboxCgroups lists the sandbox cgroup dirs (".../mcpbox/sbx_*").
func sandboxCgroups(t *testing.T) []string {
	var dirs []string
	for _, pattern := range []string{"/sys/fs/cgroup/*/mcpbox/sbx_*", "/sys/fs/cgroup/*/*/*/mcpbox/sbx_*", "/sys/fs/cgroup/mcpbox/sbx_*", "/sys/fs/cgroup/*/*/mcpbox/sbx_*"} {
		m, _ := filepath.Glob(pattern)
		dirs = append(dirs, m...)
	}
	return dirs
}

// waitGone waits (bounded) until no process has the cmdline suffix.
func waitGone(t *testing.T, suffix string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if findProcess(suffix) == 0 {
			return
		}
	}
	pid := findProcess(suffix)
	if pid > 0 {
		_ = killPid(pid, cmdlineEnds(pid, suffix))
	}
	t.Fatalf("sandboxed process %d outlived its sandbox", pid)
}
