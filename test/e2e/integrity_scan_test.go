package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/gateway"
	"mcpbox/internal/integrity"
)

// scanFixtureDir holds the saved definitions the integrity unit tests scan
// offline. MCPBOX_UPDATE_SCAN_FIXTURES=1 rewrites them from the live
// servers.
const scanFixtureDir = "../../internal/integrity/testdata/scan/reference"

// scanLists is what one server lists, in the format of the fixtures.
type scanLists struct {
	Tools             []json.RawMessage `json:"tools"`
	Prompts           []json.RawMessage `json:"prompts"`
	ResourceTemplates []json.RawMessage `json:"resourceTemplates"`
	// Instructions are the initialize result's, as the gateway scans
	// them (gateway.InstructionsItem); absent when the server has none.
	Instructions json.RawMessage `json:"instructions,omitempty"`
}

// TestIntegrityScanReferenceServers starts the reference MCP servers
// directly (no mcpbox), lists their tools, prompts and resource templates
// and runs the poisoning scanner on each, with every other tool name as
// shadowing candidates. Honest servers must give no finding: each one
// would be a false alarm on every user's first run.
func TestIntegrityScanReferenceServers(t *testing.T) {
	nm := requireNode(t)
	es := filepath.Join(goBuild(t, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"), "everything-server")
	pkg := func(name string) string { return filepath.Join(nm, "@modelcontextprotocol", name, "dist/index.js") }
	servers := []struct {
		name string
		argv []string
	}{
		{"server-filesystem", []string{"node", pkg("server-filesystem"), t.TempDir()}},
		{"server-everything", []string{"node", pkg("server-everything"), "stdio"}},
		{"server-memory", []string{"node", pkg("server-memory")}},
		{"go-sdk-everything-server", []string{es}},
	}
	lists := map[string]scanLists{}
	for _, s := range servers {
		lists[s.name] = scanListServer(t, s.argv)
		if len(lists[s.name].Tools) == 0 {
			t.Fatalf("%s lists no tools", s.name)
		}
	}
	if os.Getenv("MCPBOX_UPDATE_SCAN_FIXTURES") == "1" {
		scanSaveFixtures(t, lists)
	}
	all := scanToolNames(lists)
	total := 0
	for name, l := range lists {
		kinds := map[string][]json.RawMessage{"tool": l.Tools, "prompt": l.Prompts, "template": l.ResourceTemplates}
		if l.Instructions != nil {
			kinds["instructions"] = []json.RawMessage{l.Instructions}
		}
		for kind, defs := range kinds {
			for _, def := range defs {
				total++
				others := all
				if kind == "tool" {
					self := scanDefName(def)
					others = slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == self || n == name+"__"+self })
				}
				for _, f := range integrity.ScanDefinition(kind, def, others) {
					t.Errorf("%s %s %s: %s [%s] at %s: %s\n  excerpt: %q\n  definition: %s",
						name, kind, scanDefName(def), f.Rule, f.Severity, f.Where, f.Message, f.Excerpt, def)
				}
			}
		}
	}
	t.Logf("scanned %d definitions from %d servers", total, len(lists))
}

// scanListServer runs argv as a stdio MCP server and returns its lists.
// The client declares sampling, elicitation and roots, as the gateway
// does upstream, so servers list everything they have.
func scanListServer(t *testing.T, argv []string) scanLists {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "MEMORY_FILE_PATH="+filepath.Join(t.TempDir(), "memory.jsonl"))
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "integrity-e2e", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return nil, fmt.Errorf("sampling is not part of this test")
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		t.Fatalf("connecting to %v: %v\nstderr:\n%s", argv, err, stderr.String())
	}
	defer sess.Close()
	var out scanLists
	if text := sess.InitializeResult().Instructions; text != "" {
		out.Instructions = gateway.InstructionsItem(text).Raw
	}
	caps := sess.InitializeResult().Capabilities
	out.Tools = scanCollect(t, argv, sess.Tools(ctx, nil))
	if caps.Prompts != nil {
		out.Prompts = scanCollect(t, argv, sess.Prompts(ctx, nil))
	}
	if caps.Resources != nil {
		out.ResourceTemplates = scanCollect(t, argv, sess.ResourceTemplates(ctx, nil))
	}
	if ctx.Err() != nil {
		t.Fatalf("listing %v timed out", argv)
	}
	return out
}

// scanCollect drains a list iterator (following every cursor) into JSON.
func scanCollect[T any](t *testing.T, argv []string, seq func(func(T, error) bool)) []json.RawMessage {
	t.Helper()
	var defs []json.RawMessage
	for item, err := range seq {
		if err != nil {
			t.Fatalf("listing %v: %v", argv, err)
		}
		b, err := json.Marshal(item)
		if err != nil {
			t.Fatal(err)
		}
		defs = append(defs, b)
	}
	return defs
}

// scanToolNames returns every tool name bare and as SERVER__NAME, the
// ways the gateway may expose them.
func scanToolNames(lists map[string]scanLists) []string {
	var all []string
	for server, l := range lists {
		for _, def := range l.Tools {
			n := scanDefName(def)
			all = append(all, n, server+"__"+n)
		}
	}
	return all
}

func scanDefName(def json.RawMessage) string {
	var d struct{ Name string }
	_ = json.Unmarshal(def, &d)
	return d.Name
}

// scanSaveFixtures writes the lists as the integrity package's offline
// fixtures, indented so a diff shows what a server changed.
func scanSaveFixtures(t *testing.T, lists map[string]scanLists) {
	t.Helper()
	for name, l := range lists {
		b, err := json.MarshalIndent(l, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(scanFixtureDir, name+".json")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d tools)", strings.TrimPrefix(path, "../../"), len(l.Tools))
	}
}
