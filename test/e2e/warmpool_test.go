package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// sandbox.warm_pool: serve prepares a sandbox before any client comes,
// whose only process besides its init is the workload's, forked ahead
// and running nothing yet; the first session's server runs in it (the
// init that waited is the server's parent), serve logs the start as pooled and ps --json marks
// the sandbox "prepared", the pool prepares the next one, and serve's
// stop ends them all.
func TestServeWarmPool(t *testing.T) {
	m := gwBenchMode()
	path := gwConfig(t, m, "solo")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	sb, _ := cfg["sandbox"].(map[string]any)
	if sb == nil {
		sb = map[string]any{}
	}
	sb["warm_pool"] = 1
	cfg["sandbox"] = sb
	if data, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	g := gwServe(t, m, path)
	serve := g.cmd.Process.Pid
	prepared := waitInits(t, serve, 1)
	if len(prepared) != 1 {
		t.Fatalf("%d sandboxes prepared before any client, want 1", len(prepared))
	}
	waiting := prepared[0]
	// Its one child, once forked ahead, is the workload's process waiting
	// for its command: still a copy of the init, running nothing else.
	if kids := childrenOf(t, waiting); len(kids) > 1 {
		t.Fatalf("the prepared sandbox runs %d processes before it was used: %v", len(kids), kids)
	}
	for _, k := range childrenOf(t, waiting) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", k))
		if !strings.Contains(string(cmdline), "__mcpbox_init__") {
			t.Fatalf("the prepared sandbox runs %q before it was used", cmdline)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sess := gwConnect(t, ctx, g.url, nil, nil, gwLegacy)
	gwMustCall(t, sess, "echo", map[string]any{"text": "warm"}, "warm")
	var server string
	for _, k := range childrenOf(t, waiting) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", k))
		server += strings.ReplaceAll(string(cmdline), "\x00", " ")
	}
	if !strings.Contains(server, "mcpserver -name solo") {
		t.Fatalf("the prepared init %d does not run the server; its children: %q", waiting, server)
	}
	// Seen from outside: serve's log line and ps --json say it was pooled.
	if !strings.Contains(g.logs.String(), `msg="server sandbox started" server=solo from="warm pool" start=`) {
		t.Errorf("no info line of the pooled start in serve's log:\n%s", g.logs)
	}
	out, err := m.command(ctx, "ps", "--json", "--config", path).Output()
	if err != nil || !strings.Contains(string(out), `"server":"solo"`) || !strings.Contains(string(out), `"prepared":true`) {
		t.Errorf("ps --json after a pooled start (%v):\n%s", err, out)
	}
	if inits := waitInits(t, serve, 2); len(inits) != 2 {
		t.Fatalf("%d sandboxes after the first start, want the server's and a new prepared one", len(inits))
	}
	g.stop(t)
	for _, pid := range append(prepared, waitInitsNow(t, serve)...) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			t.Errorf("sandbox init %d outlived serve", pid)
		}
	}
}

// waitInits waits, up to 30 s, until parent has at least n sandbox inits
// as children, and returns them.
func waitInits(t *testing.T, parent, n int) []int {
	t.Helper()
	var inits []int
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if inits = waitInitsNow(t, parent); len(inits) >= n {
			return inits
		}
	}
	t.Fatalf("%d sandbox inits under %d after 30 s, want %d", len(inits), parent, n)
	return nil
}

// waitInitsNow returns parent's children that are sandbox inits.
func waitInitsNow(t *testing.T, parent int) []int {
	var inits []int
	for _, pid := range childrenOf(t, parent) {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.Contains(string(cmdline), "__mcpbox_init__") {
			inits = append(inits, pid)
		}
	}
	return inits
}

// childrenOf lists a process's children; none once it is gone.
func childrenOf(t *testing.T, pid int) []int {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, task := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			var c int
			if _, err := fmt.Sscan(f, &c); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}
