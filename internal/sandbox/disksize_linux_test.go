package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const (
	testSizeLimit = 16 << 20
	// testSizeSlack is what the test accepts on top of the limit: what a
	// shell loop of 1 MiB files writes in a few of the watcher's rounds on
	// a loaded host. The attacks write 512 MiB when unchecked.
	testSizeSlack = 96 << 20
)

// floodScript writes 1 MiB files, each well below the limit, 512 of them
// unless stopped.
const floodScript = `i=0; while [ $i -lt 512 ]; do head -c 1048576 /dev/zero > f$i || exit 9; i=$((i+1)); done; echo flooded`

// TestOutputSizeFallocate: one 2 GiB fallocate under a 16 MiB output limit
// fails at once with SIGXFSZ (RLIMIT_FSIZE), and nothing is allocated.
func TestOutputSizeFallocate(t *testing.T) {
	requireSandbox(t)
	out := t.TempDir()
	spec := quick("sh", "-c", "fallocate -l 2G /workspace/output/big; echo rc=$?")
	spec.Output, spec.Limits.OutputSize = out, testSizeLimit
	var stdout bytes.Buffer
	res, err := Run(context.Background(), spec, Stdio{Stdout: &stdout})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(stdout.String()), "rc=153"; got != want {
		t.Errorf("fallocate printed %q, want %q (killed by SIGXFSZ)", got, want)
	}
	used, err := diskUsage(out)
	if err != nil {
		t.Fatal(err)
	}
	if used > testSizeLimit || res.SizeExceeded != nil {
		t.Fatalf("host output holds %d bytes (size error %v), want at most the limit %d", used, res.SizeExceeded, testSizeLimit)
	}
}

// TestOutputSizeFlood: many files, each below the limit, fill the output
// until the watcher kills the sandbox; the host holds the limit plus the
// slack, and the result names the dir and the limit.
func TestOutputSizeFlood(t *testing.T) {
	requireSandbox(t)
	out := t.TempDir()
	spec := quick("sh", "-c", floodScript)
	spec.Output, spec.Limits.OutputSize = out, testSizeLimit
	checkFlood(t, spec, out, OutputDir)
}

// TestInputSizeFlood: the same flood into an input overlay fills its upper
// dir on the host; Limits.InputSize bounds it.
func TestInputSizeFlood(t *testing.T) {
	requireSandbox(t)
	lower, ov := overlayDirs(t)
	spec := quick("sh", "-c", "cd /workspace/input && "+floodScript)
	spec.Input, spec.InputOverlay, spec.Limits.InputSize = lower, ov, testSizeLimit
	checkFlood(t, spec, ov.Upper, InputDir)
}

func checkFlood(t *testing.T, spec Spec, host, dir string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	res, err := Run(context.Background(), spec, Stdio{Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	used, err := diskUsage(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("host %s holds %d MiB after the flood (limit %d MiB); %v", dir, used>>20, testSizeLimit>>20, res.SizeExceeded)
	if strings.Contains(stdout.String(), "flooded") || res.ExitCode != 128+int(unix.SIGKILL) {
		t.Fatalf("flood ran to its end (exit %d, stdout %q, stderr %q), want it killed", res.ExitCode, stdout.String(), stderr.String())
	}
	e := res.SizeExceeded
	if e == nil || e.Dir != dir || e.Limit != testSizeLimit || e.Err != nil || e.Used <= testSizeLimit || !e.Stopped {
		t.Fatalf("size error %#v, want %s over its limit %d", e, dir, testSizeLimit)
	}
	if e.AtStart || e.Host != host {
		t.Errorf("size error %#v: want it found during the run, not at the start, in host dir %s", e, host)
	}
	if used > testSizeLimit+testSizeSlack {
		t.Fatalf("host %s holds %d bytes, over the limit %d plus slack %d", dir, used, testSizeLimit, testSizeSlack)
	}
}

// TestOutputSizeFullAtStart: an output already over its limit (kept from
// an earlier sandbox) stops the sandbox at its first measurement, which
// says so (AtStart), whatever the workload does.
func TestOutputSizeFullAtStart(t *testing.T) {
	requireSandbox(t)
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "old"), bytes.Repeat([]byte("x"), 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := quick("sleep", "30")
	spec.Output, spec.Limits.OutputSize = out, 1<<20
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := Run(ctx, spec, Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	if e := res.SizeExceeded; e == nil || !e.AtStart || !e.Stopped || e.Host != out || e.Used < 2<<20 {
		t.Fatalf("size error %#v (exit %d), want the dir %s found full at the start", e, res.ExitCode, out)
	}
}

// TestOutputSizeAfterExit: a workload that writes past the limit and
// exits before the watcher's next round is reported all the same.
func TestOutputSizeAfterExit(t *testing.T) {
	requireSandbox(t)
	out := t.TempDir()
	// Written by the host before the start but after the first round:
	// the flood alone might lose the race to the watcher.
	spec := quick("sh", "-c", "exit 0")
	spec.Output, spec.Limits.OutputSize = out, testSizeLimit
	sb, err := Start(context.Background(), spec, Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out+"/late", make([]byte, testSizeLimit+1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := sb.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if e := res.SizeExceeded; e == nil || e.Dir != OutputDir || e.Used <= testSizeLimit {
		t.Fatalf("size error %v after the workload exited, want the output over its limit", e)
	}
	if stopped := res.ExitCode == 128+int(unix.SIGKILL); res.SizeExceeded.Stopped != stopped {
		t.Fatalf("exit %d with Stopped %v: the report says the watcher killed the sandbox iff it did", res.ExitCode, res.SizeExceeded.Stopped)
	}
}

// TestDiskUsageWalk: the walk counts what lies in the tree, once: not what
// a symlink points to, not a hard link twice; a tree too deep to walk is
// an error, not a zero.
func TestDiskUsageWalk(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir() + "/big"
	if err := os.WriteFile(outside, make([]byte, 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/f", make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := diskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if before < 1<<20 {
		t.Fatalf("usage %d, want at least the 1 MiB file", before)
	}
	for i := range 3 {
		if err := os.Link(dir+"/f", dir+"/link"+string(rune('0'+i))); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []string{dir + "/to-file", dir + "/to-dir"} {
		if err := os.Symlink(outside, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Dir(outside), dir+"/to-dir2"); err != nil {
		t.Fatal(err)
	}
	after, err := diskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if after-before >= 1<<20 {
		t.Fatalf("usage went from %d to %d: hard links or symlink targets counted", before, after)
	}
	deep := t.TempDir()
	p := deep
	for range maxWalkDepth + 1 {
		p += "/d"
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := diskUsage(deep); err == nil || !strings.Contains(err.Error(), "deeper than") {
		t.Fatalf("walk of a tree %d deep: %v, want an error", maxWalkDepth+1, err)
	}
	// A tree of many (empty) entries would stretch every walk, and with
	// it the slack: past the entry bound it is an error too.
	if _, err := diskUsageMax(dir, 7); err != nil {
		t.Fatalf("walk of %s within 7 entries: %v", dir, err)
	}
	if _, err := diskUsageMax(dir, 6); err == nil || !strings.Contains(err.Error(), "more than 6 entries") {
		t.Fatalf("walk of 7 entries bounded to 6: %v, want an error", err)
	}
}

func TestNextMeasure(t *testing.T) {
	for _, tt := range []struct{ took, want time.Duration }{
		{0, sizeInterval},
		{sizeInterval, sizeWalkShare * sizeInterval},
		{time.Hour, sizeMaxInterval},
	} {
		if got := nextMeasure(tt.took); got != tt.want {
			t.Errorf("nextMeasure(%s) = %s, want %s", tt.took, got, tt.want)
		}
	}
}

// TestSizeLimitsUnprivileged runs the size tests again as an unprivileged
// user when the tests run as root: the sandbox maps uids the other way,
// and the watcher reads the dirs without root's privileges.
func TestSizeLimitsUnprivileged(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("not root: the size tests already run unprivileged")
	}
	runUnprivileged(t, "TestOutputSizeFallocate", "TestOutputSizeFlood", "TestInputSizeFlood", "TestUnreadableDirStops")
}

// TestUnreadableDirStops: a directory the watcher may not read (mode 0,
// as an unprivileged caller) could hide any amount of data; it stops the
// sandbox instead of counting as empty.
func TestUnreadableDirStops(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() == 0 {
		t.Skip("root reads any directory; TestSizeLimitsUnprivileged runs this one")
	}
	out := t.TempDir()
	t.Cleanup(func() { _ = os.Chmod(out+"/hidden", 0o700) })
	spec := quick("sh", "-c", "mkdir hidden && head -c 1048576 /dev/zero > hidden/f && chmod 0 hidden && sleep 20")
	spec.Output, spec.Limits.OutputSize = out, testSizeLimit
	start := time.Now()
	res, err := Run(context.Background(), spec, Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	e := res.SizeExceeded
	if e == nil || e.Err == nil || !strings.Contains(e.Error(), "hidden") || time.Since(start) > 15*time.Second {
		t.Fatalf("size error %v after %s, want the unreadable dir named at once", e, time.Since(start))
	}
}

// BenchmarkDiskUsage is one measurement of the size watcher (and of
// serve's check after a sandbox ends): a walk of a dir of 100 and of
// 10,000 small files. It runs beside the workload, every 50 ms or ten
// times its own duration (nextMeasure), never before the start.
func BenchmarkDiskUsage(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			out := b.TempDir()
			for i := range n {
				if err := os.WriteFile(filepath.Join(out, fmt.Sprintf("f%05d", i)), []byte("x\n"), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if _, err := diskUsage(out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
