package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// delegatedControllers are the v1 hierarchies a sandbox cgroup spans.
var delegatedControllers = []string{"memory", "pids", "cpu", "cpuacct", "freezer"}

// TestDelegatedCgroups runs the resource attacks as an unprivileged user
// who was delegated a cgroup subtree, as systemd's Delegate=yes does for
// users: limits must then hold without root.
func TestDelegatedCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("delegating a cgroup needs root")
	}
	dirs := delegateV1(t, nobody)
	m := mode{name: "delegated", uid: nobody}

	r := inCgroups(t, dirs, m, "doctor")
	if r.code != 0 || !strings.Contains(r.stdout, "full strength") {
		t.Fatalf("doctor as a delegated user:\n%s", r)
	}
	r = inCgroups(t, dirs, m, "exec", "--memory", "64Mi", "--", "python3", "-c",
		"b = bytearray(512 << 20); b[::4096] = b'x' * len(b[::4096]); print('allocated')")
	if r.code != 137 || !strings.Contains(r.stderr, "memory limit") {
		t.Fatalf("memory hog as a delegated user: want exit 137 and a report:\n%s", r)
	}
	r = inCgroups(t, dirs, m, "exec", "--pids", "32", "--timeout", "20s", "--", "sh", "-c", "bomb() { bomb | bomb & }; bomb; sleep 2")
	if !strings.Contains(r.stderr, "process limit") {
		t.Fatalf("fork bomb as a delegated user not reported:\n%s", r)
	}
}

// delegateV1 makes a cgroup owned by uid in every v1 hierarchy a sandbox
// uses, below this process's own cgroups, and removes the trees at the end.
func delegateV1(t *testing.T, uid int) []string {
	t.Helper()
	own, err := ownCgroups()
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("mcpbox-e2e-delegated-%d", os.Getpid())
	var dirs []string
	for _, ctrl := range delegatedControllers {
		rel, ok := own[ctrl]
		if !ok {
			t.Skipf("no v1 %s hierarchy (pure cgroup v2 host): delegation is tested in internal/cgroup there", ctrl)
		}
		dir := filepath.Join("/sys/fs/cgroup", ctrl, rel, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Skipf("creating %s: %v", dir, err)
		}
		t.Cleanup(func() { removeTree(t, dir) })
		if err := chownTree(dir, uid); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	return dirs
}

// ownCgroups maps each v1 controller to this process's cgroup path.
func ownCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	own := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			own[ctrl] = parts[2]
		}
	}
	return own, sc.Err()
}

func chownTree(dir string, uid int) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// removeTree removes a cgroup tree deepest first (cgroup dirs are removed
// with rmdir; their files go with them).
func removeTree(t *testing.T, dir string) {
	var sub []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			sub = append(sub, p)
		}
		return nil
	})
	sort.Slice(sub, func(i, j int) bool { return len(sub[i]) > len(sub[j]) })
	for _, p := range sub {
		if err := syscall.Rmdir(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("removing test cgroup %s: %v", p, err)
		}
	}
}

// inCgroups runs mcpbox as m's user inside the delegated cgroups: a shell
// is started as that user, moved into them, and only then execs mcpbox.
func inCgroups(t *testing.T, dirs []string, m mode, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	goR, goW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer goW.Close()
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", `read x <&3 && exec 3<&- && exec "$@"`, "sh", mcpboxBin}, args...)...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent"}
	cmd.ExtraFiles = []*os.File{goR}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(m.uid), Gid: uint32(m.uid), Groups: []uint32{}}}
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	goR.Close()
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("moving the test shell into %s: %v", d, err)
		}
	}
	fmt.Fprintln(goW, "go")
	err = cmd.Wait()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}
