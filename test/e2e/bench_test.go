package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Spawn-to-exit of /bin/true: plain, in an mcpbox sandbox, in bubblewrap
// with comparable isolation. Compare with benchstat; the figures only mean
// something as ratios within one run.
//
//	go test ./test/e2e -run '^$' -bench Spawn -count 10 | tee new.txt

func BenchmarkSpawnPlain(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSpawnMcpbox runs the default policy: every layer, with cgroups.
func BenchmarkSpawnMcpbox(b *testing.B) {
	for b.Loop() {
		if out, err := exec.Command(mcpboxBin, "exec", "--", "/bin/true").CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
}

// BenchmarkSpawnMcpboxNoLimits leaves out cgroups, like bwrap.
func BenchmarkSpawnMcpboxNoLimits(b *testing.B) {
	for b.Loop() {
		if out, err := exec.Command(mcpboxBin, "exec", "--memory", "0", "--pids", "0", "--", "/bin/true").CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
}

// bwrapArgs isolates like mcpbox's default policy: all namespaces, a
// read-only system view, fresh /proc, /dev, /tmp; no cgroups, Landlock or
// seccomp (bwrap only takes a compiled filter).
var bwrapArgs = []string{
	"--unshare-all", "--die-with-parent", "--new-session", "--uid", "1000", "--gid", "1000",
	"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
	"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
	"--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache", "--ro-bind", "/etc/ssl", "/etc/ssl",
	"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", "/workspace",
	"--cap-drop", "ALL", "--chdir", "/workspace",
	"--", "/bin/true",
}

func BenchmarkSpawnBwrap(b *testing.B) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		b.Skip("bwrap not installed (apt-get install bubblewrap)")
	}
	for b.Loop() {
		if out, err := exec.Command(bwrap, bwrapArgs...).CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
}

// BenchmarkSandboxRSS reports the resident memory the sandbox adds beyond
// the command: the host-side mcpbox process and the sandbox init, split
// into anonymous memory (their own) and file pages (mostly the mcpbox
// binary, shared by both and with the page cache).
func BenchmarkSandboxRSS(b *testing.B) {
	var hostAnon, initAnon, hostFile, initFile float64
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, mcpboxBin, "exec", "--", "cat")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		initPid := 0
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if initPid = childOf(cmd.Process.Pid); initPid != 0 && isExe(childOf(initPid), "/usr/bin/cat") {
				break
			}
		}
		if initPid == 0 {
			b.Fatal("sandbox init not found")
		}
		hostAnon += kib(cmd.Process.Pid, "RssAnon:")
		hostFile += kib(cmd.Process.Pid, "RssFile:")
		initAnon += kib(initPid, "RssAnon:")
		initFile += kib(initPid, "RssFile:")
		stdin.Close()
		_ = cmd.Wait()
		cancel()
	}
	n := float64(b.N)
	b.ReportMetric(hostAnon/n, "host-anon-KiB")
	b.ReportMetric(hostFile/n, "host-file-KiB")
	b.ReportMetric(initAnon/n, "init-anon-KiB")
	b.ReportMetric(initFile/n, "init-file-KiB")
}

// childOf returns the first child of any thread of pid (the init forks
// the workload from a thread of its own), or 0.
func childOf(pid int) int {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.Atoi(f[0])
			return n
		}
	}
	return 0
}

func isExe(pid int, path string) bool {
	p, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return err == nil && p == path
}

// kib reads one "Key: N kB" line of /proc/PID/status.
func kib(pid int, key string) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	f := statusField(string(b), key)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseFloat(f[0], 64)
	return n
}
