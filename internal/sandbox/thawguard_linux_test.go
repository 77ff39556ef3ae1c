package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"mcpbox/internal/cgroup"
)

// pauserEnv makes the test binary a stand-in gateway (runPauser): it
// starts a sandbox, pauses it, reports and waits to be killed.
const pauserEnv = "MCPBOX_SANDBOX_TEST_PAUSER"

// pauserReport is what runPauser prints once the sandbox is paused.
type pauserReport struct {
	Procs []int             `json:"procs"` // every process of the sandbox
	Dirs  map[string]string `json:"dirs"`  // its cgroup
	Error string            `json:"error,omitempty"`
}

func runPauser() int {
	report := func(r pauserReport) { _ = json.NewEncoder(os.Stdout).Encode(r) }
	sb, err := Start(context.Background(), limited("sleep", "1000"), Stdio{})
	if err != nil {
		report(pauserReport{Error: err.Error()})
		return 1
	}
	cg := sb.cgroup()
	if cg == nil {
		report(pauserReport{Error: "no cgroup"})
		return 1
	}
	var procs []int
	for deadline := time.Now().Add(10 * time.Second); len(procs) < 2 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		procs, _ = cg.Pids() // the init and sleep
	}
	if err := sb.Pause(); err != nil {
		report(pauserReport{Error: err.Error()})
		return 1
	}
	report(pauserReport{Procs: procs, Dirs: cg.Paths()})
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed
	return 0
}

// startPauser runs runPauser in a child and returns it with its report.
// At cleanup it and its sandbox are gone whatever happened: the child is
// killed, and the sandbox's cgroup thawed and killed.
func startPauser(t *testing.T) (*exec.Cmd, pauserReport) {
	t.Helper()
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root for a freezer cgroup on this kind of host")
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), pauserEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var rep pauserReport
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		stdin.Close()
		for _, d := range rep.Dirs { // in case the test failed
			for _, f := range []string{"freezer.state", "cgroup.freeze"} {
				_ = cgroup.ThawFile(filepath.Join(d, f))
			}
		}
		killStillIn(rep.Procs, rep.Dirs)
		waitPidsGone(t, rep.Procs, 10*time.Second)
		for _, d := range rep.Dirs {
			_ = os.Remove(d)
		}
	})
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading the pauser's report: %v", err)
	}
	if err := json.Unmarshal(line, &rep); err != nil {
		t.Fatalf("the pauser's report %q: %v", line, err)
	}
	if rep.Error != "" {
		if bytes.Contains([]byte(rep.Error), []byte("cgroup")) {
			t.Skipf("no pausable sandbox here: %s", rep.Error)
		}
		t.Fatalf("pauser: %s", rep.Error)
	}
	if len(rep.Procs) < 2 {
		t.Fatalf("the paused sandbox has processes %v, want the init and sleep", rep.Procs)
	}
	return cmd, rep
}

// alivePids returns those of pids that still exist (zombies count as gone).
func alivePids(pids []int) []int {
	var alive []int
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err == nil && !bytes.Contains(b, []byte(") Z ")) {
			alive = append(alive, pid)
		}
	}
	return alive
}

func waitPidsGone(t *testing.T, pids []int, d time.Duration) bool {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if len(alivePids(pids)) == 0 {
			return true
		}
	}
	return false
}

// killStillIn kills those of pids that are still in the sandbox's cgroup
// dirs. Most have ended by the time a test cleans up, and their numbers
// may have gone to other programs since (on a busy host with pid_max
// 32768, within seconds): each pid is opened as a pidfd first and
// signalled only if cgroup.procs, read after, still lists it.
func killStillIn(pids []int, dirs map[string]string) {
	fds := make(map[int]int)
	for _, pid := range pids {
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			fds[pid] = fd
			defer unix.Close(fd)
		}
	}
	for _, d := range dirs {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			if fd, ok := fds[pid]; ok {
				_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			}
		}
	}
}

// guardOf returns the pid of the thaw guard pauser started.
func guardOf(t *testing.T, pauser int) int {
	t.Helper()
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
		if len(f) < 2 || string(f[1]) != strconv.Itoa(pauser) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		if bytes.Contains(cmdline, []byte("\x00"+thawGuardArg+"\x00")) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	t.Fatalf("no thaw guard among the children of %d", pauser)
	return 0
}

// TestPausedDiesWithGateway is the finding: SIGKILL the gateway while its
// sandbox is paused, and nothing of the sandbox may survive. On v1 the
// thaw guard sees to it; on v2 the kernel does.
func TestPausedDiesWithGateway(t *testing.T) {
	cmd, rep := startPauser(t)
	guardPid := 0
	if _, v1 := rep.Dirs["freezer"]; v1 {
		guardPid = guardOf(t, cmd.Process.Pid)
	}
	if err := cmd.Process.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !waitPidsGone(t, rep.Procs, 10*time.Second) {
		t.Fatalf("the paused sandbox's processes %v survive their gateway", alivePids(rep.Procs))
	}
	if guardPid != 0 && !waitPidsGone(t, []int{guardPid}, 5*time.Second) {
		t.Errorf("the thaw guard %d outlives its gateway", guardPid)
	}
}

// TestPausedSurvivorsReclaimed: the guard is killed too (say, with the
// gateway's whole process group), so the frozen sandbox outlives them,
// and the next start's cgroup.CleanupStale must end it.
func TestPausedSurvivorsReclaimed(t *testing.T) {
	cmd, rep := startPauser(t)
	if _, v1 := rep.Dirs["freezer"]; !v1 {
		t.Skip("no v1 freezer: a frozen v2 sandbox dies with its gateway (TestPausedDiesWithGateway)")
	}
	if err := unix.Kill(guardOf(t, cmd.Process.Pid), unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// The premise: the parent-death SIGKILL is pending on a frozen task
	// that cannot act on it. (Another mcpbox starting on this host may
	// reclaim it any moment from now: a process already gone proves
	// nothing either way.)
	alive, pending := alivePids(rep.Procs), false
	for _, pid := range alive {
		st := procStatus(pid)
		if !bytes.Contains(st, []byte("State:\tD")) {
			t.Fatalf("pid %d of the paused sandbox is not frozen:\n%s", pid, st)
		}
		pending = pending || sigkillPending(st) // the init's parent-death signal
	}
	if len(alive) == len(rep.Procs) && !pending {
		t.Fatal("no process of the frozen sandbox holds the parent-death SIGKILL")
	}
	for _, d := range rep.Dirs { // past CleanupStale's grace for young cgroups
		old := time.Now().Add(-time.Hour)
		_ = os.Chtimes(d, old, old)
	}
	removed, err := cgroup.CleanupStale()
	if err != nil {
		t.Logf("CleanupStale: %v", err) // other leftovers on a shared host may not be ours to remove
	}
	id := filepath.Base(rep.Dirs["freezer"])
	if _, err := os.Stat(rep.Dirs["freezer"]); !slices.Contains(removed, id) && err == nil { // or another mcpbox's cleanup took it
		t.Errorf("CleanupStale removed %v, want %s", removed, id)
	}
	if !waitPidsGone(t, rep.Procs, 10*time.Second) {
		t.Fatalf("after CleanupStale, %v still run", alivePids(rep.Procs))
	}
	for _, d := range rep.Dirs {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s still exists", d)
		}
	}
}

func procStatus(pid int) []byte {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	return b
}

// sigkillPending reports whether a /proc/PID/status shows SIGKILL
// pending for the thread or the process.
func sigkillPending(status []byte) bool {
	for line := range bytes.Lines(status) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if ok && (string(k) == "SigPnd" || string(k) == "ShdPnd") {
			if m, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64); err == nil && m&(1<<8) != 0 {
				return true
			}
		}
	}
	return false
}
