package initproc

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestForkFailureNamesStepAndLayer: a child's failed step is reported
// with its name, and a failure of a wall with the wall's layer, so that
// `mcpbox doctor` and the start's error point at the right one.
func TestForkFailureNamesStepAndLayer(t *testing.T) {
	c := &workloadConfig{Args: []string{"/bin/x"}}
	for step := uint32(stepSync); step <= stepCgroupNS; step++ {
		if stepNames[step] == "" {
			t.Errorf("step %d has no name", step)
		}
		w := forkFailure(c, step, unix.EPERM)
		if !strings.Contains(w.Msg, stepNames[step]) {
			t.Errorf("step %d: message %q lacks %q", step, w.Msg, stepNames[step])
		}
	}
	for step, layer := range map[uint32]Layer{
		stepSeccomp:  LayerSeccomp,
		stepLandlock: LayerLandlock,
		stepCgroup:   LayerCgroups,
		stepCgroupNS: LayerCgroups,
	} {
		if got := forkFailure(c, step, unix.EPERM).Layer; got != layer {
			t.Errorf("%s: layer %q, want %q", stepNames[step], got, layer)
		}
	}
}
