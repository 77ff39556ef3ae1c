//go:build linux

package podagent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkToolCall times a small tools/call (echo) through an agent over
// mutual TLS on loopback against the same server spoken to over stdio
// directly, in the same run, and reports both and their ratio.
func BenchmarkToolCall(b *testing.B) {
	bin := mcpServer(b)
	ctx := context.Background()
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin, "-name", "direct")}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	p := startPod(b, "pod-bench", podOpts{})
	agent := session(b, connect(b, p, StartRequest{}), nil, "")
	args := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}}
	call := func(cs *mcp.ClientSession) {
		if _, err := cs.CallTool(ctx, args); err != nil {
			b.Fatal(err)
		}
	}
	// Warm both up (connections, handshakes, the server's caches).
	for range 10 {
		call(direct)
		call(agent)
	}
	b.ResetTimer()
	var tDirect, tAgent time.Duration
	for b.Loop() {
		t0 := time.Now()
		call(direct)
		t1 := time.Now()
		call(agent)
		tAgent += time.Since(t1)
		tDirect += t1.Sub(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tDirect.Microseconds())/n, "stdio-µs/call")
	b.ReportMetric(float64(tAgent.Microseconds())/n, "agent-µs/call")
	b.ReportMetric(float64(tAgent)/float64(tDirect), "ratio")
	// The agent's own memory, for the per-pod capacity estimate.
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid)); err == nil {
		for line := range strings.Lines(string(st)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				kib, _ := strconv.Atoi(f[1])
				b.ReportMetric(float64(kib), "agent-RSS-KiB")
			}
		}
	}
}
