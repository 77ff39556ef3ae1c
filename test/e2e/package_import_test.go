package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPackageServersImported imports a Claude Desktop config of three
// real npm servers (filesystem with a host dir, memory, everything) and
// serves it unedited: the packages come from a loopback registry, each
// server is called through its prefixed tools, the audit log holds no
// egress of the server sandboxes beyond the installers', and a second
// start asks the registry nothing.
func TestPackageServersImported(t *testing.T) {
	modules := requireNode(t)
	for _, p := range []string{"server-filesystem", "server-memory", "server-everything"} {
		if _, err := os.Stat(filepath.Join(modules, "@modelcontextprotocol", p, "package.json")); err != nil {
			t.Skipf("%s not installed: %v", p, err)
		}
	}
	reg := newNPMRegistry(t, modules)
	regHost := strings.TrimSuffix(strings.TrimPrefix(reg.url(), "http://"), "/")
	forEachMode(t, func(t *testing.T, m mode) {
		dir := m.dir(t)
		// The host dir the filesystem server is given, with a marker the
		// server must read through its mount.
		projects := filepath.Join(dir, "projects")
		m.mkdir(t, projects)
		marker := "marker-" + gwHex(8)
		m.writeFile(t, filepath.Join(projects, "marker.txt"), marker+"\n", 0o644)

		claude := map[string]any{"mcpServers": map[string]any{
			"filesystem": map[string]any{"command": "npx", "args": []string{"-y", "@modelcontextprotocol/server-filesystem", projects}},
			"memory":     map[string]any{"command": "npx", "args": []string{"-y", "@modelcontextprotocol/server-memory"}},
			"everything": map[string]any{"command": "npx", "args": []string{"-y", "@modelcontextprotocol/server-everything"}},
		}}
		b, _ := json.MarshalIndent(claude, "", "  ")
		client := filepath.Join(dir, "claude_desktop_config.json")
		m.writeFile(t, client, string(b), 0o644)
		r := m.mcpbox(t, 30*time.Second, "", "import", client)
		if r.code != 0 {
			t.Fatalf("import:\n%s", r)
		}
		for _, w := range []string{
			"package: npm:@modelcontextprotocol/server-filesystem@latest",
			"package: npm:@modelcontextprotocol/server-memory@latest",
			"package: npm:@modelcontextprotocol/server-everything@latest",
			"# Was: npx -y @modelcontextprotocol/server-filesystem " + projects + "\n",
			"# Was: npx -y @modelcontextprotocol/server-memory\n",
			"# Was: npx -y @modelcontextprotocol/server-everything\n",
			"# " + projects + " is mounted read-only at /data/projects",
			"args: [/data/projects]",
			"source: " + projects + "\n",
			"target: /data/projects\n",
			// server-memory writes beside its code (read-only here) unless
			// told otherwise.
			"MEMORY_FILE_PATH: /workspace/output/memory.jsonl\n",
		} {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("import's config lacks %q", w)
			}
		}
		if strings.Contains(r.stdout, "command:") || strings.Contains(r.stdout, "args: ["+projects) {
			t.Errorf("import kept a command or the host path argument")
		}
		if t.Failed() {
			t.Fatalf("import:\n%s", r)
		}
		// The imported config as is, plus where this test keeps state and
		// what an unprivileged user's sandboxes need here.
		cfg := r.stdout + "state_dir: " + filepath.Join(dir, "state") + "\n"
		if !m.root() {
			cfg += "sandbox: {require: [userns, mountns, pidns, netns, seccomp, landlock, idmap]}\n"
		}
		cfgPath := filepath.Join(dir, "mcpbox.yaml")
		m.writeFile(t, cfgPath, cfg, 0o644)
		env := []string{"NPM_CONFIG_REGISTRY=" + reg.url(), "HOME=" + dir}

		// First start: installs the three packages, then serves them.
		// Those installed after serve began serving join the session.
		changed := make(chan struct{}, 1)
		sess, logs, stop := pkgServeWith(t, m, cfgPath, listChanged(changed), env...)
		waitTools(t, sess, changed, logs, "filesystem__list_directory", "filesystem__read_text_file", "memory__create_entities", "memory__read_graph", "everything__echo")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		tools, err := sess.ListTools(ctx, nil)
		cancel()
		if err != nil {
			stop()
			t.Fatalf("tools/list: %v\n%s", err, logs)
		}
		names := map[string]bool{}
		for _, tool := range tools.Tools {
			names[tool.Name] = true
		}
		for n := range names {
			if !strings.HasPrefix(n, "filesystem__") && !strings.HasPrefix(n, "memory__") && !strings.HasPrefix(n, "everything__") {
				t.Errorf("tool %s has no server prefix", n)
			}
		}
		if t.Failed() {
			stop()
			t.Fatalf("tools: %v\n%s", names, logs)
		}
		if got := gwMustCall(t, sess, "filesystem__list_directory", map[string]any{"path": "/data/projects"}, ""); !strings.Contains(got, "marker.txt") {
			t.Errorf("list_directory /data/projects: %q", got)
		}
		if got := gwMustCall(t, sess, "filesystem__read_text_file", map[string]any{"path": "/data/projects/marker.txt"}, ""); strings.TrimSpace(got) != marker {
			t.Errorf("read_text_file marker.txt: %q, want %q", got, marker)
		}
		entity := "mcpbox-" + gwHex(4)
		gwMustCall(t, sess, "memory__create_entities", map[string]any{"entities": []map[string]any{
			{"name": entity, "entityType": "project", "observations": []string{"imported from Claude"}}}}, "")
		if got := gwMustCall(t, sess, "memory__read_graph", map[string]any{}, ""); !strings.Contains(got, entity) || !strings.Contains(got, "imported from Claude") {
			t.Errorf("read_graph after create_entities: %s", got)
		}
		msg := "hello-" + gwHex(4)
		gwMustCall(t, sess, "everything__echo", map[string]any{"message": msg}, "Echo: "+msg)
		stop()
		for _, s := range []string{"filesystem", "memory", "everything"} {
			if !strings.Contains(logs.String(), "mcpbox: server "+s+": installed npm:@modelcontextprotocol/server-"+s+"@") {
				t.Errorf("first start printed no install progress for %s", s)
			}
		}
		if reg.requests.Load() == 0 {
			t.Errorf("the registry saw no request")
		}
		if t.Failed() {
			t.Fatalf("first start's stderr:\n%s", logs)
		}

		// Second start: everything from the store, no registry request.
		before := reg.requests.Load()
		sess, logs, stop = pkgServe(t, m, cfgPath, env...)
		gwMustCall(t, sess, "everything__echo", map[string]any{"message": msg}, "Echo: "+msg)
		if got := gwMustCall(t, sess, "filesystem__read_text_file", map[string]any{"path": "/data/projects/marker.txt"}, ""); strings.TrimSpace(got) != marker {
			t.Errorf("second start: read_text_file marker.txt: %q", got)
		}
		stop()
		if n := reg.requests.Load() - before; n != 0 {
			t.Errorf("second start made %d registry requests\n%s", n, logs)
		}
		if strings.Contains(logs.String(), ": install") {
			t.Errorf("second start printed install progress:\n%s", logs)
		}

		// The audit log: the installers' connections (phase "package
		// install", to the registry only) and no egress of the server
		// sandboxes.
		r = m.mcpbox(t, 30*time.Second, "", "logs", "--json", "--config", cfgPath)
		if r.code != 0 {
			t.Fatalf("mcpbox logs:\n%s", r)
		}
		installs := map[string]int{}
		calls := 0
		var lastInstall, firstCall time.Time
		for _, rec := range auDecode(t, r.stdout) {
			detail, _ := rec["detail"].(map[string]any)
			at, err := time.Parse(time.RFC3339Nano, rec.str("time"))
			if err != nil {
				t.Fatalf("record time: %v: %s", err, rec)
			}
			if rec.str("event") == "call" {
				calls++
				if firstCall.IsZero() || at.Before(firstCall) {
					firstCall = at
				}
			}
			if rec.str("event") == "egress" && detail["phase"] == "package install" {
				d := rec.list("domains")
				if len(d) == 1 && d[0]["host"] == "" && rec.str("decision") == "deny" {
					continue // npm closing an idle connection before any request
				}
				installs[rec.str("server")]++
				if at.After(lastInstall) {
					lastInstall = at
				}
				if rec.str("decision") != "allow" || len(d) != 1 || fmt.Sprint(d[0]["host"], ":", d[0]["port"]) != regHost {
					t.Errorf("an install connection not to the registry: %s", rec)
				}
				continue
			}
			if rec.str("event") == "egress" || len(rec.list("domains")) > 0 {
				t.Errorf("a server sandbox made a connection: %s", rec)
			}
		}
		for _, s := range []string{"filesystem", "memory", "everything"} {
			if installs[s] == 0 {
				t.Errorf("no install connection of %s in the audit log (%v)", s, installs)
			}
		}
		t.Logf("install connections %v, last at %s; %d calls, first at %s", installs, lastInstall.Format(time.StampMicro), calls, firstCall.Format(time.StampMicro))
		if !lastInstall.Before(firstCall) {
			t.Errorf("an install connection (%s) after the first call (%s)", lastInstall, firstCall)
		}
		if calls < 7 {
			t.Errorf("the audit log has %d call records, want 7", calls)
		}
		if t.Failed() {
			t.Logf("mcpbox logs --json:\n%s", r.stdout)
		}
	})
}
