package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// githubJS is server-github's entry point under the npm peers: a server
// written before MCP had tool annotations, so none of its tools has any.
const githubJS = "@modelcontextprotocol/server-github/dist/index.js"

// TestUnannotatedToolsHeld: MCP says to take a tool that leaves
// destructiveHint and openWorldHint out as destructive and open-world. A
// real server that predates annotations (server-github, allowed by a
// glob) has its writing calls held for a person's review, with the
// reason in the audit and the pending request; a tool an allow rule
// names runs unheld; serve names the held tools in one warning.
func TestUnannotatedToolsHeld(t *testing.T) {
	nodeModules := requireNode(t)
	m := modes(t)[0]
	s := &auSetup{m: m, dir: m.dir(t), token: gwHex(16)}
	s.state = filepath.Join(s.dir, "state")
	s.cfg = filepath.Join(s.dir, "mcpbox.yaml")
	cfg := fmt.Sprintf(`version: 1
state_dir: %q
clients:
  - {name: %s, token: {from: "env:%s"}}
approvals: {timeout: 1m}
servers:
  github:
    command: [node, /opt/mcp/node_modules/%s]
    filesystem:
      mounts: [{source: %q, target: /opt/mcp/node_modules, mode: ro}]
    tools:
      allow: ["*"]
      rules: [{tool: search_repositories, action: allow}]
`, s.state, auClient, auTokenEnv, githubJS, nodeModules)
	m.writeFile(t, s.cfg, cfg, 0o644)
	t.Logf("config:\n%s", cfg)
	g := s.serve(t)
	sess := s.connect(t, g, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	list, err := sess.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v\n%s", err, g.logs.String())
	}
	names := map[string]bool{}
	for _, tool := range list.Tools {
		names[tool.Name] = true
		// The premise: the server states nothing a policy could read.
		if a := tool.Annotations; a != nil && (a.DestructiveHint != nil || a.OpenWorldHint != nil || a.ReadOnlyHint) {
			t.Fatalf("server-github's %s has annotations %+v: the test needs a server without them", tool.Name, a)
		}
	}
	if !names["create_issue"] || !names["search_repositories"] {
		t.Fatalf("server-github lists %d tools, without create_issue or search_repositories: %v", len(names), names)
	}

	// A glob allows create_issue; its missing annotations hold it.
	call := callAsync(sess, "create_issue", map[string]any{"owner": "o", "repo": "r", "title": "t"})
	p := s.pendingFor(t, "create_issue")
	req, _ := p["request"].(map[string]any)
	if req["rule"] != "annotation destructiveHint (not set, so true)" {
		t.Errorf("the pending request's rule is %v, want the annotation left out", req["rule"])
	}
	if r := s.cli(t, "approvals", "--config", s.cfg); r.code != 0 || !strings.Contains(r.stdout, "not set, so true") {
		t.Errorf("mcpbox approvals does not say why the call waits:\n%s", r)
	}
	if r := s.cli(t, "deny", p.str("id"), "--config", s.cfg); r.code != 0 {
		t.Fatalf("mcpbox deny:\n%s", r)
	}
	wantRefused(t, await(t, call), "needs approval and was not approved")

	// The tool an allow rule names runs without review, and fails on
	// its own: the sandbox has no network, so server-github's fetch
	// fails (a JSON-RPC error from the server).
	c := await(t, callAsync(sess, "search_repositories", map[string]any{"query": "mcpbox"}))
	if c.err == nil || !strings.Contains(c.err.Error(), "fetch failed") {
		t.Errorf("search_repositories, allowed by a rule, gave %v %v; want server-github's own fetch error", c.err, c.res)
	}
	if p := s.approvals(t, "pending"); len(p) != 0 {
		t.Errorf("calls wait after the rule-allowed call: %v", p)
	}

	// One warning names the held tools, not the one the rule lets run.
	var warn string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, l := range strings.Split(g.logs.String(), "\n") {
			if strings.Contains(l, "tools of server github leave destructiveHint or openWorldHint unset") {
				warn = l
			}
		}
		if warn != "" {
			break
		}
	}
	if n := strings.Count(g.logs.String(), "tools of server github leave destructiveHint or openWorldHint unset"); n != 1 ||
		!strings.Contains(warn, "create_issue") || strings.Contains(warn, "search_repositories") {
		t.Errorf("%d warnings; want one naming create_issue and not search_repositories: %s", n, warn)
	}
	g.stop(t)

	recs := s.calls(t, "create_issue")
	if len(recs) != 1 || recs[0].str("decision") != "denied" || !strings.Contains(recs[0].str("rule"), "not set, so true") {
		t.Errorf("create_issue call records %v, want one denied, its rule the annotation left out", recs)
	}
	if recs := s.calls(t, "search_repositories"); len(recs) != 1 || recs[0].str("decision") != "allow" {
		t.Errorf("search_repositories call records %v, want one allowed", recs)
	}
}
