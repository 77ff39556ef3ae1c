package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hybridNoPidsHelper is the helper scenario of TestHybridPidsOffV1.
const hybridNoPidsHelper = "hybrid-no-pids"

// TestHybridPidsOffV1: a hybrid host whose pids controller is on no v1
// hierarchy (moved to its v2 mount, as cgroup_no_v1=pids does) is still
// used as v1, not split across versions: a pids limit fails with
// ErrControllerMissing before anything is made, Probe says why, and the
// memory hierarchy stays usable. A helper process unmounts the v1 pids
// hierarchy in a mount namespace of its own, which is how mcpbox sees such
// a host (the controller stays bound to v1 for everyone else).
func TestHybridPidsOffV1(t *testing.T) {
	requireHybridV2(t)
	if !v1Mounted(t)["pids"] || !v1Mounted(t)["memory"] {
		t.Skip("needs the v1 pids and memory hierarchies mounted")
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+hybridNoPidsHelper)
	// Go makes the new mount namespace's mounts private before the exec.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: unix.CLONE_NEWNS}
	timer := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, b)
	}
	out := make(map[string]string)
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = v
		}
	}
	if out["version"] != "hybrid" {
		t.Errorf("version = %q, want hybrid", out["version"])
	}
	if out["missing"] != "true" || !strings.Contains(out["err"], "pids") {
		t.Errorf("Create with a pids limit: %q, want ErrControllerMissing naming pids", out["err"])
	}
	if !strings.Contains(out["pids"], "not mounted as a v1 hierarchy") || out["pidsUsable"] != "false" {
		t.Errorf("Probe pids: usable %s, %q; want unusable, not mounted as a v1 hierarchy", out["pidsUsable"], out["pids"])
	}
	if out["memoryUsable"] != "true" {
		t.Errorf("Probe memory usable = %s, want true", out["memoryUsable"])
	}
}

// helperHybridNoPids unmounts the v1 pids hierarchy in this process's own
// mount namespace and reports what Create and Probe make of that. Create
// fails before it makes any directory.
func helperHybridNoPids() int {
	if err := unix.Unmount("/sys/fs/cgroup/pids", 0); err != nil {
		fmt.Fprintln(os.Stderr, "unmounting pids in the helper's mount namespace:", err)
		return 1
	}
	fmt.Printf("version=%s\n", version())
	if c, err := Create(fmt.Sprintf("t%d_hybrid", os.Getpid()), Limits{Pids: 8}); err == nil {
		_ = c.Destroy()
		fmt.Println("err=")
	} else {
		fmt.Printf("err=%v\nmissing=%v\n", err, errors.Is(err, ErrControllerMissing))
	}
	r := Probe()
	for _, name := range []string{"pids", "memory"} {
		c, _ := r.Controller(name)
		fmt.Printf("%s=%s\n%sUsable=%v\n", name, c.Reason, name, c.Usable)
	}
	return 0
}
