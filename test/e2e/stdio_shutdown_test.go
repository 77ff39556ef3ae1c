package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStdioServeShutdown: a stdio client that closes serve's input, as
// every client does when it quits, ends serve cleanly.
//   - A sandbox paused for idleness is thawed first, so that its server
//     reads the end of its input and exits by itself (before, a frozen
//     server could not: every such stop took the 2 s grace and a kill).
//   - A SIGTERM while serve stops its sandboxes (the TypeScript SDK sends
//     one 2 s after it closed the input) does not cut the stop short:
//     before, ending the signal context on the client's end unregistered
//     the signals, SIGTERM killed serve half-way, and a paused sandbox
//     could stay frozen, with no sandbox_stop record and a stale instance
//     record.
func TestStdioServeShutdown(t *testing.T) {
	m := mode{name: "root", uid: -1}
	if os.Geteuid() != 0 {
		t.Skip("pausing needs a cgroup freezer, which the unprivileged user lacks here")
	}
	bin := goBuild(t, gwServerPkg)
	config := func(t *testing.T, server map[string]any) (cfg, state string) {
		dir := gwDir(t, m)
		server["filesystem"] = map[string]any{"mounts": []map[string]string{{"source": bin, "target": "/opt/bin", "mode": "ro"}}}
		server["tools"] = map[string]any{"allow": []string{"*"}}
		return hsWriteConfig(t, m, dir, map[string]any{"agent": server}), filepath.Join(dir, "state")
	}

	t.Run("paused", func(t *testing.T) {
		cfg, _ := config(t, map[string]any{
			"command":   []string{"/opt/bin/mcpserver", "-name", "agent"},
			"lifecycle": map[string]any{"idle": "1s", "idle_action": "pause"},
		})
		s := startStdioServe(t, m, cfg)
		s.whoami(t)
		waitFrozen(t, s.cmd.Process.Pid)
		s.in.Close()
		if code := s.wait(t, 20*time.Second); code != 0 {
			t.Fatalf("serve exited with %d after its client closed its input\n%s", code, s.logs)
		}
		stop := sandboxStop(t, m, cfg)
		// Its exit status alone: the record's hashes and time may hold
		// "137" anywhere.
		var rec struct {
			Exit string `json:"exit_status"`
		}
		if err := json.Unmarshal([]byte(stop), &rec); err != nil || strings.Contains(rec.Exit, "137") || strings.Contains(rec.Exit, "killed") {
			t.Errorf("the paused server was killed rather than stopped (%v): %s", err, stop)
		}
	})

	t.Run("SIGTERM while stopping", func(t *testing.T) {
		// A server whose sandbox outlives the end of its input by 30 s:
		// the stop takes the whole grace, and the SIGTERM falls in it.
		cfg, state := config(t, map[string]any{
			"command": []string{"/bin/sh", "-c", "/opt/bin/mcpserver -name agent; sleep 30"},
		})
		s := startStdioServe(t, m, cfg)
		s.whoami(t)
		s.in.Close()
		time.Sleep(500 * time.Millisecond)
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := s.wait(t, 20*time.Second); code != 0 {
			t.Fatalf("serve exited with %d on a SIGTERM while it stopped\n%s", code, s.logs)
		}
		for _, pat := range []string{"*.json", "*.sock"} {
			if left, _ := filepath.Glob(filepath.Join(state, "instances", pat)); len(left) > 0 {
				t.Errorf("serve left its instance record or socket: %v", left)
			}
		}
		sandboxStop(t, m, cfg)
	})

	t.Run("piped script", func(t *testing.T) {
		// A script writes its requests and closes serve's input at once:
		// every request still gets its answer, a slow call's too, and
		// serve exits 0 after them (before, the end of the input
		// cancelled them all, initialize included).
		cfg, _ := config(t, map[string]any{"command": []string{"/opt/bin/mcpserver", "-name", "agent"}})
		s := startStdioServe(t, m, cfg)
		script := strings.Join([]string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{"ms":500}}}`,
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`,
		}, "\n") + "\n"
		if _, err := io.WriteString(s.in, script); err != nil {
			t.Fatal(err)
		}
		s.in.Close()
		read := make(chan []byte, 1)
		go func() { // ends with serve's output, at the latest when the cleanup kills it
			b, _ := io.ReadAll(s.out)
			read <- b
		}()
		if code := s.wait(t, 60*time.Second); code != 0 {
			t.Fatalf("serve exited with %d after a piped script\n%s", code, s.logs)
		}
		out := <-read
		for _, want := range []string{`"id":1,"result"`, `"id":2,"result"`, `"id":3,"result"`} {
			if !strings.Contains(string(out), want) {
				t.Errorf("no %s in serve's output:\n%s\n%s", want, out, s.logs)
			}
		}
	})
}

// stdioServe is `mcpbox serve --stdio` driven through raw pipes.
type stdioServe struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	logs *gwLog
	done chan struct{}
}

func startStdioServe(t *testing.T, m mode, cfg string) *stdioServe {
	t.Helper()
	s := &stdioServe{logs: newGWLog(), done: make(chan struct{})}
	s.cmd = m.command(context.Background(), "serve", "--stdio", "--config", cfg)
	s.cmd.Stderr = s.logs
	var err error
	if s.in, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.out = bufio.NewReader(stdout)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
	})
	return s
}

// whoami opens the session and makes one call.
func (s *stdioServe) whoami(t *testing.T) {
	t.Helper()
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`,
	} {
		if _, err := io.WriteString(s.in, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan string, 1)
	go func() {
		var b strings.Builder
		for range 2 { // the answers to initialize and the call
			line, err := s.out.ReadString('\n')
			b.WriteString(line)
			if err != nil {
				break
			}
		}
		got <- b.String()
	}()
	select {
	case out := <-got:
		if !strings.Contains(out, `"id":2,"result"`) || !strings.Contains(out, "agent") {
			t.Fatalf("the call's answer: %s\n%s", out, s.logs)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("no answer to the call within 60 s\n%s", s.logs)
	}
	go func() { _, _ = io.Copy(io.Discard, s.out) }()
}

// wait waits for serve to exit and returns its status (128+N for a
// signal N).
func (s *stdioServe) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(limit):
		t.Fatalf("serve did not exit within %v\n%s", limit, s.logs)
	}
	ws := s.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// waitFrozen waits until a sandbox below pid is frozen.
func waitFrozen(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, d := range crashCgroups(t, crashDescendants(pid)) {
			if b, err := os.ReadFile(filepath.Join(d, "freezer.state")); err == nil && strings.TrimSpace(string(b)) == "FROZEN" {
				return
			}
		}
	}
	t.Fatalf("no frozen sandbox below %d within 30 s", pid)
}

// sandboxStop returns the audit's one sandbox_stop record, as JSON.
func sandboxStop(t *testing.T, m mode, cfg string) string {
	t.Helper()
	r := m.mcpbox(t, 30*time.Second, "", "logs", "--json", "--event", "sandbox_stop", "--config", cfg)
	var stops []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if json.Valid([]byte(line)) {
			stops = append(stops, line)
		}
	}
	if r.code != 0 || len(stops) != 1 {
		t.Fatalf("logs --event sandbox_stop: exit %d, %d records, want 1\n%s%s", r.code, len(stops), r.stdout, r.stderr)
	}
	return stops[0]
}
