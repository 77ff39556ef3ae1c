package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const gwServerPkg = "mcpbox/test/e2e/testdata/mcpserver"

// gwLog collects a process's output and spots the line serve prints
// once it listens.
type gwLog struct {
	mu   sync.Mutex
	buf  bytes.Buffer // guarded by mu
	sent bool         // guarded by mu
	url  chan string  // receives the serving URL once
}

var gwServingRE = regexp.MustCompile(`(?m)^mcpbox: serving MCP on (http://127\.0\.0\.1:[0-9]+/mcp)\r?$`)

func newGWLog() *gwLog { return &gwLog{url: make(chan string, 1)} }

func (l *gwLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if !l.sent {
		if m := gwServingRE.FindSubmatch(l.buf.Bytes()); m != nil {
			l.sent = true
			l.url <- string(m[1])
		}
	}
	return len(p), nil
}

func (l *gwLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitFor waits up to d for s in the output and reports whether it came:
// serve logs a line a moment after the client hears of what it is about.
func (l *gwLog) waitFor(s string, d time.Duration) bool {
	for deadline := time.Now().Add(d); !strings.Contains(l.String(), s); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// gwDir is mode.dir for benchmarks too: a temp dir on a
// world-traversable path, owned by the mode's user.
func gwDir(tb testing.TB, m mode) string {
	tb.Helper()
	d := tb.TempDir()
	for p := d; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	if !m.root() {
		if err := os.Chown(d, m.uid, m.uid); err != nil {
			tb.Fatal(err)
		}
	}
	return d
}

// gwConfig writes a serve config running one mcpserver per entry of
// servers (name → -name flag) and returns its path.
func gwConfig(tb testing.TB, m mode, servers ...string) string {
	tb.Helper()
	return gwConfigWith(tb, m, gwConfigOpts{servers: servers})
}

// gwConfigOpts is what varies between the tests' serve configs.
type gwConfigOpts struct {
	servers []string
	scope   string            // of every server; "" for the default
	clients map[string]string // client name → the env var holding its token
	pin     string            // every server's pin; "" for the default (tofu)
}

// gwConfigWith writes a serve config. JSON is YAML.
func gwConfigWith(tb testing.TB, m mode, o gwConfigOpts) string {
	tb.Helper()
	bin := goBuild(tb, gwServerPkg)
	dir := gwDir(tb, m)
	srv := map[string]any{}
	for _, name := range o.servers {
		s := map[string]any{
			"command": []string{"/opt/bin/mcpserver", "-name", name},
			"filesystem": map[string]any{
				"mounts": []map[string]string{{"source": bin, "target": "/opt/bin", "mode": "ro"}},
			},
			"tools": map[string]any{"allow": []string{"*"}},
		}
		if o.scope != "" {
			s["scope"] = o.scope
		}
		if o.pin != "" {
			s["pin"] = o.pin
		}
		srv[name] = s
	}
	cfg := map[string]any{"version": 1, "state_dir": filepath.Join(dir, "state"), "servers": srv}
	if !m.root() {
		cfg["sandbox"] = map[string]any{"require": []string{"userns", "mountns", "pidns", "netns", "seccomp", "landlock", "idmap"}}
	}
	var clients []map[string]any
	for name, env := range o.clients {
		clients = append(clients, map[string]any{"name": name, "token": map[string]string{"from": "env:" + env}})
	}
	if clients != nil {
		cfg["clients"] = clients
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// gwGateway is a running `mcpbox serve --http`.
type gwGateway struct {
	url  string
	cmd  *exec.Cmd
	logs *gwLog
	done chan struct{} // closed once the process has been waited for
	err  error         // Wait's result; read after done
}

// stop sends SIGTERM and expects exit 0 within 30 s.
func (g *gwGateway) stop(tb testing.TB) {
	tb.Helper()
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
		if g.err != nil {
			tb.Errorf("mcpbox serve after SIGTERM: %v, want exit 0", g.err)
		}
	case <-time.After(30 * time.Second):
		tb.Errorf("mcpbox serve did not stop within 30 s of SIGTERM")
		_ = g.cmd.Process.Kill()
		<-g.done
	}
}

func (g *gwGateway) alive() bool {
	select {
	case <-g.done:
		return false
	default:
		return true
	}
}

// gwServe starts `mcpbox serve --http 127.0.0.1:0 --config cfg` with env
// added to its environment and stops it with SIGTERM at cleanup, expecting
// exit 0.
func gwServe(tb testing.TB, m mode, cfg string, env ...string) *gwGateway {
	tb.Helper()
	return gwServeIn(tb, m, "", []string{"--config", cfg}, env...)
}

// gwServeIn is gwServe with serve's other arguments, run in dir ("": the
// test's own). Every e2e test that needs a listening gateway starts it
// here: at cleanup it gets SIGTERM and must exit 0 within 30 s.
func gwServeIn(tb testing.TB, m mode, dir string, args []string, env ...string) *gwGateway {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := &gwGateway{logs: newGWLog(), done: make(chan struct{})}
	g.cmd = m.command(ctx, append([]string{"serve", "--http", "127.0.0.1:0"}, noAuthArgs(tb, args)...)...)
	g.cmd.Dir = dir
	g.cmd.Env = append(g.cmd.Env, env...)
	g.cmd.Stdout, g.cmd.Stderr = g.logs, g.logs
	if err := g.cmd.Start(); err != nil {
		cancel()
		tb.Fatalf("starting mcpbox serve: %v", err)
	}
	go func() { g.err = g.cmd.Wait(); close(g.done) }()
	tb.Cleanup(func() {
		defer cancel()
		if g.alive() {
			_ = g.cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-g.done:
			if g.err != nil {
				tb.Errorf("mcpbox serve after SIGTERM: %v (want exit 0)\n%s", g.err, g.logs)
			}
		case <-time.After(30 * time.Second):
			_ = g.cmd.Process.Kill()
			<-g.done
			tb.Errorf("mcpbox serve did not stop within 30 s of SIGTERM\n%s", g.logs)
		}
		if tb.Failed() {
			tb.Logf("mcpbox serve output:\n%s", g.logs)
		}
	})
	select {
	case g.url = <-g.logs.url:
	case <-g.done:
		tb.Fatalf("mcpbox serve exited before listening: %v\n%s", g.err, g.logs)
	case <-time.After(60 * time.Second):
		tb.Fatalf("mcpbox serve printed no serving line within 60 s\n%s", g.logs)
	}
	return g
}

// gwHTTP keeps connections to the gateway alive across sessions.
var gwHTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}}

// gwConnect opens an MCP session to a serving gateway, closed at cleanup.
func gwConnect(tb testing.TB, ctx context.Context, url string, hc *http.Client, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	tb.Helper()
	if hc == nil {
		hc = gwHTTP
	}
	sess, err := gwConnectErr(ctx, url, hc, opts, version)
	if err != nil {
		tb.Fatalf("connecting to %s: %v", url, err)
	}
	tb.Cleanup(func() { gwClose(tb, sess) })
	return sess
}

func gwConnectErr(ctx context.Context, url string, hc *http.Client, opts *mcp.ClientOptions, version string) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "gateway-e2e", Version: "1"}, opts)
	t := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}
	return client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: version})
}

// gwClose closes sess, complaining if that takes more than 15 s.
func gwClose(tb testing.TB, sess *mcp.ClientSession) {
	done := make(chan struct{})
	go func() { _ = sess.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		tb.Errorf("closing MCP session %q took more than 15 s", sess.ID())
	}
}

// gwRun starts `mcpbox run [mode flags] --mount MCPSERVER:/opt/bin:ro
// FLAGS -- /opt/bin/mcpserver -name solo` as an MCP client's command.
func gwRun(tb testing.TB, m mode, opts *mcp.ClientOptions, version string, flags ...string) *mcp.ClientSession {
	tb.Helper()
	sess, _ := gwRunLogs(tb, m, opts, version, flags...)
	return sess
}

// gwRunLogs is gwRun that also returns mcpbox's stderr.
func gwRunLogs(tb testing.TB, m mode, opts *mcp.ClientOptions, version string, flags ...string) (*mcp.ClientSession, *gwLog) {
	tb.Helper()
	sess, logs, _ := gwRunCmd(tb, m, opts, version, flags...)
	return sess, logs
}

// gwRunCmd is gwRunLogs that also returns the mcpbox process.
func gwRunCmd(tb testing.TB, m mode, opts *mcp.ClientOptions, version string, flags ...string) (*mcp.ClientSession, *gwLog, *exec.Cmd) {
	tb.Helper()
	bin := goBuild(tb, gwServerPkg)
	args := append(append([]string{"run"}, m.flags...), "--mount", bin+":/opt/bin:ro")
	args = append(append(args, flags...), "--", "/opt/bin/mcpserver", "-name", "solo")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := m.command(ctx, args...)
	logs := newGWLog()
	cmd.Stderr = logs
	cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
	defer ccancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "gateway-e2e", Version: "1"}, opts)
	sess, err := client.Connect(cctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		cancel()
		gwReap(cmd)
		tb.Fatalf("connecting to mcpbox %v: %v\nstderr:\n%s", args, err, logs)
	}
	tb.Cleanup(func() {
		gwClose(tb, sess) // closes stdin, waits, then signals
		cancel()
		gwReap(cmd)
		if tb.Failed() {
			tb.Logf("mcpbox run stderr:\n%s", logs)
		}
	})
	return sess, logs, cmd
}

// gwReap reaps cmd if nobody has, giving up after 10 s.
func gwReap(cmd *exec.Cmd) {
	if cmd.Process == nil || cmd.ProcessState != nil {
		return
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// gwCall calls a tool and returns its text, or an error for a protocol or
// tool error.
func gwCall(ctx context.Context, sess *mcp.ClientSession, name string, args map[string]any) (string, error) {
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", err
	}
	if res.IsError {
		return "", fmt.Errorf("tool %s: error result %q", name, gwText(res))
	}
	return gwText(res), nil
}

func gwText(res *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(t.Text)
		}
	}
	return sb.String()
}

// gwMustCall calls a tool with a 30 s bound and fails unless it returns
// want (when want is not "").
func gwMustCall(tb testing.TB, sess *mcp.ClientSession, name string, args map[string]any, want string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := gwCall(ctx, sess, name, args)
	if err != nil {
		tb.Fatalf("calling %s %v: %v", name, args, err)
	}
	if want != "" && got != want {
		tb.Fatalf("%s %v returned %q, want %q", name, args, got, want)
	}
	return got
}

func gwHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// gwVersions are the protocol versions clients speak in these tests: the
// last one with server-to-client requests, and the first with multi
// round-trip requests and server/discover.
var gwVersions = []string{gwLegacy, "2026-07-28"}

// gwLegacy is the protocol the concurrency test and the benchmarks speak:
// what deployed clients speak today.
const gwLegacy = "2025-11-25"

// gwDirect runs the test server as a plain child process.
func gwDirect(tb testing.TB, ctx context.Context, bin string, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	tb.Helper()
	return gwConnectCmd(tb, ctx, exec.Command(bin, "-name", "solo"), opts, version)
}

// gwConnectCmd starts cmd, a stdio MCP server, and connects to it; the
// session is closed and cmd killed and reaped at cleanup.
func gwConnectCmd(tb testing.TB, ctx context.Context, cmd *exec.Cmd, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	tb.Helper()
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "gateway-e2e", Version: "1"}, opts)
	sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		gwReap(cmd)
		tb.Fatalf("connecting to %s: %v", cmd.Path, err)
	}
	tb.Cleanup(func() {
		gwClose(tb, sess)
		_ = cmd.Process.Kill()
		gwReap(cmd)
	})
	return sess
}

// gwTarget names the servers behind a session and whether their tool and
// prompt names carry a SERVER__ prefix.
type gwTarget struct {
	servers  []string
	prefixed bool
}

func (g gwTarget) name(srv, name string) string {
	if g.prefixed {
		return srv + "__" + name
	}
	return name
}

// gwRecorder is a client whose handlers record what the gateway sent.
type gwRecorder struct {
	listChanged chan struct{}
	mu          sync.Mutex
	progress    []*mcp.ProgressNotificationParams // guarded by mu
	logs        []*mcp.LoggingMessageParams       // guarded by mu
}

func newGWRecorder() *gwRecorder { return &gwRecorder{listChanged: make(chan struct{}, 16)} }

func (r *gwRecorder) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			if len(req.Params.Messages) != 1 {
				return nil, fmt.Errorf("sampling request with %d messages", len(req.Params.Messages))
			}
			in, ok := req.Params.Messages[0].Content.(*mcp.TextContent)
			if !ok {
				return nil, fmt.Errorf("sampling request with %T", req.Params.Messages[0].Content)
			}
			return &mcp.CreateMessageResult{Role: "assistant", Model: "e2e", Content: &mcp.TextContent{Text: "sampled: " + in.Text}}, nil
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "answer to " + req.Params.Message}}, nil
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case r.listChanged <- struct{}{}:
			default:
			}
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.logs = append(r.logs, req.Params)
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.progress = append(r.progress, req.Params)
		},
	}
}

func gwToolNames(t *testing.T, ctx context.Context, sess *mcp.ClientSession) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for tool, err := range sess.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		names[tool.Name] = true
	}
	return names
}
