package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeSurvivesClosedStderr: serve whose stderr nobody reads any more
// (piped into `head`, a log reader gone) goes on serving and ends cleanly
// when its client does. Before, its first log line after that killed it
// with SIGPIPE (exit 141), before it removed its sandboxes (or a
// Kubernetes gateway's pods).
func TestServeSurvivesClosedStderr(t *testing.T) {
	m := modes(t)[0]
	dir := gwDir(t, m)
	cfg := filepath.Join(dir, "mcpbox.yaml")
	if err := os.Mkdir(filepath.Join(dir, "proj"), 0o755); err != nil {
		t.Fatal(err)
	}
	m.writeFile(t, filepath.Join(dir, "proj", "README"), "hello\n", 0o644)
	m.writeFile(t, cfg, "version: 1\nstate_dir: ./state\nservers:\n  ws:\n    builtin: workspace\n    filesystem: {input: {source: ./proj}}\n    tools: {allow: [\"*\"]}\n", 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := m.command(ctx, "serve", "--stdio", "--config", cfg)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // nobody reads serve's stderr
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	send := func(s string) { fmt.Fprintln(stdin, s) }
	expect := func(id string) {
		t.Helper()
		for lines.Scan() {
			if strings.Contains(lines.Text(), `"id":`+id) {
				return
			}
		}
		t.Fatalf("no answer to request %s: %v", id, lines.Err())
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	expect("1")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	// A call of an unknown tool: serve logs its refusal (to the closed stderr).
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`)
	expect("2")
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ws__list_dir","arguments":{"path":"."}}}`)
	expect("3")
	stdin.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("serve ended by signal %v", ws.Signal())
		}
		t.Fatalf("serve exited %d", ee.ExitCode())
	} else if err != nil {
		t.Fatal(err)
	}
}
