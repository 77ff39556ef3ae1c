package e2e

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

func fileUID(fi os.FileInfo) int {
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// findProcess returns the pid of a host process whose NUL-separated
// cmdline ends with suffix, or 0.
func findProcess(suffix string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.HasSuffix(string(b), suffix) {
			return pid
		}
	}
	return 0
}

// statusField returns the fields of a /proc/PID/status line.
func statusField(status, key string) []string {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			return strings.Fields(rest)
		}
	}
	return nil
}

// killPid kills a process this test started inside a sandbox, found by a
// unique marker in its command line.
func killPid(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
