package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// psRow is one line of `mcpbox ps --json`.
type psRow struct {
	ID, State, Server, Client, Exit, Era, Output string
	Memory                                       int64 `json:"memory_bytes"`
}

// ps lists the gateway's sandboxes.
func (s *auSetup) ps(t *testing.T) []psRow {
	t.Helper()
	r := s.cli(t, "ps", "--json", "--config", s.cfg)
	if r.code != 0 {
		t.Fatalf("mcpbox ps: %s", r)
	}
	var rows []psRow
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var row psRow
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("ps line %q: %v", line, err)
		}
		rows = append(rows, row)
	}
	return rows
}

// waitPS polls `mcpbox ps` until some sandbox is in one of the states
// want, and returns it.
func (s *auSetup) waitPS(t *testing.T, want ...string) psRow {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var rows []psRow
	for time.Now().Before(deadline) {
		rows = s.ps(t)
		for _, r := range rows {
			if slices.Contains(want, r.State) {
				return r
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no sandbox %s within 30 s: %+v", want, rows)
	return psRow{}
}

// TestLifecycleIdle: an idle sandbox is paused (stopped where there is no
// freezer: the unprivileged mode has no cgroups) and the next call wakes
// it with its state; after idle_stop it is stopped and the next call
// starts a new one with the workspace intact. ps, pause, resume and stop
// work by hand, and each step is audited.
func TestLifecycleIdle(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := auConfig(t, m, "", `      output: {}
    lifecycle: {idle: 1s, idle_action: pause, idle_stop: 5s}
    tools: {allow: ["*"]}
`)
		g := s.serve(t)
		sess := s.connect(t, g, nil)
		first := gwMustCall(t, sess, "instance", nil, "")
		gwMustCall(t, sess, "note_write", map[string]any{"name": "kept.txt", "text": "from the first sandbox"}, "ok")
		// Running, or paused already if the host is slow (idle is 1 s).
		running := s.waitPS(t, "running", "paused")
		if running.Client != auClient || running.Server != auServer || !strings.HasPrefix(running.ID, "sbx_") {
			t.Fatalf("ps row %+v", running)
		}
		// ps names the host dir of the sandbox's output, where the note is.
		if b, err := os.ReadFile(filepath.Join(running.Output, "kept.txt")); err != nil || string(b) != "from the first sandbox" {
			t.Errorf("ps: output %q; its kept.txt: %q, %v", running.Output, b, err)
		}
		if r := s.cli(t, "ps", "--config", s.cfg); !strings.Contains(r.stdout, "/"+auServer+"/output\n") {
			t.Errorf("ps table without the output dir:\n%s", r)
		}

		if m.root() {
			paused := s.waitPS(t, "paused")
			if paused.ID != running.ID {
				t.Fatalf("paused %s, want %s", paused.ID, running.ID)
			}
			start := time.Now()
			if got := gwMustCall(t, sess, "instance", nil, ""); got != first {
				t.Fatalf("after the wake the instance is %q, want the same process %q", got, first)
			}
			t.Logf("a call to a paused sandbox took %s", time.Since(start))
			// By hand: pause, resume.
			if r := s.cli(t, "pause", running.ID, "--config", s.cfg); r.code != 0 {
				t.Fatalf("mcpbox pause: %s", r)
			}
			s.waitPS(t, "paused")
			if r := s.cli(t, "resume", running.ID, "--config", s.cfg); r.code != 0 {
				t.Fatalf("mcpbox resume: %s", r)
			}
		}
		// idle_stop (or idle without a freezer) ends it; a call starts anew.
		// ps says mcpbox stopped it, not only that its server exited 0.
		if row := s.waitPS(t, "stopped"); !strings.HasPrefix(row.Exit, "stopped by mcpbox (") {
			t.Errorf("the idle-stopped sandbox's end reads %q, want it to say mcpbox stopped it", row.Exit)
		}
		second := gwMustCall(t, sess, "instance", nil, "")
		if second == first {
			t.Fatalf("the call after the idle stop ran in the same process %q", first)
		}
		gwMustCall(t, sess, "note_read", map[string]any{"name": "kept.txt"}, "from the first sandbox")

		// mcpbox stop: the next call starts another one. Without a
		// freezer the 1 s idle stops the sandbox itself, and on a loaded
		// host it can do so before mcpbox stop arrives: then a call
		// starts one again, and stop is tried on that (a few times).
		last := second
		var stopped string
		for attempt := 1; ; attempt++ {
			now := s.waitPS(t, "running", "paused")
			r := s.cli(t, "stop", now.ID, "--config", s.cfg)
			if r.code == 0 {
				stopped = now.ID
				break
			}
			up := slices.ContainsFunc(s.ps(t), func(row psRow) bool {
				return row.ID == now.ID && (row.State == "running" || row.State == "paused")
			})
			if up || attempt == 5 {
				t.Fatalf("mcpbox stop (attempt %d, the sandbox still up: %v): %s", attempt, up, r)
			}
			last = gwMustCall(t, sess, "instance", nil, "")
		}
		// ps names who stopped it.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			rows := s.ps(t)
			if i := slices.IndexFunc(rows, func(row psRow) bool { return row.ID == stopped && row.State == "stopped" }); i >= 0 {
				if row := rows[i]; !strings.HasPrefix(row.Exit, "stopped by cli:uid=") {
					t.Errorf("the sandbox mcpbox stop ended reads %q, want it to name who stopped it", row.Exit)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sandbox %s not stopped within 30 s: %+v", stopped, rows)
			}
		}
		if r := s.cli(t, "stop", "sbx_nonexistent0000", "--config", s.cfg); r.code == 0 {
			t.Fatalf("stopping an unknown sandbox succeeded: %s", r)
		}
		if third := gwMustCall(t, sess, "instance", nil, ""); third == last {
			t.Fatalf("the call after mcpbox stop ran in the stopped process")
		}
		gwClose(t, sess)
		g.stop(t)

		events := map[string]bool{}
		for _, rec := range s.logs(t) {
			events[rec.str("event")] = true
		}
		want := []string{"sandbox_start", "sandbox_stop"}
		if m.root() {
			want = append(want, "sandbox_pause", "sandbox_resume")
		}
		for _, e := range want {
			if !events[e] {
				t.Errorf("no %s record in the audit log (events: %v)", e, events)
			}
		}
	})
}

// TestPauseWithoutCgroups: where sandboxes have no cgroup (the
// unprivileged user here), mcpbox pause ID fails naming that ID, as ps
// lists it, and mcpbox stop ID as what to do; resume ID does nothing; the
// sandbox keeps serving.
func TestPauseWithoutCgroups(t *testing.T) {
	ms := modes(t)
	m := ms[len(ms)-1]
	if m.root() {
		t.Skip("needs the unprivileged mode, whose sandboxes have no cgroup")
	}
	s := auConfig(t, m, "", "    tools: {allow: [\"*\"]}\n")
	g := s.serve(t)
	sess := s.connect(t, g, nil)
	first := gwMustCall(t, sess, "instance", nil, "")
	row := s.waitPS(t, "running")
	r := s.cli(t, "pause", row.ID, "--config", s.cfg)
	if r.code != 1 || !strings.Contains(r.stderr, "sandbox "+row.ID+" cannot be paused: it has no cgroup freezer") ||
		!strings.Contains(r.stderr, "mcpbox stop "+row.ID+" ends it instead") || strings.Count(r.stderr, "sbx_") != 2 {
		t.Fatalf("mcpbox pause %s without cgroups: want exit 1 naming it and mcpbox stop:\n%s", row.ID, r)
	}
	if r := s.cli(t, "resume", row.ID, "--config", s.cfg); r.code != 0 {
		t.Errorf("mcpbox resume of a sandbox that is not paused:\n%s", r)
	}
	if got := gwMustCall(t, sess, "instance", nil, ""); got != first {
		t.Errorf("after the refused pause the instance is %q, want the same process %q", got, first)
	}
	gwClose(t, sess)
}
