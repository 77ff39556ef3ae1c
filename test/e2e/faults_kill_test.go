package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestServeKilledUnderLoad SIGKILLs `mcpbox serve` again and again while
// clients make calls and one sandbox is paused (root: frozen by the
// cgroup freezer). After every kill: no process of the old instance or
// its sandboxes survives, no mount is left, the audit log verifies (no
// record half-written), and every call a client got an answer to has its
// record. After every restart: the killed instance's sandbox cgroups and
// egress socket dirs are gone. MCPBOX_FAULTS_FULL=1 runs 20 rounds
// instead of 3.
func TestServeKilledUnderLoad(t *testing.T) {
	m := modes(t)[0]
	rounds := 3
	if os.Getenv("MCPBOX_FAULTS_FULL") == "1" {
		rounds = 20
	}
	bin := goBuild(t, gwServerPkg)
	server := func(name string) map[string]any {
		return map[string]any{
			"command": []string{"/opt/bin/mcpserver", "-name", name},
			"filesystem": map[string]any{
				"mounts": []map[string]string{{"source": bin, "target": "/opt/bin", "mode": "ro"}},
			},
			"tools": map[string]any{"allow": []string{"*"}},
		}
	}
	busy := server("busy")
	busy["network"] = map[string]any{"egress": []map[string]any{{"host": "example.com"}}}
	idle := server("idle")
	idle["lifecycle"] = map[string]any{"idle": "1s", "idle_action": "pause"}
	dir := gwDir(t, m)
	cfg := hsWriteConfig(t, m, dir, map[string]any{"busy": busy, "idle": idle})

	var answered int // calls answered, over all rounds
	var prev *crashRound
	for round := range rounds {
		if prev != nil {
			// Sandbox cgroups are spared until a few seconds old (package
			// cgroup), so that a starting gateway cannot take another's.
			time.Sleep(time.Until(prev.killed.Add(staleGrace)))
		}
		g := crashServe(t, m, cfg)
		if prev != nil {
			crashWaitRemoved(t, fmt.Sprintf("round %d: cgroups of the killed gateway's sandboxes", round), prev.cgroups)
			crashWaitRemoved(t, fmt.Sprintf("round %d: egress socket dirs of the killed gateway", round), prev.egressDirs)
		}
		r := crashLoadAndKill(t, m, g, round)
		answered += r.answered
		crashWaitGone(t, r.procs)
		crashNoMounts(t, dir)
		if res := m.mcpbox(t, 60*time.Second, "", "logs", "verify", "--config", cfg); res.code != 0 || !strings.Contains(res.stdout, "chain intact") {
			t.Fatalf("round %d: mcpbox logs verify after the kill:\n%s", round, res)
		}
		res := m.mcpbox(t, 60*time.Second, "", "logs", "--json", "--event", "call", "--tool", "echo", "--config", cfg)
		if res.code != 0 {
			t.Fatalf("round %d: mcpbox logs:\n%s", round, res)
		}
		recs := auDecode(t, res.stdout)
		if len(recs) < answered {
			t.Fatalf("round %d: %d call records for %d answered calls: answered calls went unrecorded", round, len(recs), answered)
		}
		t.Logf("round %d: 8 calls answered in %v; killed after %d answered (%d sent), with %d sandbox processes; %d call records so far for %d answered",
			round, r.firstAnswers.Round(time.Millisecond), r.answered, r.sent, len(r.procs), len(recs), answered)
		prev = r
	}
	// A last start reclaims what the last kill left.
	time.Sleep(time.Until(prev.killed.Add(staleGrace)))
	g := crashServe(t, m, cfg)
	crashWaitRemoved(t, "after the last kill: cgroups of the killed gateway's sandboxes", prev.cgroups)
	crashWaitRemoved(t, "after the last kill: egress socket dirs of the killed gateway", prev.egressDirs)
	g.kill(t)
}

// crashRound is what one killed instance left to check.
type crashRound struct {
	killed         time.Time
	procs          []crashProc // the gateway's descendants at the kill
	cgroups        []string
	egressDirs     []string
	answered, sent int
	firstAnswers   time.Duration // until 8 calls were answered
}

// crashLoadAndKill starts both servers, waits (as root) for the idle one
// to be paused, runs four clients calling busy's echo, and SIGKILLs the
// gateway at a random moment of the load (0–500 ms after the first eight
// answers).
func crashLoadAndKill(t *testing.T, m mode, g *crashGateway, round int) *crashRound {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sess := gwConnect(t, ctx, g.url, nil, nil, gwLegacy)
	gwMustCall(t, sess, "idle__whoami", nil, "idle")
	if m.root() {
		crashWaitFrozen(t, g)
	}
	var answered, sent atomic.Int64
	var killing atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 4 {
		cs := sess
		if c > 0 {
			cs = gwConnect(t, ctx, g.url, nil, nil, gwLegacy)
		}
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				want := fmt.Sprintf("r%d c%d i%d", round, c, i)
				sent.Add(1)
				cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
				got, err := gwCall(cctx, cs, "busy__echo", map[string]any{"text": want})
				ccancel()
				if err != nil {
					if !killing.Load() {
						t.Errorf("echo %q before the kill: %v", want, err)
					}
					return // the gateway is gone
				}
				if got != want {
					t.Errorf("echo %q = %q", want, got)
				}
				answered.Add(1)
			}
		})
	}
	// Killed at a random moment once the load runs (the first calls of a
	// restarted gateway may wait for its store's recovery).
	loadStart := time.Now()
	for answered.Load() < 8 {
		if time.Since(loadStart) > 30*time.Second {
			t.Fatalf("round %d: %d calls answered in 30 s", round, answered.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	firstAnswers := time.Since(loadStart)
	time.Sleep(time.Duration(rand.IntN(500)) * time.Millisecond)
	r := &crashRound{procs: crashDescendants(g.cmd.Process.Pid)}
	r.cgroups = crashCgroups(t, r.procs)
	r.egressDirs, _ = filepath.Glob(fmt.Sprintf("/tmp/mcpbox-egress-%d.*", g.cmd.Process.Pid))
	if m.root() && len(r.cgroups) < 2 {
		t.Fatalf("round %d: found %d sandbox cgroups while both servers ran, want 2: %v", round, len(r.cgroups), r.procs)
	}
	if len(r.egressDirs) == 0 {
		t.Fatalf("round %d: no egress socket dir while busy ran", round)
	}
	t.Cleanup(func() { // if the test ended before a restart reclaimed them
		for _, d := range r.egressDirs {
			_ = os.RemoveAll(d)
		}
		for _, d := range r.cgroups {
			_ = os.Remove(d) // rmdir: only once its processes are gone
		}
	})
	r.killed = time.Now()
	killing.Store(true)
	g.kill(t)
	close(stop)
	wg.Wait()
	r.answered, r.sent = int(answered.Load()), int(sent.Load())
	r.firstAnswers = firstAnswers
	return r
}

// crashWaitFrozen waits up to 15 s for a frozen sandbox cgroup under g.
func crashWaitFrozen(t *testing.T, g *crashGateway) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		procs := slices.DeleteFunc(crashDescendants(g.cmd.Process.Pid), func(p crashProc) bool {
			return strings.Contains(p.cmd, "__mcpbox_thaw_guard__")
		})
		for _, d := range crashCgroups(t, procs) {
			if b, err := os.ReadFile(filepath.Join(d, "freezer.state")); err == nil && strings.TrimSpace(string(b)) == "FROZEN" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no paused sandbox within 15 s\n%s", g.logs)
		}
	}
}
