package cgroup

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// freezeWithCleanup freezes c and makes sure it is thawed when the test
// ends, before the processes' own cleanups kill and reap them.
func freezeWithCleanup(t *testing.T, c *Cgroup) {
	t.Helper()
	if err := c.Freeze(); err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	t.Cleanup(func() { _ = c.Thaw() })
}

// TestCleanupStaleFrozen is a gateway killed while its sandbox was paused
// on v1: the init's parent-death SIGKILL waits on a frozen task. The next
// CleanupStale must thaw, kill and remove that sandbox, and leave alone a
// frozen sandbox of a live gateway (no SIGKILL pending).
func TestCleanupStaleFrozen(t *testing.T) {
	requireControllers(t, "freezer")
	dead := create(t, Limits{})
	p := startGated(t, "sleep 30")
	if err := dead.Add(p.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	p.release(t)
	freezeWithCleanup(t, dead)
	if err := unix.Kill(p.cmd.Process.Pid, unix.SIGKILL); err != nil { // as PDEATHSIG does
		t.Fatal(err)
	}
	if len(dead.ThawFiles()) > 0 {
		// v1: the premise of the finding. The killed task lives on.
		time.Sleep(200 * time.Millisecond)
		select {
		case err := <-p.done:
			p.done <- err // for the cleanup
			t.Fatal("a frozen v1 task died of SIGKILL: the kernel changed, revisit ThawFiles")
		default:
		}
		if !killPending(p.cmd.Process.Pid) {
			t.Fatal("killPending does not see the SIGKILL held by the freezer")
		}
	}

	ageDirs(t, dirsOf(dead)...) // now CleanupStale (of any mcpbox on this host) may take it

	paused := create(t, Limits{})
	q := startGated(t, "sleep 30")
	if err := paused.Add(q.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	q.release(t)
	freezeWithCleanup(t, paused)
	ageDirs(t, dirsOf(paused)...)

	removed, err := CleanupStale()
	if err != nil {
		t.Fatalf("CleanupStale: %v", err)
	}
	if !slices.Contains(removed, dead.ID()) && exists(dirsOf(dead)[0]) { // or another mcpbox's cleanup took it
		t.Errorf("CleanupStale removed %v, want the abandoned frozen %s among them", removed, dead.ID())
	}
	p.wait(t, 5*time.Second)
	for _, d := range dirsOf(dead) {
		if exists(d) {
			t.Errorf("abandoned %s still exists", d)
		}
	}
	if slices.Contains(removed, paused.ID()) {
		t.Fatalf("CleanupStale removed the paused sandbox of a live gateway %s", paused.ID())
	}
	for _, d := range dirsOf(paused) {
		if !isFrozen(d) && exists(d+"/freezer.state") {
			t.Errorf("CleanupStale thawed the paused sandbox of a live gateway (%s)", d)
		}
	}

	// What a guard does once the gateway is gone: write each thaw file.
	files := paused.ThawFiles()
	if len(files) == 0 {
		t.Skip("no v1 freezer: ThawFiles is empty, which the v2 test covers")
	}
	for _, f := range files {
		if err := ThawFile(f); err != nil {
			t.Fatal(err)
		}
	}
	if !pollUntil(5*time.Second, func() bool { return !isFrozen(dirsOf(paused)[0]) && readFile(t, files[0]) == "THAWED" }) {
		t.Errorf("after ThawFile, %s is %q", files[0], readFile(t, files[0]))
	}
}

// TestV2FrozenDiesOfSIGKILL checks what ThawFiles relies on for v2: a task
// in a frozen v2 cgroup dies of SIGKILL, so a paused sandbox dies with its
// gateway and needs no guard.
func TestV2FrozenDiesOfSIGKILL(t *testing.T) {
	requireHybridV2(t)
	c := createUnified(t)
	if got := c.ThawFiles(); len(got) != 0 {
		t.Errorf("ThawFiles of a v2 cgroup = %v, want none", got)
	}
	p := startGated(t, "sleep 30")
	if err := c.Add(p.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	p.release(t)
	freezeWithCleanup(t, c)
	if !isFrozen(c.Paths()["unified"]) {
		t.Fatal("isFrozen does not see the frozen v2 cgroup")
	}
	if err := unix.Kill(p.cmd.Process.Pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 5*time.Second)
}

// TestCleanupStaleNested is the leftover of a fixed cgroup v1 bug: a
// sandbox's cgroup made inside another sandbox's, as
// mcpbox/<outer>/mcpbox/<inner>, frozen, with its task told to die (its
// gateway gone). CleanupStale must find the nested sandbox, thaw it, let
// its task die and remove it, and then the outer one it kept from going.
func TestCleanupStaleNested(t *testing.T) {
	requireControllers(t, "freezer")
	outer := create(t, Limits{})
	if len(outer.ThawFiles()) == 0 {
		t.Skip("no v1 freezer: the bug and its leftovers were v1's")
	}
	inner := testID()
	var nested []string // the inner sandbox's directories, one per hierarchy
	for _, d := range dirsOf(outer) {
		nested = append(nested, filepath.Join(d, parentName, inner))
	}
	for _, d := range nested {
		mkdirTemp(t, filepath.Dir(d))
		mkdirTemp(t, d)
	}
	freezer := filepath.Join(filepath.Dir(outer.ThawFiles()[0]), parentName, inner)
	p := startGated(t, "sleep 30")
	// Runs before the process's kill and the directories' removal
	// (cleanups run last first): a frozen task would not die.
	t.Cleanup(func() { _ = ThawFile(filepath.Join(freezer, "freezer.state")) })
	for _, d := range nested {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(p.cmd.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	p.release(t)
	// Frozen as a sandbox's Pause freezes (setV1Freezer: FROZEN written
	// again until it takes). One write is not enough: a release caught
	// dash in its vfork of sleep, and the freeze came between them, the
	// child frozen and the parent not yet asleep, so it slept unfrozen
	// waiting for the frozen child and the cgroup stayed FREEZING for
	// good (CI; 3 in 40 runs under load, each frozen by a second write).
	if err := setV1Freezer(freezer, true); err != nil {
		t.Fatal(err)
	}
	if !pollUntil(10*time.Second, func() bool { return readFile(t, filepath.Join(freezer, "freezer.state")) == "FROZEN" }) {
		t.Fatalf("%s: %s after the freeze, want FROZEN", freezer, readFile(t, filepath.Join(freezer, "freezer.state")))
	}
	if err := unix.Kill(p.cmd.Process.Pid, unix.SIGKILL); err != nil { // as PDEATHSIG does
		t.Fatal(err)
	}
	if !pollUntil(time.Second, func() bool { return killPending(p.cmd.Process.Pid) }) {
		t.Fatal("killPending does not see the SIGKILL held by the freezer")
	}
	for _, d := range nested {
		ageDirs(t, d, filepath.Dir(d))
	}
	ageDirs(t, dirsOf(outer)...)

	removed, err := CleanupStale()
	if err != nil {
		t.Fatalf("CleanupStale: %v", err)
	}
	p.wait(t, 5*time.Second)
	// (Or another mcpbox's cleanup, on this host, took them first.)
	if !slices.Contains(removed, inner) && exists(nested[0]) {
		t.Errorf("CleanupStale removed %v, want the nested %s among them", removed, inner)
	}
	for _, d := range append(nested, dirsOf(outer)...) {
		if exists(d) {
			t.Errorf("%s still exists", d)
		}
	}
}
