package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestManyInstances: four `mcpbox serve` run at once for two projects of
// one user: project A from two stdio clients and over HTTP, project B
// from a stdio client. Each serves tool calls. `mcpbox ps` with no flags
// in a project lists that project's instances (pid, transport, URL) and
// their sandboxes; `--all` lists all four. A sandbox of one instance is
// stopped by ID from the project dir, and the audit log the three
// instances of A share verifies as one chain.
func TestManyInstances(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		home := m.dir(t)
		xdg := filepath.Join(home, "xdg")
		env := []string{"HOME=" + home, "XDG_STATE_HOME=" + xdg}
		projA, projB := m.dir(t), m.dir(t)
		cfgA := instConfig(t, m, projA, "alpha")
		cfgB := instConfig(t, m, projB, "beta")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()

		a1, pidA1 := instStdio(t, ctx, m, projA, env, "--config", cfgA)
		a2, pidA2 := instStdio(t, ctx, m, projA, env, "--config", cfgA)
		b1, pidB1 := instStdio(t, ctx, m, projB, env, "--config", cfgB)
		h := gwServeIn(t, m, projA, []string{"--config", cfgA}, env...)
		ah := gwConnect(t, ctx, h.url, nil, nil, gwLegacy)
		for _, s := range []*mcp.ClientSession{a1, a2, ah} {
			gwMustCall(t, s, "whoami", nil, "alpha")
		}
		gwMustCall(t, b1, "whoami", nil, "beta")
		pidAH := h.cmd.Process.Pid

		// In project A (or below it), with no flags: its three instances.
		sub := filepath.Join(projA, "sub")
		m.mkdir(t, sub)
		insts := instPS(t, m, sub, env, "--instances")
		if got := instPIDs(insts); !slices.Equal(got, sorted(pidA1, pidA2, pidAH)) {
			t.Fatalf("ps --instances in project A lists pids %v, want %v\n%v", got, sorted(pidA1, pidA2, pidAH), insts)
		}
		for _, in := range insts {
			if in["project"] != projA {
				t.Errorf("instance %v: project %v, want %s", in["pid"], in["project"], projA)
			}
			wantT, wantURL := "stdio", ""
			if int(in["pid"].(float64)) == pidAH {
				wantT, wantURL = "http", h.url
			}
			if in["transport"] != wantT || fmt.Sprint(cmpOrAny(in["url"], "")) != wantURL {
				t.Errorf("instance %v: transport %v url %v, want %s %q", in["pid"], in["transport"], in["url"], wantT, wantURL)
			}
		}
		stateA := insts[0]["state_dir"].(string)
		if !strings.HasPrefix(stateA, filepath.Join(xdg, "mcpbox", "projects")+"/") {
			t.Errorf("project A's state dir %s is not under $XDG_STATE_HOME/mcpbox/projects", stateA)
		}
		// Their sandboxes, each with the instance that runs it.
		boxes := instPS(t, m, projA, env)
		owners := map[int]string{}
		for _, b := range boxes {
			owners[int(b["instance"].(float64))] = b["id"].(string)
		}
		for _, pid := range []int{pidA1, pidA2, pidAH} {
			if owners[pid] == "" {
				t.Errorf("ps in project A shows no sandbox of instance %d: %v", pid, boxes)
			}
		}
		text := instRun(t, m, projA, env, "ps")
		t.Logf("mcpbox ps in project A:\n%s", text.stdout)
		t.Logf("mcpbox ps --all:\n%s", instRun(t, m, home, env, "ps", "--all").stdout)
		if text.code != 0 || !strings.Contains(text.stdout, h.url) || !strings.Contains(text.stdout, owners[pidA2]) {
			t.Errorf("ps in project A: want the HTTP URL and the sandboxes\n%s", text)
		}

		// Project B: its one instance, in its own state dir.
		instsB := instPS(t, m, projB, env, "--instances")
		if got := instPIDs(instsB); !slices.Equal(got, []int{pidB1}) {
			t.Errorf("ps --instances in project B lists %v, want [%d]", got, pidB1)
		}
		if len(instsB) == 1 && instsB[0]["state_dir"] == stateA {
			t.Errorf("projects A and B share the state dir %s", stateA)
		}
		// --all: every instance, from anywhere.
		all := instPS(t, m, home, env, "--all", "--instances")
		if got := instPIDs(all); !slices.Equal(got, sorted(pidA1, pidA2, pidAH, pidB1)) {
			t.Errorf("ps --all lists %v, want %v", got, sorted(pidA1, pidA2, pidAH, pidB1))
		}

		// snapshot --all, from anywhere, finds the instance that runs the
		// sandbox; the snapshot goes under that instance's state dir.
		if boxesB := instPS(t, m, projB, env); len(boxesB) == 1 && len(instsB) == 1 {
			r := instRun(t, m, home, env, "snapshot", "--all", boxesB[0]["id"].(string))
			want := filepath.Join(instsB[0]["state_dir"].(string), "snapshots", boxesB[0]["id"].(string)+"-")
			if got := strings.TrimSpace(r.stdout); r.code != 0 || !strings.HasPrefix(got, want) {
				t.Errorf("snapshot --all of project B's sandbox: %s; want a file %s...", r, want)
			}
		} else {
			t.Errorf("project B: sandboxes %v, instances %v; want one of each", boxesB, instsB)
		}

		// A port taken by an instance: the error names its project and
		// offers port 0.
		// It has not started: the audit log records no start of it.
		starts := func() int {
			return strings.Count(instRun(t, m, projB, env, "logs", "--event", "policy_reload", "--json").stdout, `"reason":"start"`)
		}
		before := starts()
		hostPort := strings.TrimSuffix(strings.TrimPrefix(h.url, "http://"), "/mcp")
		if r := instRun(t, m, projB, env, "serve", "--config", cfgB, "--http", hostPort); r.code == 0 ||
			!strings.Contains(r.stderr, fmt.Sprintf("mcpbox serve pid %d of project %s", pidAH, projA)) || !strings.Contains(r.stderr, "--http 127.0.0.1:0") {
			t.Errorf("serve on the port of instance %d: want an error naming it and --http 127.0.0.1:0\n%s", pidAH, r)
		}
		if after := starts(); before != 1 || after != before {
			t.Errorf("project B's log records %d starts before a serve that could not listen, %d after; want 1, 1", before, after)
		}

		// stop ID finds the instance that owns the sandbox; its client's
		// next call gets a new one.
		if r := instRun(t, m, projA, env, "stop", owners[pidA2]); r.code != 0 {
			t.Errorf("stop %s of instance %d from project A:\n%s", owners[pidA2], pidA2, r)
		}
		gwMustCall(t, a2, "whoami", nil, "alpha")
		gwMustCall(t, a1, "whoami", nil, "alpha")
		// The audit log the three instances wrote at once is one chain.
		if r := instRun(t, m, projA, env, "logs", "verify"); r.code != 0 {
			t.Errorf("logs verify in project A:\n%s", r)
		}
	})
}

// instRun runs `mcpbox ARGS` as m's user in dir with env added, bounded
// by 60 s.
func instRun(t *testing.T, m mode, dir string, env []string, args ...string) result {
	t.Helper()
	return runIn(t, m, dir, "", env, args...)
}

// instConfig writes dir/mcpbox.yaml with one test server, no state_dir
// (the project's own is used).
func instConfig(t *testing.T, m mode, dir, name string) string {
	t.Helper()
	bin := goBuild(t, gwServerPkg)
	cfg := map[string]any{"version": 1, "servers": map[string]any{name: map[string]any{
		"command":    []string{"/opt/bin/mcpserver", "-name", name},
		"filesystem": map[string]any{"mounts": []map[string]string{{"source": bin, "target": "/opt/bin", "mode": "ro"}}, "output": map[string]any{}},
		"tools":      map[string]any{"allow": []string{"*"}},
	}}}
	if !m.root() {
		cfg["sandbox"] = map[string]any{"require": []string{"userns", "mountns", "pidns", "netns", "seccomp", "landlock", "idmap"}}
	}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "mcpbox.yaml")
	m.writeFile(t, path, string(b), 0o644)
	return path
}

// TestSandboxCannotPoseAsGateway: a repository's config (never served)
// names as its state_dir a directory that a sandbox writes, where a
// process in the sandbox writes an instance record and listens on its
// admin socket, as the same host uid in unprivileged mode. Admin commands
// in the project see the real serve only: the fake is no live instance
// (its peer is in another user namespace), so it can neither hide the
// real one nor answer for it.
func TestSandboxCannotPoseAsGateway(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		home := m.dir(t)
		env := []string{"HOME=" + home, "XDG_STATE_HOME=" + filepath.Join(home, "xdg")}
		proj := m.dir(t)
		cfg := filepath.Join(proj, "zz.yaml") // after the hostile aa.yaml
		if err := os.Rename(instConfig(t, m, proj, "alpha"), cfg); err != nil {
			t.Fatal(err)
		}
		m.writeFile(t, filepath.Join(proj, "aa.yaml"), "version: 1\nstate_dir: ./out/st\nservers: {x: {command: [x]}}\n", 0o644)
		out := filepath.Join(proj, "out")
		m.mkdir(t, out)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sess, pid := instStdio(t, ctx, m, proj, env, "--config", cfg)
		gwMustCall(t, sess, "whoami", nil, "alpha")

		fake := m.command(ctx, append(append([]string{"exec"}, m.flags...), "--input", attackDir, "--output", out, "--",
			"/workspace/input/attack", "fake-instance", "/workspace/output/st")...)
		stdin, err := fake.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := fake.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := fake.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { stdin.Close(); _ = fake.Wait() }()
		if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "fake-instance: listening\n" {
			t.Fatalf("the fake instance did not start: %q, %v", line, err)
		}

		insts := instPS(t, m, proj, env, "--instances")
		if got := instPIDs(insts); !slices.Equal(got, []int{pid}) {
			t.Errorf("ps --instances in the project lists pids %v, want only the real serve's %d", got, pid)
		}
		if r := instRun(t, m, proj, env, "ps", "--instances", "--state-dir", filepath.Join(out, "st")); r.code != 1 || !strings.Contains(r.stderr, "no mcpbox serve is running") || strings.Contains(r.stdout, "4242") {
			t.Errorf("ps --instances on the sandbox's state dir shows the fake:\n%s", r)
		}
	})
}

// instStdio starts `mcpbox serve --stdio ARGS` in dir as a client would
// and returns the session and the serve's pid; closed at cleanup.
func instStdio(t *testing.T, ctx context.Context, m mode, dir string, env []string, args ...string) (*mcp.ClientSession, int) {
	t.Helper()
	cmd := m.command(context.Background(), append([]string{"serve", "--stdio"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(cmd.Env, env...)
	logs := newGWLog()
	cmd.Stderr = logs
	client := mcp.NewClient(&mcp.Implementation{Name: "instances-e2e", Version: "1"}, nil)
	cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
	defer ccancel()
	sess, err := client.Connect(cctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		gwReap(cmd)
		t.Fatalf("connecting to mcpbox serve --stdio in %s: %v\n%s", dir, err, logs)
	}
	t.Cleanup(func() {
		gwClose(t, sess)
		gwReap(cmd)
		if t.Failed() {
			t.Logf("mcpbox serve --stdio (%s) stderr:\n%s", dir, logs)
		}
	})
	return sess, cmd.Process.Pid
}

// instPS runs `mcpbox ps --json ARGS` in dir and returns its objects.
func instPS(t *testing.T, m mode, dir string, env []string, args ...string) []map[string]any {
	t.Helper()
	r := instRun(t, m, dir, env, append([]string{"ps", "--json"}, args...)...)
	if r.code != 0 {
		t.Fatalf("ps %v in %s:\n%s", args, dir, r)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var o map[string]any
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatalf("ps line %q: %v", line, err)
		}
		out = append(out, o)
	}
	return out
}

func instPIDs(objs []map[string]any) []int {
	var pids []int
	for _, o := range objs {
		if p, ok := o["pid"].(float64); ok {
			pids = append(pids, int(p))
		}
	}
	slices.Sort(pids)
	return pids
}

func sorted(v ...int) []int { slices.Sort(v); return v }

func cmpOrAny(v, def any) any {
	if v == nil {
		return def
	}
	return v
}

// TestInstancesShareNoOverlay: two stdio clients of one project are one
// agent (_local) in two instances; with filesystem.input.mode: overlay
// they would mount one upper dir twice, which overlayfs leaves undefined.
// The second instance's sandbox is refused with a message that says why
// and what to do; once the first has ended, a new client gets it. The
// state dir's path is longer than a unix socket address holds: the
// instances' sockets work all the same.
func TestInstancesShareNoOverlay(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		home, proj := m.dir(t), m.dir(t)
		xdg := filepath.Join(home, strings.Repeat("x", 60))
		m.mkdir(t, xdg)
		env := []string{"HOME=" + home, "XDG_STATE_HOME=" + xdg}
		m.writeFile(t, filepath.Join(proj, "a.txt"), "project file\n", 0o644)
		cfg := map[string]any{"version": 1, "servers": map[string]any{"workspace": map[string]any{
			"builtin":    "workspace",
			"filesystem": map[string]any{"input": map[string]any{"source": ".", "mode": "overlay"}, "output": map[string]any{}},
			"tools":      map[string]any{"allow": []string{"*"}},
		}}}
		if !m.root() {
			cfg["sandbox"] = map[string]any{"require": []string{"userns", "mountns", "pidns", "netns", "seccomp", "landlock", "idmap"}}
		}
		b, _ := json.Marshal(cfg)
		path := filepath.Join(proj, "mcpbox.yaml")
		m.writeFile(t, path, string(b), 0o644)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		first, pid := instStdio(t, ctx, m, proj, env, "--config", path)
		gwMustCall(t, first, "read_file", map[string]any{"path": "input/a.txt"}, "project file\n")
		if got := instPIDs(instPS(t, m, proj, env, "--instances")); !slices.Equal(got, []int{pid}) {
			t.Errorf("ps --instances with a long state dir path: %v, want [%d]", got, pid)
		}

		cmd := m.command(ctx, "serve", "--stdio", "--config", path)
		cmd.Dir, cmd.Env = proj, append(cmd.Env, env...)
		client := mcp.NewClient(&mcp.Implementation{Name: "instances-e2e", Version: "1"}, nil)
		sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err == nil {
			_, cerr := gwCall(ctx, sess, "read_file", map[string]any{"path": "input/a.txt"})
			sess.Close()
			err = cerr
		}
		gwReap(cmd)
		if err == nil || !strings.Contains(err.Error(), "in use by another mcpbox serve") || !strings.Contains(err.Error(), "scope: session") {
			t.Errorf("a second instance on the same overlay: %v; want a refusal saying it is in use and suggesting scope: session", err)
		}

		gwClose(t, first) // its serve exits, its sandbox ends
		deadline := time.Now().Add(30 * time.Second)
		for {
			cmd := m.command(ctx, "serve", "--stdio", "--config", path)
			cmd.Dir, cmd.Env = proj, append(cmd.Env, env...)
			sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
			var text string
			if err == nil {
				text, err = gwCall(ctx, sess, "read_file", map[string]any{"path": "input/a.txt"})
				sess.Close()
			}
			gwReap(cmd)
			if err == nil && strings.Contains(text, "project file") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a new instance after the first ended: %q %v", text, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	})
}
