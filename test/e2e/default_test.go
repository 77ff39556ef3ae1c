package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// These tests use `mcpbox serve` with no config, as a person trying mcpbox
// would: the embedded default (the built-in workspace server over the
// current directory), driven by the official TypeScript client.

// TestDefaultServeStdio: an agent uses the default over stdio, and every
// attempt to leave the workspace fails as a tool error while the session
// goes on.
func TestDefaultServeStdio(t *testing.T) {
	nodeModules := requireNode(t)
	shadow := hostShadow(t)
	forEachMode(t, func(t *testing.T, m mode) {
		p := newDefaultProject(t, m)
		state := m.dir(t)
		port, accepted := loopbackListener(t)
		result := "result " + tsRandomHex(t) + "\n"
		pyMarker := "py-ok-" + tsRandomHex(t)
		type named struct {
			name string
			step tsStep
		}
		script := []named{
			{"tools", tsStep{"op": "listTools"}},
			{"list", tsCall("list_files", map[string]any{"path": "input", "depth": 3})},
			{"read", tsCall("read_file", map[string]any{"path": "input/hello.txt"})},
			{"search", tsCall("search_files", map[string]any{"pattern": p.needle})},
			{"write", tsCall("write_file", map[string]any{"path": "output/report/result.txt", "content": result})},
			{"ls", wsRun("ls")},
			{"python", wsRun("python3", "-c", "print('"+pyMarker+"')")},
			// Attempts, each to fail as a tool error.
			{"dotdot", tsCall("read_file", map[string]any{"path": "input/../hostdata/private.txt"})},
			{"dotdot abs", tsCall("read_file", map[string]any{"path": "/workspace/input/../../etc/passwd"})},
			{"outside", tsCall("read_file", map[string]any{"path": "/etc/passwd"})},
			{"shadow link", tsCall("read_file", map[string]any{"path": "input/shadow"})},
			{"host link", tsCall("read_file", map[string]any{"path": "input/hostlink/private.txt"})},
			{"write input", tsCall("write_file", map[string]any{"path": "input/hello.txt", "content": "pwned"})},
			{"edit input", tsCall("edit_file", map[string]any{"path": "input/hello.txt", "old": "hello", "new": "pwned"})},
			{"python write input", wsRun("python3", "-c", "open('/workspace/input/hello.txt', 'w').write('pwned')")},
			{"cat shadow", wsRun("cat", "/etc/shadow")},
			{"cat shadow link", wsRun("cat", "shadow")},
			{"net python", wsRun(pyConnect("1.1.1.1", 80)...)},
			{"net host loopback", wsRun(pyConnect("127.0.0.1", port)...)},
			{"net curl", wsRun("curl", "-sS", "-m", "5", "http://1.1.1.1/")},
			{"git clone", wsRun("git", "clone", "https://github.com/octocat/Hello-World.git", "/workspace/output/hw")},
			{"git push", wsRun("git", "push", "origin", "main")},
			// Branch names with a slash are common; the deny rule is "git push*".
			{"git push branch", wsRun("git", "push", "origin", "feature/x")},
			// Not attempts, but must not show what the links point to.
			{"search secret", tsCall("search_files", map[string]any{"pattern": "hostsecret-[0-9a-f]+"})},
			// The job lifetime is not configurable: stop a job instead.
			{"job start", tsCall("start_job", map[string]any{"argv": []string{"tail", "-f", p.followed}, "cwd": "input"})},
			{"job running", tsCall("job_status", map[string]any{"id": "job-1"})},
			{"job stop", tsCall("stop_job", map[string]any{"id": "job-1"})},
			{"job ended", tsCall("job_status", map[string]any{"id": "job-1"})},
			{"still working", tsCall("read_file", map[string]any{"path": "input/sub/todo.md"})},
		}
		steps := make([]tsStep, len(script))
		for i, s := range script {
			steps[i] = s.step
		}
		args := append([]string{"stdio", "--", "/usr/bin/env", "-C", p.dir, mcpboxBin},
			defaultServeArgs(t, m, p.dir, "--state-dir", state)...)
		replies := runTSClient(t, m, nodeModules, nil, steps, args...)
		r := map[string]tsReply{}
		for i, s := range script {
			r[s.name] = replies[i]
		}

		if d := cmp.Diff(workspaceTools, r["tools"].names(t, "tools")); d != "" {
			t.Errorf("tools/list (-want +got):\n%s", d)
		}
		list := r["list"].text()
		for _, f := range []string{"hello.txt", "sub/", "todo.md", "shadow", "hostlink", p.followed} {
			if r["list"].failed() || !strings.Contains(list, f) {
				t.Errorf("list_files input lacks %s: %v", f, r["list"])
			}
		}
		if strings.Contains(list, "private.txt") {
			t.Errorf("list_files followed the symlink to the host dir: %v", r["list"])
		}
		if r["read"].failed() || r["read"].text() != p.hello {
			t.Errorf("read_file input/hello.txt = %v, want the text %q", r["read"], p.hello)
		}
		if s := r["search"].text(); r["search"].failed() || !strings.Contains(s, "todo.md") || !strings.Contains(s, p.needle) {
			t.Errorf("search_files %s = %v, want a match in sub/todo.md", p.needle, r["search"])
		}
		got, err := os.ReadFile(filepath.Join(p.dir, "mcpbox-out", "report", "result.txt"))
		if r["write"].failed() || err != nil || string(got) != result {
			t.Errorf("write_file output/report/result.txt: host file %q (%v), want %q; reply %v", got, err, result, r["write"])
		}
		for _, f := range []string{"hello.txt", "sub", "shadow", "hostlink", p.followed} {
			if r["ls"].failed() || !strings.Contains(r["ls"].text(), f) {
				t.Errorf("ls in input lacks %s: %v", f, r["ls"])
			}
		}
		if r["python"].failed() || !strings.Contains(r["python"].text(), pyMarker) {
			t.Errorf("python3 does not run in the workspace, so the attempts below prove nothing: %v", r["python"])
		}

		for _, name := range []string{"dotdot", "dotdot abs", "outside", "shadow link", "host link",
			"write input", "edit input", "python write input", "cat shadow", "cat shadow link",
			"net python", "net host loopback", "net curl", "git clone", "git push", "git push branch"} {
			t.Logf("%s: %v", name, r[name])
			if !r[name].failed() {
				t.Errorf("%s: succeeded, want a tool error: %v", name, r[name])
			}
			if _, ok := r[name]["error"]; ok {
				t.Errorf("%s: a protocol error, want a tool result with isError: %v", name, r[name])
			}
		}
		if got, err := os.ReadFile(filepath.Join(p.dir, "hello.txt")); err != nil || string(got) != p.hello {
			t.Errorf("input hello.txt is now %q (%v), want %q", got, err, p.hello)
		}
		for _, name := range []string{"net python", "net host loopback", "net curl"} {
			if strings.Contains(r[name].text(), "CONNECTED") {
				t.Errorf("%s connected: %v", name, r[name])
			}
		}
		if n := accepted.Load(); n != 0 {
			t.Errorf("the host's loopback listener accepted %d connections from the workspace", n)
		}
		for _, name := range []string{"git push", "git push branch"} {
			if !strings.Contains(r[name].text(), "deny rule") {
				t.Errorf("%s: want a refusal by the deny list: %v", name, r[name])
			}
		}
		if _, err := os.Stat(filepath.Join(p.dir, "mcpbox-out", "hw")); err == nil {
			t.Errorf("git clone made output/hw")
		}

		if s := r["job start"].text(); r["job start"].failed() || !strings.Contains(s, "started job-1") {
			t.Fatalf("start_job = %v, want \"started job-1\"", r["job start"])
		}
		if s := r["job running"].text(); !strings.Contains(s, "job-1: running") {
			t.Errorf("job_status right after start_job = %v, want running", r["job running"])
		}
		if s := r["job stop"].text(); r["job stop"].failed() || !strings.Contains(s, "stopped by stop_job") {
			t.Errorf("stop_job = %v, want \"stopped by stop_job\"", r["job stop"])
		}
		if s := r["job ended"].text(); strings.Contains(s, "running") || !strings.Contains(s, "stopped by stop_job") {
			t.Errorf("job_status after stop_job = %v, want ended (stopped by stop_job)", r["job ended"])
		}
		if pids := procsWith(p.followed); len(pids) > 0 {
			t.Errorf("processes still following %s after the session: %v", p.followed, pids)
		}
		if r["still working"].failed() || r["still working"].text() != p.todo {
			t.Errorf("read_file after the attempts = %v, want %q", r["still working"], p.todo)
		}

		all, _ := json.Marshal(replies)
		if strings.Contains(string(all), p.secret) {
			t.Errorf("the host file's marker %s reached the client:\n%s", p.secret, all)
		}
		for _, line := range shadow {
			if strings.Contains(string(all), line) {
				t.Errorf("a line of the host's /etc/shadow reached the client:\n%s", all)
				break
			}
		}
	})
}

// TestDefaultServeHTTP: over HTTP the default makes up a token, prints
// where it is kept with a client config (the token itself only to a
// terminal, which this stderr is not), and refuses requests without it.
func TestDefaultServeHTTP(t *testing.T) {
	nodeModules := requireNode(t)
	forEachMode(t, func(t *testing.T, m mode) {
		if !m.root() {
			// The banner and token belong to the embedded default, which
			// requires cgroups; an unprivileged user has none here, and
			// with --config serve prints no banner.
			t.Skip("the embedded default needs cgroups, which the unprivileged user lacks here")
		}
		p := newDefaultProject(t, m)
		state := m.dir(t)
		served, url, token, client := defaultServeHTTP(t, p.dir, state)
		// ps names the token file (never the token) of the instance.
		ps := m.mcpbox(t, 60*time.Second, "", "ps", "--instances", "--state-dir", state)
		if tf := filepath.Join(state, "token"); ps.code != 0 || !strings.Contains(ps.stdout, "token in "+tf) || strings.Contains(ps.stdout+ps.stderr, token) {
			t.Errorf("mcpbox ps --instances: want the token file %s named, never the token:\n%s", tf, ps)
		}
		if url != served || !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/mcp") {
			t.Errorf("banner URL %q, serving line %q: want the same http://127.0.0.1:PORT/mcp", url, served)
		}
		if !strings.HasPrefix(token, "mcpbox_") || len(token) < 20 {
			t.Errorf("banner token %q: want mcpbox_ and a random text", token)
		}
		var cfg struct {
			MCPServers map[string]struct {
				Type    string            `json:"type"`
				URL     string            `json:"url"`
				Headers map[string]string `json:"headers"`
			} `json:"mcpServers"`
		}
		if err := json.Unmarshal([]byte(client), &cfg); err != nil {
			t.Fatalf("the banner's client config does not parse: %v\n%s", err, client)
		}
		if e, ok := cfg.MCPServers["mcpbox"]; len(cfg.MCPServers) != 1 || !ok || e.URL != url ||
			e.Headers["Authorization"] != "Bearer TOKEN" || e.Type != "http" {
			t.Errorf("the banner's client config = %+v, want one http server mcpbox at %s with the token's placeholder", cfg, url)
		}

		tsCheckRefusals(t, url, token)
		r := runTSClient(t, m, nodeModules, nil, []tsStep{
			{"op": "listTools"},
			tsCall("read_file", map[string]any{"path": "input/hello.txt"}),
		}, "http", url, "--token", token)
		if d := cmp.Diff(workspaceTools, r[0].names(t, "tools")); d != "" {
			t.Errorf("tools/list over HTTP (-want +got):\n%s", d)
		}
		if r[1].failed() || r[1].text() != p.hello {
			t.Errorf("read_file over HTTP = %v, want the text %q", r[1], p.hello)
		}
	})
}

// TestDefaultPrintConfig: the printed default is a valid config, the one
// in the source tree, the same wherever and by whomever it is printed.
func TestDefaultPrintConfig(t *testing.T) {
	source, err := os.ReadFile("../../internal/cli/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	forEachMode(t, func(t *testing.T, m mode) {
		dir := m.dir(t)
		got := printDefault(t, m, dir)
		if d := cmp.Diff(string(source), string(got)); d != "" {
			t.Errorf("serve --print-config differs from internal/cli/default.yaml (-source +printed):\n%s", d)
		}
		for _, s := range []string{dir, binDir, host, "/root", "/tmp", "nobody"} {
			if s != "" && strings.Contains(string(got), s) {
				t.Errorf("serve --print-config names %q, which is host-specific:\n%s", s, got)
			}
		}
		cfg := filepath.Join(dir, "mcpbox.yaml")
		m.writeFile(t, cfg, string(got), 0o644)
		if r := defaultRun(t, m, dir, "", "policy", "check", cfg); r.code != 0 || !strings.Contains(r.stdout+r.stderr, "ok") {
			t.Errorf("policy check of the printed default:\n%s", r)
		}
	})
}

// TestImportClaudeDesktop: a Claude Desktop config becomes a valid
// mcpbox.yaml without its credentials, and the rewritten client config
// launches mcpbox with it.
func TestImportClaudeDesktop(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		dir := m.dir(t)
		brave, github, bearer := "BSA"+tsRandomHex(t), "ghp_"+tsRandomHex(t)+tsRandomHex(t)[:12], "sk-"+tsRandomHex(t)
		shortcut := "Ctrl+Alt+" + tsRandomHex(t)[:4]
		in := filepath.Join(dir, "claude_desktop_config.json")
		m.writeFile(t, in, fmt.Sprintf(`{
  "globalShortcut": %q,
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/alice/Desktop", %q]
    },
    "brave-search": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-brave-search"],
      "env": {"BRAVE_API_KEY": %q}
    },
    "github": {
      "command": "docker",
      "args": ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"],
      "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": %q}
    },
    "linear": {
      "type": "http",
      "url": "https://mcp.linear.app/mcp",
      "headers": {"Authorization": "Bearer %s"}
    }
  }
}
`, shortcut, dir, brave, github, bearer), 0o644)
		credentials := []string{brave, github, bearer}

		r := defaultRun(t, m, dir, "", "import", in)
		if r.code != 0 {
			t.Fatalf("import:\n%s", r)
		}
		for _, c := range credentials {
			if strings.Contains(r.stdout+r.stderr, c) {
				t.Errorf("import copied the credential %q:\n%s", c, r)
			}
		}
		for _, s := range []string{"filesystem:", "brave-search:", "github:", "linear:", "https://mcp.linear.app/mcp", "env:BRAVE_API_KEY", "env:GITHUB_PERSONAL_ACCESS_TOKEN"} {
			if !strings.Contains(r.stdout, s) {
				t.Errorf("imported YAML lacks %q:\n%s", s, r.stdout)
			}
		}
		cfg := filepath.Join(dir, "mcpbox.yaml")
		m.writeFile(t, cfg, r.stdout, 0o644)
		if pc := defaultRun(t, m, dir, "", "policy", "check", cfg); pc.code != 0 {
			t.Errorf("policy check of the imported YAML:\n%s\nYAML:\n%s", pc, r.stdout)
		}

		rw := defaultRun(t, m, dir, "", "import", in, "--rewrite-client-config", "--config", cfg)
		if rw.code != 0 {
			t.Fatalf("import --rewrite-client-config:\n%s", rw)
		}
		for _, c := range credentials {
			if strings.Contains(rw.stdout+rw.stderr, c) {
				t.Errorf("import --rewrite-client-config copied the credential %q:\n%s", c, rw)
			}
		}
		var client map[string]any
		if err := json.Unmarshal([]byte(rw.stdout), &client); err != nil {
			t.Fatalf("the rewritten client config does not parse: %v\n%s", err, rw.stdout)
		}
		if client["globalShortcut"] != shortcut {
			t.Errorf("the rewritten client config lost globalShortcut: %v", client)
		}
		command, args := rewrittenServer(t, rw.stdout)
		if d := cmp.Diff([]string{"serve", "--config", cfg, "--stdio"}, args); command != mcpboxBin || d != "" {
			t.Errorf("the rewritten server runs %s %v, want %s serve --config %s --stdio (-want +got args):\n%s", command, args, mcpboxBin, cfg, d)
		}
	})
}

// TestImportRunFilesystem: a client config with server-filesystem,
// imported and given the node modules as a mount, serves through the
// rewritten client entry the tools the server has directly.
func TestImportRunFilesystem(t *testing.T) {
	nodeModules := requireNode(t)
	want := tsDirect(t, nodeModules, nil, []tsStep{{"op": "listTools"}},
		filepath.Join(nodeModules, "@modelcontextprotocol/server-filesystem/dist/index.js"), t.TempDir())
	forEachMode(t, func(t *testing.T, m mode) {
		dir := m.dir(t)
		in := filepath.Join(dir, "claude_desktop_config.json")
		m.writeFile(t, in, fmt.Sprintf(`{"mcpServers": {"files": {"command": "node", "args": [%q, "/workspace/output"]}}}`, tsFilesystemJS), 0o644)
		r := defaultRun(t, m, dir, "", "import", in)
		if r.code != 0 {
			t.Fatalf("import:\n%s", r)
		}
		// What a person would add: the modules, a state dir, and (unprivileged,
		// without cgroups) the layers to require.
		yml := strings.Replace(r.stdout, "\n    filesystem:\n", fmt.Sprintf("\n    filesystem:\n      mounts: [{source: %q, target: /opt/mcp/node_modules, mode: ro}]\n", nodeModules), 1)
		extra := fmt.Sprintf("state_dir: %q\n", filepath.Join(m.dir(t), "state"))
		if !m.root() {
			extra += "sandbox: {require: [userns, mountns, pidns, netns, seccomp, landlock, idmap]}\n"
		}
		yml = strings.Replace(yml, "\nversion: 1\n", "\nversion: 1\n"+extra, 1)
		// ... and, to write without a review of every write_file (which
		// server-filesystem marks destructive), no annotation review.
		yml = strings.Replace(yml, "\n      allow: ['*']\n", "\n      allow: ['*']\n      approve_annotations: []\n", 1)
		if !strings.Contains(yml, "approve_annotations: []") {
			t.Fatalf("the imported YAML has no tools.allow to extend:\n%s", r.stdout)
		}
		if !strings.Contains(yml, "/opt/mcp/node_modules, mode: ro") || !strings.Contains(yml, extra) {
			t.Fatalf("the imported YAML has no place for the mount and state dir:\n%s", r.stdout)
		}
		cfg := filepath.Join(dir, "mcpbox.yaml")
		m.writeFile(t, cfg, yml, 0o644)
		rw := defaultRun(t, m, dir, "", "import", in, "--rewrite-client-config", "--config", cfg)
		if rw.code != 0 {
			t.Fatalf("import --rewrite-client-config:\n%s", rw)
		}
		command, args := rewrittenServer(t, rw.stdout)

		content := "imported " + tsRandomHex(t)
		got := runTSClient(t, m, nodeModules, nil, []tsStep{
			{"op": "listTools"},
			tsCall("write_file", map[string]any{"path": "/workspace/output/x.txt", "content": content}),
			tsCall("read_text_file", map[string]any{"path": "/workspace/output/x.txt"}),
		}, append([]string{"stdio", "--", command}, args...)...)
		if d := cmp.Diff(want[0].byName(t, "tools"), got[0].byName(t, "tools")); d != "" {
			t.Errorf("tools/list through the imported config differs from the direct run (-direct +mcpbox):\n%s", d)
		}
		if got[1].failed() || got[2].failed() || got[2].text() != content {
			t.Errorf("write then read through the imported config: %v / %v, want the text %q", got[1], got[2], content)
		}
	})
}

// TestBuiltinJobLifetime: a background job that outlives
// commands.job_lifetime is killed, and job_status says so.
func TestBuiltinJobLifetime(t *testing.T) {
	nodeModules := requireNode(t)
	m := modes(t)[0]
	p := newDefaultProject(t, m)
	cfg := string(printDefault(t, m, p.dir))
	cfg = strings.Replace(cfg, "    commands:\n", "    commands:\n      job_lifetime: 1s\n", 1)
	cfg = strings.Replace(cfg, "allow: [ls,", "allow: [sleep, ls,", 1)
	path := filepath.Join(p.dir, "mcpbox.yaml")
	m.writeFile(t, path, cfg, 0o644)
	steps := []tsStep{
		tsCall("start_job", map[string]any{"argv": []string{"sleep", "600"}}),
		wsRun("sleep", "3"), // outlive the 1 s lifetime
		tsCall("job_status", map[string]any{"id": "job-1"}),
	}
	args := []string{"stdio", "--", "/usr/bin/env", "-C", p.dir, mcpboxBin, "serve", "--config", path, "--state-dir", filepath.Join(m.dir(t), "state")}
	r := runTSClient(t, m, nodeModules, nil, steps, args...)
	if s := r[0].text(); !strings.Contains(s, "started job-1") {
		t.Fatalf("start_job = %v", r[0])
	}
	if s := r[2].text(); !strings.Contains(s, "ran longer than the job lifetime (1s)") {
		t.Fatalf("job_status after the lifetime = %v, want killed", r[2])
	}
}
