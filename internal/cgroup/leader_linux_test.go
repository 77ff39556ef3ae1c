package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

// leaderHelper is the helper scenario of TestCreateWhileLeaderSpawns.
const leaderHelper = "leader"

func init() {
	// The scenario runs on the main thread, the thread group leader: as
	// mcpbox's spawn thread may (package sandbox locks whichever thread
	// its spawn goroutine got, the main one included).
	if os.Getenv(helperEnv) == leaderHelper {
		runtime.LockOSThread()
	}
}

// TestCreateWhileLeaderSpawns: on v1, /proc/self/cgroup shows the thread
// group leader's cgroups, and the leader may be the spawn thread, standing
// in a sandbox's cgroup for a fork (SpawnInside). A Create meanwhile, on
// another goroutine, made the new sandbox's cgroup inside that sandbox's
// (<sandbox>/mcpbox/<id>); the new sandbox's SpawnInside then took the
// thread "back" into the first sandbox and left it there, so that the
// first sandbox's Kill listed this process's pid and SIGKILLed it (the
// IdleMemory benchmark, killed in 1 run of 2 on a v1 host). In a helper
// process, whose main goroutine keeps the main thread: the second cgroup
// must be made where the process is, and the thread must end where it
// was.
func TestCreateWhileLeaderSpawns(t *testing.T) {
	requireControllers(t, "pids")
	if version() == "v2" {
		t.Skip("SpawnInside is for cgroup v1")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+leaderHelper)
	timer := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
	b, err := cmd.CombinedOutput()
	timer.Stop()
	out := string(b)
	// Whatever happened, nothing of the helper's may stay: its cgroups
	// are named in its output before anything can go wrong with them.
	t.Cleanup(func() {
		for _, line := range strings.Split(out, "\n") {
			if d, ok := strings.CutPrefix(line, "dir="); ok {
				_ = cgroups.RemovePath(d)
			}
		}
	})
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "nested":
			t.Errorf("Create, while the main thread spawned in another sandbox's cgroup, made %s inside it", v)
		case "moved":
			t.Errorf("after SpawnInside the main thread is in %s, not where it was", v)
		case "listed":
			t.Errorf("the first sandbox's cgroup lists this process (%s): its Kill would kill it", v)
		}
	}
	if !strings.Contains(out, "done\n") {
		t.Errorf("the helper did not finish:\n%s", out)
	}
}

// helperLeader runs TestCreateWhileLeaderSpawns' scenario on the main
// thread and prints what it found; it exits non-zero only when it could
// not run the scenario. The main thread makes a Create on another
// goroutine while it stands in a first cgroup: for a whole SpawnInside,
// and, as midway through SpawnInside's moves, in the first cgroup's
// freezer hierarchy alone (the other hierarchies then tell nothing).
func helperLeader() int {
	if unix.Gettid() != unix.Getpid() {
		fmt.Fprintln(os.Stderr, "not on the main thread")
		return 1
	}
	before, err := cgroups.ParseCgroupFile("/proc/thread-self/cgroup")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Before any Destroy: a thread of ours left in a sandbox's cgroup
	// would have its Kill kill us.
	defer restoreThread(before)
	whole := func(x *Cgroup, during func()) error {
		return x.SpawnInside(func() error { during(); return nil })
	}
	freezerOnly := func(x *Cgroup, during func()) error {
		dir, ok := x.Paths()["freezer"]
		if !ok {
			return nil // no such moment without a freezer
		}
		if err := os.WriteFile(filepath.Join(dir, "tasks"), []byte("0"), 0); err != nil {
			return err
		}
		during()
		restoreThread(before)
		return nil
	}
	for _, enter := range []func(*Cgroup, func()) error{whole, freezerOnly} {
		if err := leaderScenario(before, enter); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Println("done")
	return 0
}

// leaderScenario makes a first cgroup x, and a second, y, on another
// goroutine while the thread is in x (enter), then spawns in y and
// reports where the thread ended.
func leaderScenario(before map[string]string, enter func(*Cgroup, func()) error) error {
	x, err := Create(testID(), Limits{Pids: 64})
	if err != nil {
		return err
	}
	printDirs(x)
	defer x.Destroy()
	var y *Cgroup
	var yerr error
	err = enter(x, func() {
		done := make(chan struct{})
		go func() { // on another thread: this one stays locked
			defer close(done)
			y, yerr = Create(testID(), Limits{Pids: 64})
		}()
		<-done
	})
	if err == nil {
		err = yerr
	}
	if err != nil {
		return err
	}
	printDirs(y)
	defer y.Destroy()
	for ctrl, d := range y.Paths() {
		if xd, ok := x.Paths()[ctrl]; ok && strings.HasPrefix(d, xd+"/") {
			fmt.Printf("nested=%s\n", d)
		}
	}
	// Refused or not, the thread must end where it was.
	fmt.Printf("spawn=%v\n", y.SpawnInside(func() error { return nil }))
	after, err := cgroups.ParseCgroupFile("/proc/thread-self/cgroup")
	if err != nil {
		return err
	}
	for _, ctrl := range v1Controllers {
		if after[ctrl] != before[ctrl] {
			fmt.Printf("moved=%s:%s\n", ctrl, after[ctrl])
		}
	}
	if pids, err := x.Pids(); err == nil && slices.Contains(pids, os.Getpid()) {
		fmt.Printf("listed=%d\n", os.Getpid())
	}
	restoreThread(before)
	return nil
}

// printDirs prints c's directories for the test to remove.
func printDirs(c *Cgroup) {
	for _, d := range c.Paths() {
		fmt.Printf("dir=%s\n", d) // RemovePath of one takes what is nested in it too
	}
}

// restoreThread moves the calling thread back into the v1 cgroups of
// home (ParseCgroupFile of its own cgroup file).
func restoreThread(home map[string]string) {
	for _, ctrl := range v1Controllers {
		rel, ok := home[ctrl]
		if !ok {
			continue
		}
		mnt, root, err := cgroups.FindCgroupMountpointAndRoot("", ctrl)
		if err != nil {
			continue
		}
		if r, err := filepath.Rel(root, rel); err == nil {
			_ = os.WriteFile(filepath.Join(mnt, r, "tasks"), []byte("0"), 0)
		}
	}
}
