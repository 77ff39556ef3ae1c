package e2e

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"mcpbox/internal/procgroup"
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

// cmdlineEnds returns whether process pid's NUL-separated command line
// ends with suffix.
func cmdlineEnds(pid int, suffix string) func() bool {
	return func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		return err == nil && strings.HasSuffix(string(b), suffix)
	}
}

// runGroup runs cmd, which leads its own process group (Setpgid), then
// kills what it left in that group. By a pidfd of the leader held from its
// start: once Wait has reaped the leader, its number may lead another
// program's group (a sandbox init, a benchmark under timeout(1)).
func runGroup(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	g, err := procgroup.Open(cmd.Process)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	defer g.Close()
	err = cmd.Wait()
	_ = g.Kill()
	return err
}
