package sandbox

import (
	"errors"
	"testing"

	"mcpbox/internal/cgroup"
)

// TestCheckCgroups: only the controllers the limits need count, and the
// error says which are missing and why, as doctor found it.
func TestCheckCgroups(t *testing.T) {
	denied := cgroup.Report{Version: "hybrid", Controllers: []cgroup.ControllerReport{
		{Name: "memory", Reason: "can't create cgroups in /sys/fs/cgroup/memory/x: permission denied"},
		{Name: "pids", Reason: "can't create cgroups in /sys/fs/cgroup/pids: permission denied"},
		{Name: "cpu", Usable: true},
		{Name: "freezer", Reason: "whatever"},
	}}
	tests := []struct {
		name   string
		r      cgroup.Report
		l      Limits
		errMsg string // "" for no error
	}{
		{"no limits", denied, Limits{}, ""},
		{"cpu only, usable", denied, Limits{CPU: 1}, ""},
		{"memory and pids denied", denied, Limits{Memory: 1 << 30, Pids: 512, CPU: 1},
			"no usable cgroups: hybrid: memory, pids unusable (can't create cgroups in /sys/fs/cgroup/memory/x: permission denied)"},
		{"pids denied", denied, Limits{Pids: 16},
			"no usable cgroups: hybrid: pids unusable (can't create cgroups in /sys/fs/cgroup/pids: permission denied)"},
		{"nothing mounted", cgroup.Report{}, Limits{Memory: 1},
			"no usable cgroups: no cgroup file system: memory unusable (not reported by the probe)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkCgroups(tt.r, cgroupControllers(tt.l))
			switch {
			case tt.errMsg == "" && err != nil:
				t.Fatalf("err = %v, want nil", err)
			case tt.errMsg != "" && (err == nil || err.Error() != tt.errMsg || !errors.Is(err, ErrNoCgroups)):
				t.Fatalf("err = %v\nwant %s (wrapping ErrNoCgroups)", err, tt.errMsg)
			}
		})
	}
}
