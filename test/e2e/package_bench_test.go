package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkPackageServeStart is the start of an installed package server
// through the whole gateway: `mcpbox serve --stdio` of a config whose
// server is `npx -y @modelcontextprotocol/server-memory` (installed at
// setup from a loopback registry) to the first tools/list answer, against
// the host's node running the same installed tree directly. The two are
// interleaved and the ratio reported in one run:
//
//	go test ./test/e2e -run '^$' -bench PackageServeStart -benchtime 10x
func BenchmarkPackageServeStart(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("runs as root")
	}
	modules, err := filepath.Abs("node/node_modules")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(modules, "@modelcontextprotocol/server-memory/package.json")); err != nil {
		b.Skipf("server-memory not installed: %v", err)
	}
	reg := newNPMRegistry(b, modules)
	dir := b.TempDir()
	cfg, _ := json.Marshal(map[string]any{"version": 1, "state_dir": filepath.Join(dir, "state"), "servers": map[string]any{
		"memory": map[string]any{"command": []string{"npx", "-y", "@modelcontextprotocol/server-memory"},
			"env": map[string]string{"MEMORY_FILE_PATH": "/tmp/m.jsonl"}, "tools": map[string]any{"allow": []string{"*"}}}}})
	cfgPath := filepath.Join(dir, "mcpbox.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		b.Fatal(err)
	}
	env := []string{"NPM_CONFIG_REGISTRY=" + reg.url(), "HOME=" + dir}
	serve := func() *exec.Cmd {
		cmd := mode{uid: -1}.command(context.Background(), "serve", "--stdio", "--config", cfgPath)
		cmd.Env = append(cmd.Env, env...)
		return cmd
	}
	if d := benchList(b, serve()); d == 0 { // installs and pins
		b.Fatal("no first start")
	}
	entries, _ := filepath.Glob(filepath.Join(dir, "state/packages/npm/@modelcontextprotocol/server-memory/*/sha512-*/node_modules/@modelcontextprotocol/server-memory/dist/index.js"))
	if len(entries) != 1 {
		b.Fatalf("installed entries: %v", entries)
	}
	host := func() *exec.Cmd {
		cmd := exec.Command("node", entries[0])
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "MEMORY_FILE_PATH=" + filepath.Join(dir, "m.jsonl")}
		return cmd
	}
	var hostT, boxT time.Duration
	b.ResetTimer()
	for range b.N {
		hostT += benchList(b, host())
		boxT += benchList(b, serve())
	}
	b.StopTimer()
	b.ReportMetric(float64(hostT.Milliseconds())/float64(b.N), "host-ms/op")
	b.ReportMetric(float64(boxT.Milliseconds())/float64(b.N), "serve-ms/op")
	b.ReportMetric(float64(boxT)/float64(hostT), "ratio")
}

// benchList starts cmd as an MCP server and returns how long it took to
// the first tools/list answer.
func benchList(b *testing.B, cmd *exec.Cmd) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatalf("connecting to %v: %v", cmd.Args, err)
	}
	defer sess.Close()
	if _, err := sess.ListTools(ctx, nil); err != nil {
		b.Fatalf("tools/list of %v: %v", cmd.Args, err)
	}
	return time.Since(start)
}
