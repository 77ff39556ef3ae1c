package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// runUnprivileged runs the named tests of this binary as uid 65534 (a copy
// of the binary it can read, a temp dir of its own) and fails unless each
// passed. Tests run as root use it to cover the other way the sandbox maps
// uids.
func runUnprivileged(t *testing.T, names ...string) {
	t.Helper()
	runUnprivilegedEnv(t, nil, names...)
}

// runUnprivilegedEnv is runUnprivileged with extra environment variables.
func runUnprivilegedEnv(t *testing.T, env []string, names ...string) {
	t.Helper()
	const uid = 65534
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := dir + "/sandbox.test"
	if err := copyFile(exe, bin); err != nil {
		t.Fatal(err)
	}
	tmp := dir + "/tmp"
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, uid, uid); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run=^("+strings.Join(names, "|")+")$", "-test.count=1", "-test.v")
	cmd.Env = append([]string{"TMPDIR=" + tmp, "HOME=" + tmp, "PATH=" + os.Getenv("PATH")}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	// os/exec forks with CLONE_VM: the child's setuid clears the dumpable
	// flag of the memory it still shares with us. Put it back.
	dumpable, derr := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	out, err := cmd.CombinedOutput()
	if derr == nil {
		_ = unix.Prctl(unix.PR_SET_DUMPABLE, uintptr(dumpable), 0, 0, 0)
	}
	t.Logf("as uid %d:\n%s", uid, out)
	for _, name := range names {
		if err != nil || !strings.Contains(string(out), "\n--- PASS: "+name+" (") {
			t.Fatalf("unprivileged run of %s: %v", name, err)
		}
	}
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}
