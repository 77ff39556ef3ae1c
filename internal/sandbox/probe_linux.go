package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"mcpbox/internal/cgroup"
	"mcpbox/internal/landlock"
	"mcpbox/internal/seccomp"
)

// hostInfo is what this host and this process can do, probed once per
// process from a few /proc files. Cgroups are not probed here: Start
// learns whether they work by creating one.
type hostInfo struct {
	root        bool
	usernsErr   error // nil when user namespaces can be created
	landlockABI int
	seccompErr  error
}

var (
	hostOnce sync.Once
	hostVal  *hostInfo
)

func probeHost() *hostInfo {
	hostOnce.Do(func() {
		h := &hostInfo{root: os.Geteuid() == 0}
		h.usernsErr = probeUserns(h.root)
		h.landlockABI = landlock.ABI()
		h.seccompErr = seccomp.Available()
		hostVal = h
	})
	return hostVal
}

// probeUserns reads the knobs that distributions use to turn user
// namespaces off; the real test is the clone itself, which Start reports.
func probeUserns(root bool) error {
	if n, err := readInt("/proc/sys/user/max_user_namespaces"); err == nil && n == 0 {
		return errors.New("user namespaces are disabled (user.max_user_namespaces = 0)")
	}
	if root {
		return nil
	}
	if n, err := readInt("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && n == 0 {
		return errors.New("unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)")
	}
	if n, err := readInt("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && n == 1 {
		return errors.New("AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)")
	}
	return nil
}

// cgroupsUsable reports whether every controller a sandbox limit needs is
// usable, and if not, why.
func cgroupsUsable(r cgroup.Report) (bool, string) {
	var why []string
	for _, name := range []string{"memory", "pids", "cpu"} {
		c, ok := r.Controller(name)
		if !ok || !c.Usable {
			why = append(why, name+": "+c.Reason)
		}
	}
	if len(why) == 0 {
		return true, ""
	}
	return false, strings.Join(why, "; ")
}

// cgroupSummary is doctor's one-line view of a cgroup report.
func cgroupSummary(r cgroup.Report) string {
	if r.Version == "" {
		return "no cgroup file system mounted"
	}
	var parts []string
	for _, c := range r.Controllers {
		state := "ok"
		if !c.Usable {
			state = "unusable: " + c.Reason
		}
		parts = append(parts, c.Name+" "+state)
	}
	return r.Version + ": " + strings.Join(parts, ", ")
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// degradations returns the layers this host lacks that spec accepts to
// lose, or a *StartError for the first one it does not accept.
func (h *hostInfo) degradations(spec *Spec) ([]Layer, error) {
	var out []Layer
	missing := func(l Layer, why string) error {
		if !spec.degradable(l) {
			return &StartError{Layer: l, Code: exitSetup, Err: fmt.Errorf(
				"isolation layer %s is unavailable: %s; refusing to start (accept with --allow-degraded=%s)", l, why, l)}
		}
		out = append(out, l)
		return nil
	}
	// User namespaces are not checked here: Start has already made them
	// (the clone is the real test; usernsErr only explains its failure).
	if h.seccompErr != nil {
		if err := missing(LayerSeccomp, h.seccompErr.Error()); err != nil {
			return nil, err
		}
	}
	if h.landlockABI == 0 {
		if err := missing(LayerLandlock, "the kernel has no Landlock (or it is not in the lsm= list)"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func hasLayer(ls []Layer, l Layer) bool {
	for _, x := range ls {
		if x == l {
			return true
		}
	}
	return false
}
