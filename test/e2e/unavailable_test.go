package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeRunsWithoutBrokenServer: a server whose npm package does not
// exist (the registry answers 404, as registry.npmjs.org does for a
// typo) does not take the user's other servers down. serve starts with
// the good one (a real npm server, installed from the loopback registry)
// and says which one it runs without and why: on stderr, in mcpbox ps,
// in the audit log; the broken server's tools are absent and a call
// naming it gets an error saying why. Once the package exists, a new
// session's retry sets the server up without a restart.
func TestServeRunsWithoutBrokenServer(t *testing.T) {
	modules := requireNode(t)
	memDir := filepath.Join(modules, "@modelcontextprotocol/server-memory")
	if _, err := os.Stat(filepath.Join(memDir, "package.json")); err != nil {
		t.Skipf("server-memory not installed: %v", err)
	}
	reg := newNPMRegistry(t, modules)
	m := modes(t)[0]
	dir := gwDir(t, m)
	const missing = "@mcpbox-e2e/server-not-published"
	cfg := filepath.Join(dir, "mcpbox.yaml")
	m.writeFile(t, cfg, `version: 1
state_dir: `+filepath.Join(dir, "state")+`
servers:
  memory:
    command: [npx, -y, "@modelcontextprotocol/server-memory"]
    env: {MEMORY_FILE_PATH: /tmp/memory.jsonl}
    tools: {allow: ["*"]}
  broken:
    package: npm:`+missing+`
    env: {MEMORY_FILE_PATH: /tmp/memory.jsonl}
    tools: {allow: ["*"]}
`, 0o644)
	g := gwServe(t, m, cfg, "NPM_CONFIG_REGISTRY="+reg.url(), "HOME="+dir)
	notFound := "npm package " + missing + ": not found"
	if want := "mcpbox: warning: server broken is unavailable, serving the others without it: "; !strings.Contains(g.logs.String(), want) ||
		!strings.Contains(g.logs.String(), notFound) {
		t.Errorf("serve's start did not say %q ... %q:\n%s", want, notFound, g.logs)
	}
	// The summary line, above that warning, names it and does not say
	// "no warnings". memory installs on in the background once the
	// registry has confirmed it (serve says "installing"); a quick
	// install may end before serve goes on.
	const broken = "broken (unavailable); no config warnings; why 1 server could not be set up below"
	if want := "memory (tools not yet pinned), " + broken; !strings.Contains(g.logs.String(), want) &&
		!strings.Contains(g.logs.String(), "memory (installing), "+broken) {
		t.Errorf("serve's start-up summary does not say %q:\n%s", want, g.logs)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sess := gwConnect(t, ctx, g.url, nil, nil, gwLegacy)
	// memory's install may outlast the session's wait: then it joins the
	// session later.
	waitTools(t, sess, nil, g.logs, "memory__read_graph")
	tools, err := sess.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v\n%s", err, g.logs)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if strings.HasPrefix(tool.Name, "broken__") {
			t.Errorf("the unavailable server's tool %s is listed", tool.Name)
		}
	}
	if !strings.Contains(strings.Join(names, " "), "memory__read_graph") {
		t.Fatalf("the good server's tools are missing: %v\n%s", names, g.logs)
	}
	gwMustCall(t, sess, "memory__create_entities", map[string]any{"entities": []map[string]any{
		{"name": "mcpbox", "entityType": "project", "observations": []string{"kept serving"}}}}, "")
	_, err = gwCall(ctx, sess, "broken__read_graph", map[string]any{})
	if err == nil || !strings.Contains(err.Error(), "server broken") || !strings.Contains(err.Error(), "unavailable") || !strings.Contains(err.Error(), notFound) {
		t.Errorf("a call naming the unavailable server: %v; want why it is unavailable", err)
	}

	r := m.mcpbox(t, 30*time.Second, "", "ps", "--config", cfg)
	if want := "server broken is unavailable: " + notFound; r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("mcpbox ps does not say %q:\n%s", want, r)
	}
	r = m.mcpbox(t, 30*time.Second, "", "ps", "--instances", "--json", "--config", cfg)
	var inst struct{ Unavailable map[string]string }
	if err := json.Unmarshal([]byte(r.stdout), &inst); err != nil || !strings.Contains(inst.Unavailable["broken"], notFound) {
		t.Errorf("mcpbox ps --instances --json: %v\n%s", err, r)
	}
	// memory has records of its own when it installed in the background:
	// it was unavailable while installing.
	r = m.mcpbox(t, 30*time.Second, "", "logs", "--json", "--event", "server_unavailable", "--config", cfg)
	var recs []auRecord
	for _, rec := range auDecode(t, r.stdout) {
		if rec.str("server") == "broken" {
			recs = append(recs, rec)
		}
	}
	if r.code != 0 || len(recs) != 1 || !strings.Contains(recs[0].str("error"), notFound) {
		t.Errorf("the audit's server_unavailable records:\n%s", r)
	}

	// The package is published now: a session after the retry interval
	// sets the server up, and the first session goes on as it was.
	reg.publishNamed(t, memDir, missing)
	var retried []string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(2 * time.Second)
		s2 := gwConnect(t, ctx, g.url, nil, nil, gwLegacy)
		tl, err := s2.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list after the package was published: %v\n%s", err, g.logs)
		}
		retried = retried[:0]
		for _, tool := range tl.Tools {
			retried = append(retried, tool.Name)
		}
		if strings.Contains(strings.Join(retried, " "), "broken__read_graph") {
			gwMustCall(t, s2, "broken__create_entities", map[string]any{"entities": []map[string]any{
				{"name": "late", "entityType": "server", "observations": []string{"set up on retry"}}}}, "")
			break
		}
	}
	if !strings.Contains(strings.Join(retried, " "), "broken__read_graph") {
		t.Fatalf("the server's setup was not retried once its package existed: tools %v\n%s", retried, g.logs)
	}
	if got := gwMustCall(t, sess, "memory__read_graph", map[string]any{}, ""); !strings.Contains(got, "kept serving") {
		t.Errorf("the first session's good server: read_graph %s", got)
	}
	lock, _ := os.ReadFile(filepath.Join(dir, "mcpbox.lock"))
	var lf struct {
		Packages map[string]struct{ Name, Source string }
	}
	if err := json.Unmarshal(lock, &lf); err != nil || lf.Packages["broken"].Name != missing {
		t.Errorf("the retried install is not pinned in mcpbox.lock (%v):\n%s", err, lock)
	}
	r = m.mcpbox(t, 30*time.Second, "", "ps", "--config", cfg)
	if strings.Contains(r.stdout, "unavailable") {
		t.Errorf("mcpbox ps still lists the server as unavailable:\n%s", r)
	}
}
