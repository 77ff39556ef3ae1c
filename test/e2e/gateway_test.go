package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
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

// The gateway's own tests: a programmable MCP server (testdata/mcpserver)
// behind `mcpbox run` and `mcpbox serve`, driven by the official Go SDK
// client. Every call has a deadline, so a gateway that loses a reply fails
// instead of hanging.

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
	ctx, cancel := context.WithCancel(context.Background())
	g := &gwGateway{logs: newGWLog(), done: make(chan struct{})}
	g.cmd = m.command(ctx, "serve", "--http", "127.0.0.1:0", "--config", cfg)
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
	return sess, logs
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

// TestGatewayFaults: a misbehaving upstream under `mcpbox run` costs at
// most the call in flight, never the client's session.
func TestGatewayFaults(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, v := range gwVersions {
			t.Run(v, func(t *testing.T) { gwFaults(t, m, v) })
		}
	})
}

func gwFaults(t *testing.T, m mode, version string) {
	t.Run("crash", func(t *testing.T) {
		sess := gwRun(t, m, nil, version)
		before := gwMustCall(t, sess, "instance", nil, "")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Calls in flight when the server dies fail too, instead of hanging.
		const pending = 3
		pendingErrs := make(chan error, pending)
		for range pending {
			go func() {
				_, err := gwCall(ctx, sess, "slow", map[string]any{"ms": 200, "steps": 100})
				pendingErrs <- err
			}()
		}
		time.Sleep(300 * time.Millisecond)
		start := time.Now()
		got, err := gwCall(ctx, sess, "crash", nil)
		elapsed := time.Since(start)
		switch {
		case ctx.Err() != nil:
			t.Fatalf("crash call still pending after %v", elapsed)
		case err == nil:
			t.Fatalf("crash returned %q, want an error", got)
		case elapsed > 10*time.Second:
			t.Errorf("crash took %v to fail, want < 10 s", elapsed)
		}
		t.Logf("crash failed after %v: %v", elapsed, err)
		for range pending {
			if err := <-pendingErrs; err == nil {
				t.Error("a 20 s call in flight during the crash succeeded")
			}
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("the calls in flight during the crash took %v to fail", d)
		}
		// Restart on failure: a later call reaches a new server process.
		var after string
		for {
			after, err = gwCall(ctx, sess, "instance", nil)
			if err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("no call succeeded within 30 s of the crash; last error: %v", err)
		}
		if after == before {
			t.Fatalf("instance %s answered before and after the crash: the call did not reach a restarted server", after)
		}
		t.Logf("restarted after %v", time.Since(start))
		gwMustCall(t, sess, "echo", map[string]any{"text": "after crash"}, "after crash")
	})
	t.Run("garbage", func(t *testing.T) {
		sess := gwRun(t, m, nil, version)
		before := gwMustCall(t, sess, "instance", nil, "")
		gwMustCall(t, sess, "garbage", nil, "garbage written")
		for i := range 3 {
			text := fmt.Sprintf("after garbage %d", i)
			gwMustCall(t, sess, "echo", map[string]any{"text": text}, text)
		}
		gwMustCall(t, sess, "instance", nil, before) // skipped, not restarted
	})
	t.Run("stderr", func(t *testing.T) {
		sess, logs := gwRunLogs(t, m, nil, version)
		text := "to stderr " + gwHex(6)
		gwMustCall(t, sess, "stderr", map[string]any{"text": text}, "ok")
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), text); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the server's stderr line %q is not in mcpbox's stderr within 10 s:\n%s", text, logs)
			}
		}
		gwMustCall(t, sess, "echo", map[string]any{"text": "after stderr"}, "after stderr")
	})
	t.Run("huge", func(t *testing.T) {
		var mu sync.Mutex
		var biggest int // largest log notification the client saw
		opts := &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			s, _ := r.Params.Data.(string)
			mu.Lock()
			biggest = max(biggest, len(s))
			mu.Unlock()
		}}
		sess := gwRun(t, m, opts, version)
		before := gwMustCall(t, sess, "instance", nil, "")
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		start := time.Now()
		got, err := gwCall(ctx, sess, "huge", map[string]any{"mib": 50})
		if err != nil || got != "wrote 50 MiB" {
			t.Fatalf("huge 50 after %v: %q, %v; want the result after the dropped line", time.Since(start), got, err)
		}
		t.Logf("huge 50 took %v", time.Since(start))
		gwMustCall(t, sess, "echo", map[string]any{"text": "after huge"}, "after huge")
		gwMustCall(t, sess, "instance", nil, before)
		mu.Lock()
		defer mu.Unlock()
		if biggest > 1<<20 {
			t.Fatalf("the client received a %d-byte log message", biggest)
		}
	})
}

// TestGatewayLimits: --call-timeout ends a call that runs too long,
// --output-limit refuses a result too large, and either leaves the session
// usable.
func TestGatewayLimits(t *testing.T) {
	m := modes(t)[0]
	for _, v := range gwVersions {
		t.Run(v, func(t *testing.T) {
			sess := gwRun(t, m, nil, v, "--call-timeout", "1s", "--output-limit", "1Mi")
			t.Run("call-timeout", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				start := time.Now()
				got, err := gwCall(ctx, sess, "slow", map[string]any{"ms": 500, "steps": 20})
				elapsed := time.Since(start)
				if err == nil {
					t.Fatalf("a 10 s call under --call-timeout 1s returned %q after %v", got, elapsed)
				}
				if elapsed < time.Second || elapsed > 5*time.Second {
					t.Errorf("the call failed after %v, want about 1 s: %v", elapsed, err)
				}
				t.Logf("timed out after %v: %v", elapsed, err)
				gwMustCall(t, sess, "echo", map[string]any{"text": "after timeout"}, "after timeout")
			})
			t.Run("output-limit", func(t *testing.T) {
				if got := gwMustCall(t, sess, "blob", map[string]any{"bytes": 512 << 10}, ""); len(got) != 512<<10 {
					t.Fatalf("a 512 KiB blob under --output-limit 1Mi came back with %d bytes", len(got))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				got, err := gwCall(ctx, sess, "blob", map[string]any{"bytes": 2 << 20})
				if err == nil {
					t.Fatalf("a 2 MiB blob under --output-limit 1Mi came back with %d bytes", len(got))
				}
				if !strings.Contains(err.Error(), "output limit") {
					t.Errorf("the 2 MiB blob failed with %v, want it to name the output limit", err)
				}
				gwMustCall(t, sess, "echo", map[string]any{"text": "after limit"}, "after limit")
			})
		})
	}
}

// TestGatewayDisconnect: a client that goes away mid-call, politely or
// not, leaves the gateway serving others.
func TestGatewayDisconnect(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		g := gwServe(t, m, gwConfig(t, m, "solo"))
		for _, v := range gwVersions {
			t.Run(v, func(t *testing.T) { gwDisconnect(t, g, v) })
		}
	})
}

func gwDisconnect(t *testing.T, g *gwGateway, version string) {
	slow := map[string]any{"ms": 100, "steps": 40}
	// healthy checks that a new session works and, with cancelled, that
	// the call its client cancelled ended upstream too. (A dropped
	// connection is not a cancellation in Streamable HTTP: the client may
	// come back for the result.)
	healthy := func(t *testing.T, cancelled bool) {
		t.Helper()
		if !g.alive() {
			t.Fatalf("mcpbox serve exited: %v", g.err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sess := gwConnect(t, ctx, g.url, nil, nil, version)
		for deadline := time.Now().Add(3 * time.Second); cancelled; time.Sleep(100 * time.Millisecond) {
			n := gwMustCall(t, sess, "inflight", nil, "")
			if n == "0" {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("3 s after its client went away, the upstream still runs %s slow calls", n)
				break
			}
		}
		text := "healthy " + gwHex(4)
		gwMustCall(t, sess, "echo", map[string]any{"text": text}, text)
		gwMustCall(t, sess, "slow", map[string]any{"ms": 10, "steps": 2}, "slept 2 steps")
	}
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sess := gwConnect(t, ctx, g.url, nil, nil, version)
		cctx, ccancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer ccancel()
		start := time.Now()
		if _, err := gwCall(cctx, sess, "slow", slow); err == nil {
			t.Fatal("a cancelled 10 s call succeeded")
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the cancelled call returned after %v", d)
		}
		gwMustCall(t, sess, "echo", map[string]any{"text": "same session"}, "same session")
		healthy(t, true)
	})
	t.Run("close", func(t *testing.T) {
		// The SDK's Close is graceful: it waits for the call in flight,
		// which may end either way; neither may take the gateway down.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sess, err := gwConnectErr(ctx, g.url, gwHTTP, nil, version)
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { _, err := gwCall(ctx, sess, "slow", slow); errc <- err }()
		time.Sleep(500 * time.Millisecond)
		gwClose(t, sess)
		select {
		case err := <-errc:
			t.Logf("the call of the closed session returned %v", err)
		case <-time.After(15 * time.Second):
			t.Fatal("the call of a closed session did not return within 15 s")
		}
		healthy(t, false)
	})
	t.Run("drop", func(t *testing.T) {
		// Abruptly close the TCP connections mid-call: no DELETE, no cancel.
		var mu sync.Mutex
		var conns []net.Conn // guarded by mu
		tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
			return c, err
		}}
		defer tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sess, err := gwConnectErr(ctx, g.url, &http.Client{Transport: tr}, nil, version)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			start := time.Now()
			gwClose(t, sess)
			t.Logf("closing the dropped session took %v", time.Since(start))
		}()
		errc := make(chan error, 1)
		go func() { _, err := gwCall(ctx, sess, "slow", slow); errc <- err }()
		time.Sleep(500 * time.Millisecond)
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		start := time.Now()
		select {
		case err := <-errc:
			t.Logf("the dropped call returned after %v: %v", time.Since(start), err)
		case <-time.After(20 * time.Second):
			t.Fatal("the call on dropped connections did not return within 20 s")
		}
		healthy(t, false)
	})
}

// TestGatewayConcurrentSessions: 50 sessions × 200 echo calls with unique
// payloads over HTTP, four in flight per session, through one upstream;
// every reply matches its request.
func TestGatewayConcurrentSessions(t *testing.T) {
	const sessions, calls, inflight = 50, 200, 4
	m := modes(t)[0]
	g := gwServe(t, m, gwConfig(t, m, "solo"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		ok       int
		failures []string // guarded by mu, with ok
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	start := time.Now()
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Go(func() {
			sess, err := gwConnectErr(ctx, g.url, gwHTTP, nil, gwLegacy)
			if err != nil {
				fail("session %d: connecting: %v", s, err)
				return
			}
			defer gwClose(t, sess)
			var cwg sync.WaitGroup
			for w := range inflight {
				cwg.Go(func() {
					for i := w; i < calls; i += inflight {
						want := fmt.Sprintf("s%02d-c%03d-%s", s, i, gwHex(6))
						got, err := gwCall(ctx, sess, "echo", map[string]any{"text": want})
						switch {
						case err != nil:
							fail("session %d call %d: %v", s, i, err)
						case got != want:
							fail("session %d call %d: got %q, want %q", s, i, got, want)
						default:
							mu.Lock()
							ok++
							mu.Unlock()
						}
					}
				})
			}
			cwg.Wait()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("%d sessions × %d calls: %d ok in %v (%.0f calls/s)", sessions, calls, ok, elapsed, float64(ok)/elapsed.Seconds())
	if len(failures) > 0 {
		t.Errorf("%d of %d calls failed or were misrouted; first ones:\n%s",
			len(failures), sessions*calls, strings.Join(failures[:min(len(failures), 10)], "\n"))
	}
	if ok != sessions*calls {
		t.Errorf("%d calls matched, want %d", ok, sessions*calls)
	}
	if elapsed > 60*time.Second {
		t.Errorf("took %v, want < 60 s", elapsed)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Error("the 5 min bound ran out")
	}
}

// TestGatewayConcurrentCalls: one `mcpbox run` session, 16 calls in
// flight, echo mixed with sampling round trips; every reply matches its
// request.
// The same against the test server directly is the baseline.
func TestGatewayConcurrentCalls(t *testing.T) {
	paths := []struct {
		name    string
		connect func(t *testing.T, ctx context.Context, opts *mcp.ClientOptions) *mcp.ClientSession
	}{
		{"direct", func(t *testing.T, ctx context.Context, opts *mcp.ClientOptions) *mcp.ClientSession {
			return gwDirect(t, ctx, filepath.Join(goBuild(t, gwServerPkg), "mcpserver"), opts, gwLegacy)
		}},
		{"run", func(t *testing.T, ctx context.Context, opts *mcp.ClientOptions) *mcp.ClientSession {
			return gwRun(t, modes(t)[0], opts, gwLegacy)
		}},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			gwConcurrentCalls(t, ctx, p.connect(t, ctx, newGWRecorder().options()))
		})
	}
}

func gwConcurrentCalls(t *testing.T, ctx context.Context, sess *mcp.ClientSession) {
	const workers, calls = 16, 100
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string // guarded by mu
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				text := fmt.Sprintf("w%02d-c%03d-%s", w, i, gwHex(6))
				tool, args, want := "echo", map[string]any{"text": text}, text
				if i%10 == 0 {
					tool, args, want = "sample", map[string]any{"prompt": text}, "sampled: "+text
				}
				got, err := gwCall(ctx, sess, tool, args)
				if err != nil || got != want {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s %s: %q, %v", tool, text, got, err))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d calls in %v", workers*calls, time.Since(start))
	if len(failures) > 0 {
		t.Errorf("%d of %d calls failed or were misrouted; first ones:\n%s",
			len(failures), workers*calls, strings.Join(failures[:min(len(failures), 10)], "\n"))
	}
}

// TestGatewaySamplingRouting: no client ever sees another's sampling
// prompt. With a sandbox per session the request reaches the client whose
// call caused it; on a server shared by sessions with calls in flight, a
// stdio server's request does not say whose it is, and the gateway
// refuses it rather than guess.
func TestGatewaySamplingRouting(t *testing.T) {
	m := modes(t)[0]
	tokA, tokB := gwHex(16), gwHex(16)
	cases := []struct {
		name   string
		opts   gwConfigOpts
		env    []string
		tokens [2]string
		shared bool // one server instance for both sessions
	}{
		{"sandbox per session", gwConfigOpts{servers: []string{"solo"}, scope: "session"}, nil, [2]string{}, false},
		{"one agent", gwConfigOpts{servers: []string{"solo"}}, nil, [2]string{}, true},
		{"shared by two agents", gwConfigOpts{
			servers: []string{"solo"}, scope: "shared",
			clients: map[string]string{"alice": "TOKEN_ALICE", "bob": "TOKEN_BOB"},
		}, []string{"TOKEN_ALICE=" + tokA, "TOKEN_BOB=" + tokB}, [2]string{tokA, tokB}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := gwServe(t, m, gwConfigWith(t, m, c.opts), c.env...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			a := gwSampler(t, ctx, g.url, "A", c.tokens[0])
			b := gwSampler(t, ctx, g.url, "B", c.tokens[1])
			prompt := "secret of A " + gwHex(4)
			type reply struct {
				text string
				err  error
			}
			ra, rb := make(chan reply, 1), make(chan reply, 1)
			go func() {
				text, err := gwCall(ctx, a.sess, "sample", map[string]any{"prompt": prompt, "delay_ms": 700})
				ra <- reply{text, err}
			}()
			time.Sleep(200 * time.Millisecond)
			go func() {
				text, err := gwCall(ctx, b.sess, "slow", map[string]any{"ms": 100, "steps": 20})
				rb <- reply{text, err}
			}()
			r := <-ra
			refused := c.shared && r.err != nil && strings.Contains(r.err.Error(), "cannot tell whose this request is")
			if !refused && (r.err != nil || r.text != "sampled by A: "+prompt) {
				t.Errorf("A's sample: %q, %v; want %q", r.text, r.err, "sampled by A: "+prompt)
			}
			if r := <-rb; r.err != nil {
				t.Errorf("B's slow call: %v", r.err)
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			if len(b.seen) > 0 {
				t.Errorf("client B was asked to sample %q", b.seen)
			}
		})
	}
}

// gwSamplerClient is a session whose sampling handler signs its answers
// with the client's name and records the prompts it was shown.
type gwSamplerClient struct {
	sess *mcp.ClientSession
	mu   sync.Mutex
	seen []string // guarded by mu
}

func gwSampler(t *testing.T, ctx context.Context, url, name, token string) *gwSamplerClient {
	c := &gwSamplerClient{}
	opts := &mcp.ClientOptions{CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		var text string
		if len(req.Params.Messages) > 0 {
			if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		c.mu.Lock()
		c.seen = append(c.seen, text)
		c.mu.Unlock()
		return &mcp.CreateMessageResult{Role: "assistant", Model: "e2e", Content: &mcp.TextContent{Text: "sampled by " + name + ": " + text}}, nil
	}}
	hc := gwHTTP
	if token != "" {
		hc = &http.Client{Transport: gwBearer{token: token, base: gwHTTP.Transport}}
	}
	c.sess = gwConnect(t, ctx, url, hc, opts, gwLegacy)
	return c
}

// gwBearer adds a bearer token to every request.
type gwBearer struct {
	token string
	base  http.RoundTripper
}

func (b gwBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// TestGatewayAggregation: two servers behind one serve, as a client on the
// 2025-11-25 protocol and on the 2026-07-28 one sees them: prefixed tools
// and prompts routed to the right upstream, server-to-client requests
// (sampling, elicitation) answered to the upstream that asked, progress and
// list_changed notifications passed on.
func TestGatewayAggregation(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		g := gwServe(t, m, gwConfig(t, m, "a", "b"))
		for i, version := range gwVersions {
			t.Run(version, func(t *testing.T) {
				rec := newGWRecorder()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				sess := gwConnect(t, ctx, g.url, nil, rec.options(), version)
				gwFeatures(t, sess, rec, gwTarget{servers: []string{"a", "b"}, prefixed: true}, version, fmt.Sprintf("fresh%d", i))
			})
		}
	})
}

// TestGatewayTestServer runs the same checks against testdata/mcpserver
// without mcpbox, so a failure above can be told from a broken test server.
func TestGatewayTestServer(t *testing.T) {
	bin := filepath.Join(goBuild(t, gwServerPkg), "mcpserver")
	for i, version := range gwVersions {
		t.Run(version, func(t *testing.T) {
			rec := newGWRecorder()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sess := gwDirect(t, ctx, bin, rec.options(), version)
			gwFeatures(t, sess, rec, gwTarget{servers: []string{"solo"}}, version, fmt.Sprintf("fresh%d", i))
		})
	}
	// The faults TestGatewayFaults survives are real: each one breaks a
	// plain client.
	for _, f := range []struct {
		tool string
		args map[string]any
	}{
		{"crash", nil},
		{"garbage", nil},
		{"huge", map[string]any{"mib": 50}},
	} {
		t.Run(f.tool, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sess := gwDirect(t, ctx, bin, nil, "")
			_, err := gwCall(ctx, sess, f.tool, f.args)
			if err == nil {
				_, err = gwCall(ctx, sess, "echo", map[string]any{"text": "x"})
			}
			if err == nil {
				t.Fatalf("%s did not break a plain client", f.tool)
			}
			if ctx.Err() != nil {
				t.Fatalf("%s hung a plain client", f.tool)
			}
			t.Logf("%s: %v", f.tool, err)
		})
	}
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
	cmd := exec.Command(bin, "-name", "solo")
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "gateway-e2e", Version: "1"}, opts)
	sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		gwReap(cmd)
		tb.Fatalf("connecting to %s: %v", bin, err)
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

// gwFeatures checks, through sess, every feature of the servers in tg.
// fresh is the name of a tool to add at runtime, new to the servers.
func gwFeatures(t *testing.T, sess *mcp.ClientSession, rec *gwRecorder, tg gwTarget, version, fresh string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if got := sess.InitializeResult().ProtocolVersion; got != version {
		// A server may negotiate down; what follows must work either way.
		t.Logf("asked for protocol %s, negotiated %s", version, got)
	}
	first := tg.servers[0]

	names := gwToolNames(t, ctx, sess)
	for _, srv := range tg.servers {
		for _, tool := range []string{"whoami", "echo", "slow", "sample", "elicit", "add_tool", "crash"} {
			if !names[tg.name(srv, tool)] {
				t.Errorf("tools/list lacks %s: %v", tg.name(srv, tool), names)
			}
		}
	}
	if tg.prefixed && (names["echo"] || names["whoami"]) {
		t.Errorf("tools/list has unprefixed tools: %v", names)
	}

	t.Run("routing", func(t *testing.T) {
		for _, srv := range tg.servers {
			gwMustCall(t, sess, tg.name(srv, "whoami"), nil, srv)
			text := srv + " " + gwHex(4)
			gwMustCall(t, sess, tg.name(srv, "echo"), map[string]any{"text": text}, text)
		}
	})
	t.Run("prompts", func(t *testing.T) {
		res, err := sess.ListPrompts(ctx, &mcp.ListPromptsParams{})
		if err != nil {
			t.Fatalf("prompts/list: %v", err)
		}
		got := map[string]bool{}
		for _, p := range res.Prompts {
			got[p.Name] = true
		}
		for _, srv := range tg.servers {
			name := tg.name(srv, "greet")
			if !got[name] {
				t.Fatalf("prompts/list: %v, lacks %s", got, name)
			}
			pr, err := sess.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: map[string]string{"who": version}})
			if err != nil {
				t.Fatalf("prompts/get %s: %v", name, err)
			}
			want := fmt.Sprintf("hello %s from %s", version, srv)
			if len(pr.Messages) != 1 {
				t.Fatalf("prompts/get %s: %d messages, want 1", name, len(pr.Messages))
			}
			if tc, ok := pr.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != want {
				t.Errorf("prompts/get %s: %+v, want %q", name, pr.Messages[0].Content, want)
			}
		}
	})
	t.Run("resources", func(t *testing.T) {
		res, err := sess.ListResources(ctx, &mcp.ListResourcesParams{})
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		texts := map[string]bool{}
		for _, r := range res.Resources {
			rr, err := sess.ReadResource(ctx, &mcp.ReadResourceParams{URI: r.URI})
			if err != nil {
				t.Fatalf("resources/read %s: %v", r.URI, err)
			}
			for _, c := range rr.Contents {
				texts[c.Text] = true
			}
		}
		for _, srv := range tg.servers {
			if !texts["server "+srv] {
				t.Errorf("resources %v read as %v, lack %q", res.Resources, texts, "server "+srv)
			}
		}
		if len(res.Resources) != len(tg.servers) {
			t.Errorf("%d resources, want %d: %v", len(res.Resources), len(tg.servers), res.Resources)
		}
	})
	t.Run("sampling and elicitation", func(t *testing.T) {
		type req struct{ tool, key, arg, want string }
		var reqs []req
		for _, srv := range tg.servers {
			p := "prompt for " + srv + " " + gwHex(4)
			reqs = append(reqs, req{tg.name(srv, "sample"), "prompt", p, "sampled: " + p})
			q := "question for " + srv + " " + gwHex(4)
			want, _ := json.Marshal(map[string]any{"action": "accept", "content": map[string]any{"answer": "answer to " + q}})
			reqs = append(reqs, req{tg.name(srv, "elicit"), "message", q, string(want)})
		}
		// All at once, so an answer routed to the wrong upstream shows.
		var wg sync.WaitGroup
		for _, r := range reqs {
			wg.Go(func() {
				got, err := gwCall(ctx, sess, r.tool, map[string]any{r.key: r.arg})
				if err != nil || got != r.want {
					t.Errorf("%s: %q, %v; want %q", r.tool, got, err, r.want)
				}
			})
		}
		wg.Wait()
	})
	t.Run("progress", func(t *testing.T) {
		srv := tg.servers[len(tg.servers)-1]
		token := "tok-" + gwHex(4)
		p := &mcp.CallToolParams{Name: tg.name(srv, "slow"), Arguments: map[string]any{"ms": 30, "steps": 3}}
		p.SetProgressToken(token)
		res, err := sess.CallTool(ctx, p)
		if err != nil || res.IsError || gwText(res) != "slept 3 steps" {
			t.Fatalf("%s: %+v, %v", p.Name, res, err)
		}
		var got []string
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			rec.mu.Lock()
			got = got[:0]
			for _, n := range rec.progress {
				if n.ProgressToken == token {
					got = append(got, fmt.Sprintf("%g/%g %s", n.Progress, n.Total, n.Message))
				}
			}
			rec.mu.Unlock()
			if len(got) >= 3 || time.Now().After(deadline) {
				break
			}
		}
		want := []string{"1/3 " + srv + " step 1", "2/3 " + srv + " step 2", "3/3 " + srv + " step 3"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("progress for %s: %q, want %q", token, got, want)
		}
	})
	t.Run("logging", func(t *testing.T) {
		if err := sess.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatalf("logging/setLevel: %v", err)
		}
		// On 2026-07-28 the level travels with each request instead.
		log := func(srv, level, text string) {
			p := &mcp.CallToolParams{Name: tg.name(srv, "log"), Arguments: map[string]any{"level": level, "text": text}}
			p.Meta = mcp.Meta{mcp.MetaKeyLogLevel: "info"}
			res, err := sess.CallTool(ctx, p)
			if err != nil || res.IsError {
				t.Fatalf("%s: %+v, %v", p.Name, res, err)
			}
		}
		want := map[string]bool{}
		for _, srv := range tg.servers {
			text := "log from " + srv + " " + gwHex(4)
			want[text] = true
			log(srv, "warning", text)
			log(srv, "debug", "below the level: "+text)
		}
		got := map[string]bool{}
		for deadline := time.Now().Add(5 * time.Second); len(got) < len(want) && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			rec.mu.Lock()
			for _, l := range rec.logs {
				if s, ok := l.Data.(string); ok && strings.Contains(s, " from ") {
					got[s] = true
				}
			}
			rec.mu.Unlock()
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("log messages %v, want %v", got, want)
		}
	})
	t.Run("list_changed", func(t *testing.T) {
		for len(rec.listChanged) > 0 {
			<-rec.listChanged
		}
		gwMustCall(t, sess, tg.name(first, "add_tool"), map[string]any{"name": fresh}, "added "+fresh)
		select {
		case <-rec.listChanged:
		case <-time.After(15 * time.Second):
			t.Fatal("no notifications/tools/list_changed within 15 s of adding a tool upstream")
		}
		names := gwToolNames(t, ctx, sess)
		if !names[tg.name(first, fresh)] {
			t.Fatalf("after adding %s to %s, tools/list is %v", fresh, first, names)
		}
		for _, srv := range tg.servers[1:] {
			if names[tg.name(srv, fresh)] {
				t.Errorf("tools/list has %s, added only to %s", tg.name(srv, fresh), first)
			}
		}
		gwMustCall(t, sess, tg.name(first, fresh), nil, fresh+" from "+first)
	})
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
