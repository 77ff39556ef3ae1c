package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tsUntypedServer is a stdio MCP server in plain Node that lists tools as
// npm @modelcontextprotocol/server-gitlab@2025.4.25 does: input schemas
// with "$schema" only, no "type"; plus one whose schema is of another
// type, which no client accepts.
const tsUntypedServer = `import readline from "node:readline";
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
  const m = JSON.parse(line);
  if (m.id === undefined) return;
  const reply = (result) => send({ jsonrpc: "2.0", id: m.id, result });
  switch (m.method) {
    case "initialize":
      return reply({ protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "untyped", version: "1" } });
    case "tools/list":
      return reply({ tools: [
        { name: "get_project", description: "d", inputSchema: { "$schema": "http://json-schema.org/draft-07/schema#", properties: { id: { type: "string" } }, required: ["id"] } },
        { name: "list_things", inputSchema: { "$schema": "http://json-schema.org/draft-07/schema#" } },
        { name: "stringy", inputSchema: { type: "string" } },
      ] });
    case "tools/call":
      return reply({ content: [{ type: "text", text: "called " + m.params.name + " " + JSON.stringify(m.params.arguments) }] });
    default:
      return send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "no " + m.method } });
  }
});
rl.on("close", () => process.exit(0));
`

// TestTSClientUntypedToolSchemas: the TypeScript SDK client refuses the
// whole tools/list of a server whose input schemas lack "type": "object"
// (checked directly, so the test's server is known to break it); through
// the gateway the same client lists the tools, with the type added, minus
// the one no client accepts, and calls them; serve warns once.
func TestTSClientUntypedToolSchemas(t *testing.T) {
	nodeModules := requireNode(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "untyped.mjs")
	if err := os.WriteFile(script, []byte(tsUntypedServer), 0o644); err != nil {
		t.Fatal(err)
	}
	direct := tsDirect(t, nodeModules, nil, []tsStep{{"op": "listTools"}}, script)
	if !direct[0].failed() {
		t.Fatalf("the TS client accepted the untyped schemas directly (%v): the test no longer shows the problem", direct[0])
	}
	forEachMode(t, func(t *testing.T, m mode) {
		in := m.dir(t)
		m.writeFile(t, filepath.Join(in, "untyped.mjs"), tsUntypedServer, 0o644)
		cfg := tsConfig(t, m, "", tsNodeServer("gl", nodeModules, fmt.Sprintf("      input: {source: %q}\n", in), "/workspace/input/untyped.mjs"))
		g := gwServe(t, m, cfg)
		r := runTSClient(t, m, nodeModules, nil, []tsStep{
			{"op": "listTools"},
			tsCall("get_project", map[string]any{"id": "42"}),
			{"op": "listTools"},
		}, "http", g.url)
		if r[0].failed() {
			t.Fatalf("listTools through the gateway: %v", r[0])
		}
		tools := r[0].byName(t, "tools")
		if len(tools) != 2 || tools["get_project"] == nil || tools["list_things"] == nil {
			t.Fatalf("tools = %v, want get_project and list_things", r[0].names(t, "tools"))
		}
		for name, tool := range tools {
			if typ := tool.(map[string]any)["inputSchema"].(map[string]any)["type"]; typ != "object" {
				t.Errorf("%s: inputSchema type %v, want object", name, typ)
			}
		}
		if r[1].failed() || r[1].text() != `called get_project {"id":"42"}` {
			t.Errorf("get_project = %v", r[1])
		}
		logs := g.logs.String()
		if n := strings.Count(logs, `given one in the list clients get`); n != 1 {
			t.Errorf("%d warnings of normalised schemas, want 1:\n%s", n, logs)
		}
		if !strings.Contains(logs, "tool=stringy") {
			t.Errorf("no warning of the tool left out:\n%s", logs)
		}
	})
}
