package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeTransportChoice: with neither --stdio nor --http, serve speaks
// HTTP when a person starts it on a terminal and when a service manager
// gives it /dev/null, and stdio when a client starts it with a pipe.
func TestServeTransportChoice(t *testing.T) {
	m := modes(t)[0]
	cfg := gwConfig(t, m, "solo")
	// Listen where the test says, not on the default port.
	var c map[string]any
	b, _ := os.ReadFile(cfg)
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	c["listen"] = map[string]any{"http": map[string]any{"addr": "127.0.0.1:0"}}
	b, _ = json.Marshal(c)
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("dev-null", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := m.command(ctx, "serve", "--config", cfg) // Stdin nil: /dev/null
		logs := newGWLog()
		cmd.Stdout, cmd.Stderr = logs, logs
		transportServesHTTP(t, cmd, logs, func() { _ = cmd.Process.Signal(syscall.SIGTERM) })
	})

	t.Run("terminal", func(t *testing.T) {
		script, err := exec.LookPath("script")
		if err != nil {
			t.Skip("script(1) not installed")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		// script(1) gives serve a terminal as stdin, stdout and stderr.
		cmd := exec.CommandContext(ctx, script, "-qfec", "exec "+mcpboxBin+" serve --config "+cfg, "/dev/null")
		cmd.Env = append(m.command(ctx).Env, "SHELL=/bin/sh")
		cmd.WaitDelay = 5 * time.Second
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		logs := newGWLog()
		cmd.Stdout, cmd.Stderr = logs, logs
		// ^C on the terminal: SIGINT to serve, the foreground process.
		transportServesHTTP(t, cmd, logs, func() { io.WriteString(stdin, "\x03") })
	})

	t.Run("pipe", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := m.command(ctx, "serve", "--config", cfg)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}`+"\n")
		line, err := bufio.NewReader(stdout).ReadString('\n')
		var resp struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if err != nil || json.Unmarshal([]byte(line), &resp) != nil || resp.ID != 1 || resp.Result == nil {
			t.Fatalf("initialize over the pipe: %q, %v\nstderr:\n%s", line, err, stderr.String())
		}
		stdin.Close() // the client hangs up: serve ends
		if err := cmd.Wait(); err != nil {
			t.Errorf("serve after its stdio client hung up: %v\n%s", err, stderr.String())
		}
		if strings.Contains(stderr.String(), "serving MCP on") {
			t.Errorf("serve on a pipe also serves HTTP:\n%s", stderr.String())
		}
	})
}

// transportServesHTTP starts cmd, waits for its HTTP serving line, checks that
// the endpoint answers (with the token serve keeps), then stops it with
// stop and expects exit 0.
func transportServesHTTP(t *testing.T, cmd *exec.Cmd, logs *gwLog, stop func()) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	select {
	case url := <-logs.url:
		tokenStatus(t, url, "", http.StatusUnauthorized)
	case err := <-done:
		done <- err
		t.Fatalf("serve exited without serving HTTP: %v\n%s", err, logs)
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not serve HTTP within 60 s\n%s", logs)
	}
	stop()
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Errorf("serve after stop: %v\n%s", err, logs)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("serve did not stop within 30 s\n%s", logs)
	}
}
