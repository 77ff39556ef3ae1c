package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// CleanupStaleDirs removes the egress dirs of dead mcpbox processes only:
// never a live one's, one it cannot attribute, or anything not a dir.
func TestCleanupStaleDirs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadStart := "1" // any: the pid is gone
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	defer zombie.Wait() //nolint:errcheck // reaped at the end: a zombie until then
	self := os.Getpid()
	selfStart, ok := procStart(self)
	if !ok {
		t.Fatal("reading this process's start time")
	}
	mk := func(owner string) string {
		d := filepath.Join(tmp, egressDirPrefix+owner+"-123")
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "egress.sock"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return d
	}
	pid := strconv.Itoa
	waitZombie(t, zombie.Process.Pid)
	stale := []string{
		mk(pid(dead.Process.Pid) + "." + deadStart),
		mk(pid(dead.Process.Pid)),                     // the old name: pid only
		mk(pid(self) + "." + selfStart + "0"),         // the pid reused by another process
		mk(pid(zombie.Process.Pid) + "." + selfStart), // exited, not yet reaped
	}
	live := []string{
		mk(selfOwner()),
		mk(pid(self)),
		mk("notapid"),
		mk("0"),
	}
	link := filepath.Join(tmp, egressDirPrefix+pid(dead.Process.Pid)+"-link")
	if err := os.Symlink(live[0], link); err != nil {
		t.Fatal(err)
	}
	removed, err := CleanupStaleDirs()
	if err != nil {
		t.Fatal(err)
	}
	var ours []string
	for _, d := range removed {
		if filepath.Dir(d) == tmp {
			ours = append(ours, d)
		}
	}
	slices.Sort(ours)
	slices.Sort(stale)
	if diff := cmp.Diff(stale, ours); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	for _, d := range append(live, link) {
		if _, err := os.Lstat(d); err != nil {
			t.Errorf("%s of a live or unknown owner was removed: %v", d, err)
		}
	}
	for _, d := range stale {
		if _, err := os.Lstat(d); err == nil {
			t.Errorf("stale %s still there", d)
		}
	}
}

// waitZombie waits up to 5 s for pid to have exited (and not been reaped).
func waitZombie(t *testing.T, pid int) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if s, ok := procStart(pid); ok && s == "Z" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d did not exit", pid)
}

func TestSelfOwnerIsNotGone(t *testing.T) {
	if ownerGone(selfOwner()) {
		t.Fatalf("ownerGone(%q) for this very process", selfOwner())
	}
}
