package image

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

// TestPullUnprivileged runs the unpacking tests as uid 65534: as root,
// permission bits never stop the unpacker, so a tree it could not finish
// (a layer's 0500 dir written into by a later one) or not clean up would
// go unnoticed.
func TestPullUnprivileged(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("already unprivileged")
	}
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
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "image.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, uid, uid); err != nil {
		t.Fatal(err)
	}
	names := []string{"TestPullUnpacksLayersInOrder", "TestPullHostileLayers", "TestPullInterruptedLeavesNothing", "TestPullLimits"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run=^("+strings.Join(names, "|")+")$", "-test.count=1", "-test.v")
	cmd.Env = []string{"TMPDIR=" + tmp, "HOME=" + tmp, "PATH=" + os.Getenv("PATH")}
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
