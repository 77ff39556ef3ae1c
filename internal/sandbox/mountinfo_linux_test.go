package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mountinfoLine is one line of /proc/self/mountinfo: the root of the
// mount within its filesystem, where it is mounted, and the rest.
type mountinfoLine struct{ root, point, line string }

func parseMountinfo(t *testing.T, s string) []mountinfoLine {
	t.Helper()
	var out []mountinfoLine
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			t.Fatalf("mountinfo line %q", l)
		}
		out = append(out, mountinfoLine{root: f[3], point: f[4], line: l})
	}
	return out
}

// TestMountinfoShowsNoHostLayout: a workload reads /proc/self/mountinfo to
// learn the host's layout (the state dir, the agent's name in a workspace
// path). It sees only the sandbox's own mounts: no host mount points, no
// staging dirs, nothing of the input overlay's layers (the overlay is
// mounted from staging points the final pivot drops). What it does see,
// as documented in the threat model, is the path within its filesystem of
// each bind source: the output's and the mounts'.
func TestMountinfoShowsNoHostLayout(t *testing.T) {
	requireSandbox(t)
	lower, _ := overlayDirs(t)
	// Layer dirs and output where a gateway puts them: under the state
	// dir, named after the agent.
	state := filepath.Join(t.TempDir(), "state-marker")
	layers := filepath.Join(state, "workspaces", "agent-marker", "srv")
	ov := &Overlay{Upper: layers + "/overlay/upper", Work: layers + "/overlay/work"}
	out := filepath.Join(state, "workspaces", "agent-marker", "out-srv", "output")
	for _, d := range []string{ov.Upper, ov.Work, out} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = os.Chmod(ov.Work+"/work", 0o700) })
	spec := quick("cat", "/proc/self/mountinfo")
	spec.Input, spec.InputOverlay, spec.Output = lower, ov, out
	lines := parseMountinfo(t, runOverlay(t, spec))

	hostInfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	host := parseMountinfo(t, string(hostInfo))
	sandboxPoints := map[string]bool{"/": true, "/proc": true, "/tmp": true, "/dev": true, InputDir: true, OutputDir: true}
	for _, l := range lines {
		if sandboxPoints[l.point] || strings.HasPrefix(l.point, "/dev/") || strings.HasPrefix(l.point, "/etc/") || strings.HasPrefix(l.point, "/proc/") ||
			slices.Contains(systemBinds, l.point) {
			continue
		}
		t.Errorf("a mount the sandbox does not make: %s", l.line)
	}
	var outRoot string
	for _, l := range lines {
		for _, s := range []string{"/oldroot", "/newroot", lower, ov.Upper, layers} {
			if strings.Contains(l.line, s) {
				t.Errorf("mountinfo shows %s: %s", s, l.line)
			}
		}
		if l.point == InputDir && l.root != "/" {
			t.Errorf("the input overlay's root is %q, want /: %s", l.root, l.line)
		}
		if l.point == OutputDir {
			outRoot = l.root
		}
		// Host mount points (other than those the sandbox binds itself)
		// are not there: the sandbox's tree is its own.
		for _, hl := range host {
			if l.point == hl.point && !sandboxPoints[hl.point] && !slices.Contains(systemBinds, hl.point) && !strings.HasPrefix(hl.point, "/dev/") {
				t.Errorf("the host's mount point %s is in the sandbox: %s", hl.point, l.line)
			}
		}
	}
	// The documented limit: a bind's root is its path within its
	// filesystem, which names the state dir and the agent. If this
	// changes, change the threat model's paragraph with it.
	if outRoot == "" || outRoot == "/" || !strings.HasSuffix(out, outRoot) || !strings.Contains(outRoot, "agent-marker") {
		t.Errorf("the output's mountinfo root is %q; the threat model says it is the host path %s (within its filesystem)", outRoot, out)
	}
}
