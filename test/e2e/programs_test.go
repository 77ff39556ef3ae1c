package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRealPrograms: the sandbox is useful, not only closed.
func TestRealPrograms(t *testing.T) {
	progs := []struct {
		name string
		argv []string
		want string
	}{
		{"sh", []string{"sh", "-c", "echo $((6*7))"}, "42"},
		{"coreutils", []string{"sh", "-c", "seq 3 | sort -r | tr '\\n' ' ' | wc -w; date +%Y >/dev/null && echo date-ok; ls / >/dev/null && echo ls-ok"}, "date-ok"},
		{"node", []string{"node", "-e", "console.log(require('os').userInfo().username, [1,2,3].map(x=>x*2).join(','))"}, "mcpbox 2,4,6"},
		{"python3", []string{"python3", "-c", "import json, hashlib, ssl; print(json.dumps({'ok': hashlib.sha256(b'x').hexdigest()[:8]}))"}, `{"ok": "2d711642"}`},
		{"git", []string{"sh", "-c", "git --version && cd /tmp && git init -q r && cd r && git -c user.email=a@b -c user.name=n commit -q --allow-empty -m m && git log --oneline | wc -l"}, "git version"},
		{"go binary", []string{"/workspace/input/attack", "hello"}, "hello: ok"},
	}
	forEachMode(t, func(t *testing.T, m mode) {
		for _, p := range progs {
			t.Run(p.name, func(t *testing.T) {
				if _, err := exec.LookPath(p.argv[0]); err != nil && !strings.HasPrefix(p.argv[0], "/workspace") {
					t.Skipf("%s not installed on this host", p.argv[0])
				}
				r := m.exec(t, "", append([]string{"--input", attackDir, "--"}, p.argv...)...)
				want(t, r, 0, p.want)
			})
		}
	})
}

// TestFilesystemMCPServer runs the official filesystem MCP server
// (@modelcontextprotocol/server-filesystem, from npm) through mcpbox exec
// and drives it with the official Go SDK client.
func TestFilesystemMCPServer(t *testing.T) {
	nodeModules := requireNode(t)
	forEachMode(t, func(t *testing.T, m mode) {
		in := m.dir(t)
		m.writeFile(t, filepath.Join(in, "hello.txt"), "hello from the host\nsecond line\n", 0o644)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		args := append(append([]string{"exec"}, m.flags...),
			"--input", in, "--mount", nodeModules+":/opt/mcp/node_modules:ro", "--",
			"node", "/opt/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", "/workspace/input")
		cmd := m.command(ctx, args...)
		cmd.Stderr = os.Stderr
		client := mcp.NewClient(&mcp.Implementation{Name: "mcpbox-e2e", Version: "1"}, nil)
		sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connecting to the sandboxed server: %v", err)
		}
		defer sess.Close()
		tools, err := sess.ListTools(ctx, &mcp.ListToolsParams{})
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		names := map[string]bool{}
		for _, tool := range tools.Tools {
			names[tool.Name] = true
		}
		if !names["read_text_file"] || !names["write_file"] {
			t.Fatalf("tools/list lacks read_text_file/write_file: %v", names)
		}
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": "/workspace/input/hello.txt"}})
		if err != nil {
			t.Fatalf("tools/call read_text_file: %v", err)
		}
		if res.IsError || len(res.Content) == 0 {
			t.Fatalf("read_text_file failed: %+v", res)
		}
		if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "hello from the host") {
			t.Fatalf("read_text_file returned %q", text)
		}
		// The server's own write tool hits the read-only input.
		res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": "/workspace/input/evil.txt", "content": "x"}})
		if err == nil && !res.IsError {
			t.Fatalf("write_file into the read-only input succeeded: %+v", res)
		}
		if _, err := os.Stat(filepath.Join(in, "evil.txt")); err == nil {
			t.Fatal("the server wrote into the input directory")
		}
	})
}
