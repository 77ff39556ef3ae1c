package sandbox

import (
	"cmp"
	"fmt"
	"strings"

	"mcpbox/internal/cgroup"
)

// CheckCgroups tells, before any sandbox starts, whether sandboxes with
// limits l would get their cgroup on this host, as doctor probes it. It
// returns nil when l needs no cgroup or every controller l needs is
// usable, else an error wrapping ErrNoCgroups that names the missing
// controllers and why the first one is missing. Start still decides for
// itself (it creates the cgroup); this lets a long-running caller fail at
// startup with advice rather than at every sandbox start.
func CheckCgroups(l Limits) error {
	need := cgroupControllers(l)
	if len(need) == 0 {
		return nil
	}
	return checkCgroups(cgroup.Probe(), need)
}

// cgroupControllers are the controllers l's limits are enforced by.
func cgroupControllers(l Limits) []string {
	var need []string
	if l.Memory > 0 {
		need = append(need, "memory")
	}
	if l.Pids > 0 {
		need = append(need, "pids")
	}
	if l.CPU > 0 {
		need = append(need, "cpu")
	}
	return need
}

func checkCgroups(r cgroup.Report, need []string) error {
	var missing []string
	reason := ""
	for _, name := range need {
		c, ok := r.Controller(name)
		if ok && c.Usable {
			continue
		}
		missing = append(missing, name)
		if reason == "" {
			reason = cmp.Or(c.Reason, "not reported by the probe")
		}
	}
	if len(missing) == 0 {
		return nil
	}
	version := cmp.Or(r.Version, "no cgroup file system")
	return fmt.Errorf("%w: %s: %s unusable (%s)", ErrNoCgroups, version, strings.Join(missing, ", "), reason)
}
