package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeKilled SIGKILLs `mcpbox serve` while its sandboxes run: no
// process of theirs may survive it, and the next start on the same state
// dir must start normally and remove what the crash left (session
// workspaces, cgroups, egress socket dirs) while keeping the agent's
// workspace.
func TestServeKilled(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		marker := strconv.FormatInt(time.Now().UnixNano()%1000000+400000, 10)
		cfg := crashConfig(t, m, marker)
		state := filepath.Join(filepath.Dir(cfg), "state")
		g := crashServe(t, m, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sess := gwConnect(t, ctx, g.url, nil, nil, gwLegacy)
		for _, srv := range []string{"sess", "agent", "net"} {
			gwMustCall(t, sess, srv+"__whoami", nil, srv)
		}
		procs := crashDescendants(g.cmd.Process.Pid)
		if len(procs) < 6 { // an init and a workload per server
			t.Fatalf("found %d sandbox processes under mcpbox serve, want at least 6: %v", len(procs), procs)
		}
		cgroups := crashCgroups(t, procs)
		if m.root() && len(cgroups) == 0 {
			t.Fatal("no sandbox cgroup found while the sandboxes ran")
		}
		// mcpbox-egress-PID.START-RANDOM, or, before, PID-RANDOM.
		egressDirs, _ := filepath.Glob(fmt.Sprintf("/tmp/mcpbox-egress-%d.*", g.cmd.Process.Pid))
		old, _ := filepath.Glob(fmt.Sprintf("/tmp/mcpbox-egress-%d-*", g.cmd.Process.Pid))
		if egressDirs = append(egressDirs, old...); len(egressDirs) == 0 {
			t.Fatal("no egress socket dir found while the sandboxes ran")
		}
		sessionDirs := crashGlob(t, state, "workspaces/*/sess/sessions/*")
		agentOut := crashGlob(t, state, "workspaces/*/agent/output")
		keep := filepath.Join(agentOut[0], "keep.txt")
		m.writeFile(t, keep, "the agent's file", 0o644)
		m.writeFile(t, filepath.Join(sessionDirs[0], "output", "scratch.txt"), "session scratch", 0o644)

		killed := time.Now()
		g.kill(t)
		// Within 10 s, every process of the sandboxes is gone: the last
		// workload would otherwise run `sleep MARKER` once its stdin closed.
		crashWaitGone(t, procs)
		waitGone(t, "sleep\x00"+marker+"\x00")
		crashNoMounts(t, filepath.Dir(cfg))
		deadSock := filepath.Join(state, "instances", fmt.Sprintf("%d.sock", g.cmd.Process.Pid))
		if _, err := os.Lstat(deadSock); err != nil {
			t.Fatalf("the killed gateway's admin socket: %v (the restart below should meet it)", err)
		}

		// Sandbox cgroups are spared until a few seconds old (package
		// cgroup); those of the crash are older by the time the restarted
		// gateway looks.
		time.Sleep(time.Until(killed.Add(staleGrace)))
		g2 := gwServe(t, m, cfg)
		sess2 := gwConnect(t, ctx, g2.url, nil, nil, gwLegacy)
		gwMustCall(t, sess2, "agent__whoami", nil, "agent")
		if r := m.command(ctx, "ps", "--config", cfg); r.Run() != nil {
			t.Errorf("mcpbox ps cannot reach the restarted gateway's admin socket")
		}
		crashWaitRemoved(t, "cgroups of the killed gateway's sandboxes", cgroups)
		crashWaitRemoved(t, "egress socket dirs of the killed gateway", egressDirs)
		crashWaitRemoved(t, "session workspaces of the killed gateway", sessionDirs)
		crashWaitRemoved(t, "the killed gateway's admin socket and record", []string{deadSock, strings.TrimSuffix(deadSock, ".sock") + ".json"})
		if b, err := os.ReadFile(keep); err != nil || string(b) != "the agent's file" {
			t.Errorf("the agent workspace's file after the restart: %q, %v; want it kept", b, err)
		}
		// The audit says a serve ended without stopping, by its pid.
		logs := m.mcpbox(t, 60*time.Second, "", "logs", "--json", "--event", "gateway_crash", "--config", cfg)
		if want := fmt.Sprintf(`"pid":"%d"`, g.cmd.Process.Pid); logs.code != 0 || !strings.Contains(logs.stdout, want) {
			t.Errorf("no gateway_crash record naming %s:\n%s", want, logs)
		}
	})
}

// crashConfig writes a serve config with three servers: one of session
// scope with an output dir, one with an agent output dir, and one with
// egress, whose workload sleeps once the MCP server ends, as a workload
// that ignores its closed stdin would.
func crashConfig(t *testing.T, m mode, marker string) string {
	t.Helper()
	bin := goBuild(t, gwServerPkg)
	dir := gwDir(t, m)
	server := func(name string, command []string) map[string]any {
		return map[string]any{
			"command": command,
			"filesystem": map[string]any{
				"mounts": []map[string]string{{"source": bin, "target": "/opt/bin", "mode": "ro"}},
				"output": map[string]any{},
			},
			"tools": map[string]any{"allow": []string{"*"}},
		}
	}
	sess := server("sess", []string{"/opt/bin/mcpserver", "-name", "sess"})
	sess["scope"] = "session"
	net := server("net", []string{"/bin/sh", "-c", "/opt/bin/mcpserver -name net; exec sleep " + marker})
	net["network"] = map[string]any{"egress": []map[string]any{{"host": "example.com"}}}
	return hsWriteConfig(t, m, dir, map[string]any{
		"sess":  sess,
		"agent": server("agent", []string{"/opt/bin/mcpserver", "-name", "agent"}),
		"net":   net,
	})
}

// crashGateway is a serve this test SIGKILLs.
type crashGateway struct {
	url  string
	cmd  *exec.Cmd
	logs *gwLog
	done chan struct{}
}

// crashServe starts `mcpbox serve` for cfg; it is SIGKILLed at cleanup if
// the test has not killed it.
func crashServe(t *testing.T, m mode, cfg string) *crashGateway {
	t.Helper()
	g := &crashGateway{logs: newGWLog(), done: make(chan struct{})}
	g.cmd = m.command(context.Background(), noAuthArgs(t, []string{"serve", "--http", "127.0.0.1:0", "--config", cfg})...)
	g.cmd.Stdout, g.cmd.Stderr = g.logs, g.logs
	if err := g.cmd.Start(); err != nil {
		t.Fatalf("starting mcpbox serve: %v", err)
	}
	go func() { _ = g.cmd.Wait(); close(g.done) }()
	t.Cleanup(func() {
		g.kill(t)
		if t.Failed() {
			t.Logf("killed mcpbox serve output:\n%s", g.logs)
		}
	})
	select {
	case g.url = <-g.logs.url:
	case <-g.done:
		t.Fatalf("mcpbox serve exited before listening\n%s", g.logs)
	case <-time.After(60 * time.Second):
		t.Fatalf("mcpbox serve printed no serving line within 60 s\n%s", g.logs)
	}
	return g
}

// kill SIGKILLs the gateway and reaps it, so that its pid is gone.
func (g *crashGateway) kill(t *testing.T) {
	_ = g.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		t.Errorf("mcpbox serve not reaped within 10 s of SIGKILL")
	}
}

// crashProc is a process, told from a later one with its pid by its start
// time.
type crashProc struct {
	pid   int
	start string
	cmd   string
}

// crashDescendants lists the processes below pid.
func crashDescendants(pid int) []crashProc {
	children := map[int][]crashProc{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, start, ok := crashStat(p)
		if !ok {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		children[ppid] = append(children[ppid], crashProc{p, start, strings.ReplaceAll(string(cmd), "\x00", " ")})
	}
	var out []crashProc
	queue := []int{pid}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
		queue = queue[1:]
	}
	return out
}

// crashStat reads a process's parent and start time; ok is false for a
// process that is gone or a zombie.
func crashStat(pid int) (ppid int, start string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", false
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0, "", false
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[19], true
}

func (p crashProc) alive() bool {
	_, start, ok := crashStat(p.pid)
	return ok && start == p.start
}

// crashWaitGone waits up to 10 s for procs to end, then kills and reports
// the survivors.
func crashWaitGone(t *testing.T, procs []crashProc) {
	t.Helper()
	var left []crashProc
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left = slices.DeleteFunc(slices.Clone(procs), func(p crashProc) bool { return !p.alive() })
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	for _, p := range left {
		_ = killPid(p.pid, p.alive)
	}
	t.Fatalf("sandbox processes outlived the killed gateway by 10 s: %v", left)
}

var crashSandboxID = regexp.MustCompile(`/mcpbox/(sbx_[A-Za-z0-9]+)$`)

// crashCgroups lists the sandbox cgroup dirs procs were in.
func crashCgroups(t *testing.T, procs []crashProc) []string {
	t.Helper()
	ids := map[string]bool{}
	for _, p := range procs {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/cgroup")
		for _, line := range strings.Split(string(b), "\n") {
			if m := crashSandboxID.FindStringSubmatch(line); m != nil {
				ids[m[1]] = true
			}
		}
	}
	var dirs []string
	for _, d := range sandboxCgroups(t) {
		if ids[filepath.Base(d)] {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// crashNoMounts fails if a host mount lies under dir or is an egress
// socket.
func crashNoMounts(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && (strings.HasPrefix(f[1], dir) || strings.Contains(f[1], "mcpbox-egress-")) {
			t.Errorf("mount left on the host: %s", line)
		}
	}
}

// crashGlob returns the matches of pattern under dir, failing if none.
func crashGlob(t *testing.T, dir, pattern string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, pattern))
	if len(m) == 0 {
		t.Fatalf("nothing matches %s in %s", pattern, dir)
	}
	return m
}

// crashWaitRemoved waits up to 15 s for every path to be gone.
func crashWaitRemoved(t *testing.T, what string, paths []string) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left = slices.DeleteFunc(slices.Clone(paths), func(p string) bool {
			_, err := os.Lstat(p)
			return err != nil
		})
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("%s not removed after the restart: %v", what, left)
	}
}
