package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeKilledWhilePaused: SIGKILL `mcpbox serve` while its sandbox is
// idle-paused. Nothing of the sandbox may survive: on cgroup v1 the init's
// parent-death signal waits on a frozen task, so mcpbox keeps a thaw
// guard outside the sandbox. And when the guard is killed too, the next
// `mcpbox serve` finds the frozen leftovers and removes them.
func TestServeKilledWhilePaused(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		if !m.root() {
			t.Skip("no freezer without cgroups: the unprivileged mode stops idle sandboxes instead of pausing them")
		}
		bin := goBuild(t, gwServerPkg)
		cfg := hsWriteConfig(t, m, gwDir(t, m), map[string]any{
			"agent": map[string]any{
				"command": []string{"/opt/bin/mcpserver", "-name", "agent"},
				"filesystem": map[string]any{
					"mounts": []map[string]string{{"source": bin, "target": "/opt/bin", "mode": "ro"}},
				},
				"lifecycle": map[string]any{"idle": "1s", "idle_action": "pause"},
				"tools":     map[string]any{"allow": []string{"*"}},
			},
		})

		// pausedGateway starts serve, makes a call and waits for the idle
		// pause; it returns the gateway, the sandbox's processes and the
		// thaw guard.
		pausedGateway := func(t *testing.T) (*crashGateway, []crashProc, crashProc) {
			g := crashServe(t, m, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sess := gwConnect(t, ctx, g.url, nil, nil, gwLegacy)
			gwMustCall(t, sess, "whoami", nil, "agent") // one server: no prefix
			var procs []crashProc
			var guard crashProc
			var frozen string
			for deadline := time.Now().Add(30 * time.Second); frozen == "" || guard.pid == 0; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no paused sandbox with a thaw guard within 30 s: %v\n%s", crashDescendants(g.cmd.Process.Pid), g.logs)
				}
				procs, guard = nil, crashProc{}
				for _, p := range crashDescendants(g.cmd.Process.Pid) {
					if strings.Contains(p.cmd, "__mcpbox_thaw_guard__") {
						guard = p
					} else {
						procs = append(procs, p)
					}
				}
				frozen = ""
				for _, d := range crashCgroups(t, procs) {
					if b, err := os.ReadFile(filepath.Join(d, "freezer.state")); err == nil && strings.TrimSpace(string(b)) == "FROZEN" {
						frozen = d
					}
				}
			}
			t.Cleanup(func() { // whatever failed: thaw, so that the kills act
				_ = os.WriteFile(filepath.Join(frozen, "freezer.state"), []byte("THAWED"), 0)
				for _, p := range append(procs, guard) {
					if p.alive() {
						_ = killPid(p.pid, p.alive)
					}
				}
			})
			return g, procs, guard
		}

		t.Run("guard", func(t *testing.T) {
			g, procs, guard := pausedGateway(t)
			g.kill(t)
			crashWaitGone(t, append(procs, guard))
		})

		t.Run("next start", func(t *testing.T) {
			g, procs, guard := pausedGateway(t)
			if err := killPid(guard.pid, guard.alive); err != nil {
				t.Fatal(err)
			}
			g.kill(t)
			// The premise: the sandbox outlives them, frozen. (Another
			// mcpbox starting on this host may reclaim it any moment.)
			for _, p := range procs {
				if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid)); err == nil && p.alive() && !strings.Contains(string(b), "State:\tD") {
					t.Fatalf("sandbox process %d is not frozen after its gateway and guard died:\n%s", p.pid, b)
				}
			}
			g2 := crashServe(t, m, cfg)
			crashWaitGone(t, procs)
			g2.kill(t)
		})
	})
}
