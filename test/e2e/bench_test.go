package e2e

import (
	"context"
	"os"
	"os/exec"
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
// the command: the host-side mcpbox process and the sandbox init. (Stage 2
// is gone by then: it became the command by execve.)
func BenchmarkSandboxRSS(b *testing.B) {
	var host, init float64
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
			if initPid = childOf(cmd.Process.Pid); initPid != 0 && childOf(initPid) != 0 && isExe(childOf(initPid), "/usr/bin/cat") {
				break
			}
		}
		host += rssKiB(cmd.Process.Pid)
		init += rssKiB(initPid)
		stdin.Close()
		_ = cmd.Wait()
		cancel()
	}
	b.ReportMetric(host/float64(b.N), "host-KiB")
	b.ReportMetric(init/float64(b.N), "init-KiB")
}

func childOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

func isExe(pid int, path string) bool {
	p, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return err == nil && p == path
}

func rssKiB(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	f := statusField(string(b), "VmRSS:")
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseFloat(f[0], 64)
	return n
}
