package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// These tests drive the gateway with the official TypeScript MCP client
// (test/e2e/node/client.mjs over @modelcontextprotocol/sdk) against real
// third-party servers, and compare what the client sees through mcpbox with
// what it sees talking to the same server directly.

// TestTSClientRunFilesystem: `mcpbox run` wraps server-filesystem; the TS
// client reads the input, writes the output, and cannot write elsewhere.
func TestTSClientRunFilesystem(t *testing.T) {
	nodeModules := requireNode(t)
	forEachMode(t, func(t *testing.T, m mode) {
		in, out := m.dir(t), m.dir(t)
		content := "from the host " + tsRandomHex(t) + "\n"
		m.writeFile(t, filepath.Join(in, "hello.txt"), content, 0o644)
		written := "from the client " + tsRandomHex(t)
		r := tsViaRun(t, m, nodeModules, nil, []tsStep{
			{"op": "listTools"},
			tsCall("read_text_file", map[string]any{"path": "/workspace/input/hello.txt"}),
			tsCall("write_file", map[string]any{"path": "/workspace/output/out.txt", "content": written}),
			tsCall("write_file", map[string]any{"path": "/workspace/input/evil.txt", "content": "x"}),
			tsCall("write_file", map[string]any{"path": "/tmp/evil.txt", "content": "x"}),
			tsCall("write_file", map[string]any{"path": "/workspace/output/../input/evil2.txt", "content": "x"}),
		}, []string{"--input", in, "--output", out},
			tsFilesystemJS, "/workspace/input", "/workspace/output")

		names := r[0].names(t, "tools")
		for _, want := range []string{"read_text_file", "write_file", "list_directory"} {
			if !slices.Contains(names, want) {
				t.Errorf("tools/list lacks %s: %v", want, names)
			}
		}
		if r[1].failed() || r[1].text() != content {
			t.Errorf("read_text_file = %v, want the text %q", r[1], content)
		}
		if got, err := os.ReadFile(filepath.Join(out, "out.txt")); err != nil || string(got) != written {
			t.Errorf("write_file to the output: host file %q (%v), want %q; reply %v", got, err, written, r[2])
		}
		for i, p := range []string{"/workspace/input/evil.txt", "/tmp/evil.txt", "/workspace/output/../input/evil2.txt"} {
			if !r[3+i].failed() {
				t.Errorf("write_file %s succeeded: %v", p, r[3+i])
			}
		}
		for _, f := range []string{"evil.txt", "evil2.txt"} {
			if _, err := os.Stat(filepath.Join(in, f)); err == nil {
				t.Errorf("the server wrote %s into the input directory", f)
			}
		}
	})
}

// TestTSClientRunEverything: through `mcpbox run`, server-everything looks
// exactly as it does directly to the same client: same tools/list and
// prompts, same results with annotations, structured content and resource
// links. Roots are the one difference: mcpbox declares them to every
// server, as it answers them, so a plain client is compared with a direct
// one that declares roots (server-everything then offers get-roots-list).
func TestTSClientRunEverything(t *testing.T) {
	nodeModules := requireNode(t)
	msg := "hello " + tsRandomHex(t)
	steps := []tsStep{
		{"op": "request", "method": "tools/list"},
		{"op": "request", "method": "prompts/list"},
		tsCall("echo", map[string]any{"message": msg}),
		tsRaw("get-annotated-message", map[string]any{"messageType": "error", "includeImage": true}),
		tsRaw("get-structured-content", map[string]any{"location": "Chicago"}),
		tsRaw("get-resource-links", map[string]any{"count": 2}),
		tsRaw("get-sum", map[string]any{"a": 19, "b": 23}),
		{"op": "getPrompt", "name": "args-prompt", "arguments": map[string]any{"city": "Lyon"}},
	}
	for _, c := range []struct{ name, env, direct string }{
		{"full client", tsFullClient, tsFullClient},
		{"plain client", "MCP_CLIENT_CAPABILITIES={}", `MCP_CLIENT_CAPABILITIES={"roots":{}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := []string{c.env}
			want := tsDirect(t, nodeModules, []string{c.direct}, steps, filepath.Join(nodeModules, "@modelcontextprotocol/server-everything/dist/index.js"), "stdio")
			for i, w := range want {
				if w.failed() {
					t.Fatalf("direct step %v failed: %v", steps[i], w)
				}
			}
			if want[2].text() != "Echo: "+msg {
				t.Fatalf("direct echo = %v: the reference run is broken", want[2])
			}
			forEachMode(t, func(t *testing.T, m mode) {
				got := tsViaRun(t, m, nodeModules, env, steps, nil, tsEverythingJS, "stdio")
				if got[2].failed() || got[2].text() != "Echo: "+msg {
					t.Errorf("echo through mcpbox = %v, want the text %q", got[2], "Echo: "+msg)
				}
				if d := cmp.Diff(want[0].byName(t, "tools"), got[0].byName(t, "tools")); d != "" {
					t.Errorf("tools/list through mcpbox differs from the direct run (-direct +mcpbox):\n%s", d)
				}
				if d := cmp.Diff(want[1].byName(t, "prompts"), got[1].byName(t, "prompts")); d != "" {
					t.Errorf("prompts/list through mcpbox differs from the direct run (-direct +mcpbox):\n%s", d)
				}
				for i := 3; i < len(steps); i++ {
					if d := cmp.Diff(want[i], got[i]); d != "" {
						t.Errorf("step %v through mcpbox differs from the direct run (-direct +mcpbox):\n%s", steps[i], d)
					}
				}
			})
		})
	}
}

// TestTSClientServeTwoServers: one HTTP gateway in front of both servers,
// tool and prompt names prefixed with SERVER__.
func TestTSClientServeTwoServers(t *testing.T) {
	nodeModules := requireNode(t)
	hostIn := t.TempDir()
	list := []tsStep{{"op": "listTools"}, {"op": "listPrompts"}}
	env := []string{tsFullClient}
	wantFS := tsDirect(t, nodeModules, env, list, filepath.Join(nodeModules, "@modelcontextprotocol/server-filesystem/dist/index.js"), hostIn)
	prompt := map[string]any{"city": "Oslo", "state": "n/a"}
	wantEv := tsDirect(t, nodeModules, env, append(list, tsStep{"op": "getPrompt", "name": "args-prompt", "arguments": prompt}), filepath.Join(nodeModules, "@modelcontextprotocol/server-everything/dist/index.js"), "stdio")
	if b, _ := json.Marshal(wantEv[2]); wantEv[2].failed() || !strings.Contains(string(b), "Oslo") {
		t.Fatalf("direct args-prompt = %s: the reference run is broken", b)
	}
	// What the gateway should list: each server's items, renamed.
	wantTools, wantPrompts := map[string]any{}, map[string]any{}
	for prefix, r := range map[string][]tsReply{"fs__": wantFS, "everything__": wantEv} {
		tsPrefixed(t, wantTools, prefix, r[0], "tools")
		if !r[1].failed() { // server-filesystem has no prompts
			tsPrefixed(t, wantPrompts, prefix, r[1], "prompts")
		}
	}

	forEachMode(t, func(t *testing.T, m mode) {
		in := m.dir(t)
		content := "served " + tsRandomHex(t)
		m.writeFile(t, filepath.Join(in, "note.txt"), content, 0o644)
		cfg := tsConfig(t, m, "",
			tsNodeServer("fs", nodeModules, fmt.Sprintf("      input: {source: %q}\n", in), tsFilesystemJS, "/workspace/input")+
				tsNodeServer("everything", nodeModules, "", tsEverythingJS, "stdio"))
		url := tsServe(t, m, cfg)
		msg := "prefixed " + tsRandomHex(t)
		r := runTSClient(t, m, nodeModules, env, []tsStep{
			{"op": "listTools"},
			{"op": "listPrompts"},
			tsCall("fs__read_text_file", map[string]any{"path": "/workspace/input/note.txt"}),
			tsCall("everything__echo", map[string]any{"message": msg}),
			tsCall("echo", map[string]any{"message": msg}),
			{"op": "getPrompt", "name": "everything__args-prompt", "arguments": prompt},
		}, "http", url)
		if d := cmp.Diff(wantTools, r[0].byName(t, "tools")); d != "" {
			t.Errorf("tools/list through the gateway differs from the direct runs, prefixed (-want +got):\n%s", d)
		}
		if d := cmp.Diff(wantPrompts, r[1].byName(t, "prompts")); d != "" {
			t.Errorf("prompts/list through the gateway differs from the direct runs, prefixed (-want +got):\n%s", d)
		}
		if r[2].failed() || r[2].text() != content {
			t.Errorf("fs__read_text_file = %v, want the text %q", r[2], content)
		}
		if r[3].failed() || r[3].text() != "Echo: "+msg {
			t.Errorf("everything__echo = %v, want the text %q", r[3], "Echo: "+msg)
		}
		if !r[4].failed() {
			t.Errorf("the unprefixed name echo was served with two servers: %v", r[4])
		}
		if d := cmp.Diff(wantEv[2], r[5]); d != "" {
			t.Errorf("everything__args-prompt differs from the direct args-prompt (-direct +gateway):\n%s", d)
		}
	})
}

// TestTSClientAgentIsolation: two clients of one gateway get separate
// sandboxes and outputs; the HTTP edge refuses strangers.
func TestTSClientAgentIsolation(t *testing.T) {
	nodeModules := requireNode(t)
	forEachMode(t, func(t *testing.T, m mode) {
		alice, bob := tsRandomHex(t), tsRandomHex(t)
		cfg := tsConfig(t, m, `clients:
  - {name: alice, token: {from: env:TOKEN_ALICE}}
  - {name: bob, token: {from: env:TOKEN_BOB}}
`, tsNodeServer("files", nodeModules, "      output: {}\n    scope: agent\n", tsFilesystemJS, "/workspace/output"))
		url := tsServe(t, m, cfg, "TOKEN_ALICE="+alice, "TOKEN_BOB="+bob)
		secret := "alice's secret " + tsRandomHex(t)
		const path = "/workspace/output/secret.txt"
		ra := runTSClient(t, m, nodeModules, nil, []tsStep{
			tsCall("write_file", map[string]any{"path": path, "content": secret}),
			tsCall("list_directory", map[string]any{"path": "/workspace/output"}),
		}, "http", url, "--token", alice)
		if ra[0].failed() || !strings.Contains(ra[1].text(), "secret.txt") {
			t.Fatalf("alice could not write and list her file: %v / %v", ra[0], ra[1])
		}
		// The file landed once, in alice's dir under the state dir.
		state := filepath.Join(filepath.Dir(cfg), "state")
		if n := tsCountFiles(t, state, "secret.txt", secret); n != 1 {
			t.Errorf("%d copies of alice's file under %s, want 1", n, state)
		}

		rb := runTSClient(t, m, nodeModules, nil, []tsStep{
			tsCall("list_directory", map[string]any{"path": "/workspace/output"}),
			tsCall("read_text_file", map[string]any{"path": path}),
			tsCall("search_files", map[string]any{"path": "/workspace/output", "pattern": "**/secret*"}),
		}, "http", url, "--token", bob)
		if rb[0].failed() {
			t.Errorf("bob cannot list his own output: %v", rb[0])
		}
		if strings.Contains(rb[0].text(), "secret.txt") {
			t.Errorf("bob sees alice's file: %v", rb[0])
		}
		if !rb[1].failed() || strings.Contains(rb[1].text(), secret) {
			t.Errorf("bob read alice's file: %v", rb[1])
		}
		if strings.Contains(rb[2].text(), "secret.txt") {
			t.Errorf("bob found alice's file: %v", rb[2])
		}

		// A later session of alice's still has it (scope agent).
		ra = runTSClient(t, m, nodeModules, nil, []tsStep{
			tsCall("read_text_file", map[string]any{"path": path}),
		}, "http", url, "--token", alice)
		if ra[0].failed() || ra[0].text() != secret {
			t.Errorf("alice's second session read %v, want %q", ra[0], secret)
		}

		tsCheckRefusals(t, url, alice)
	})
}
