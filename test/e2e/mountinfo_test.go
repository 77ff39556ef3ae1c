package e2e

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMountinfoHostPaths: a workload reads /proc/self/mountinfo to map the
// host. It finds only the sandbox's own mounts (no host mount point, no
// staging dir of the init), and, the documented limit, the host path of
// each bind source in its mount's root field: here the output's, which
// names its parent dirs (in serve: the state dir and the agent).
func TestMountinfoHostPaths(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		base := filepath.Join(m.dir(t), "agent-marker")
		in, out := filepath.Join(base, "in"), filepath.Join(base, "out")
		for _, d := range []string{base, in, out} {
			m.mkdir(t, d)
		}
		r := m.sh(t, "cat /proc/self/mountinfo", "--input", in, "--output", out)
		if r.code != 0 {
			t.Fatalf("cat /proc/self/mountinfo:\n%s", r)
		}
		ours := []string{"/", "/proc", "/tmp", "/dev", "/workspace/input", "/workspace/output", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}
		roots := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			f := strings.Fields(line)
			if len(f) < 5 {
				t.Fatalf("mountinfo line %q", line)
			}
			root, point := f[3], f[4]
			roots[point] = root
			if !slices.Contains(ours, point) && !strings.HasPrefix(point, "/dev/") && !strings.HasPrefix(point, "/etc/") && !strings.HasPrefix(point, "/proc/") && !strings.HasPrefix(point, "/run/") {
				t.Errorf("a mount the sandbox does not make: %s", line)
			}
			if strings.Contains(line, "/oldroot") || strings.Contains(line, "/newroot") {
				t.Errorf("the init's staging shows: %s", line)
			}
		}
		// The documented limit (docs/threat-model.md): binds show their
		// host path within its filesystem.
		for point, src := range map[string]string{"/workspace/input": in, "/workspace/output": out} {
			if root := roots[point]; root == "" || root == "/" || !strings.HasSuffix(src, root) || !strings.Contains(root, "agent-marker") {
				t.Errorf("mountinfo root of %s is %q; the threat model says it shows the host path %s", point, root, src)
			}
		}
	})
}
