//go:build linux

package podagent

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"mcpbox/internal/procgroup"
)

// The test binary is the agent of the pods the tests start.
func TestMain(m *testing.M) {
	if os.Getenv("PODAGENT_TEST_AGENT") == "1" {
		os.Exit(Main(os.Args[1:], os.Stderr))
	}
	code := m.Run()
	if serverDir != "" {
		os.RemoveAll(serverDir)
	}
	if code == 0 {
		// Every connection a test made is closed: nothing of it runs on.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var (
	serverOnce sync.Once
	serverDir  string
	serverBin  string
	serverErr  error
)

// mcpServer builds the e2e tests' stdio MCP server once per run.
func mcpServer(t testing.TB) string {
	t.Helper()
	serverOnce.Do(func() {
		gobin, err := exec.LookPath("go")
		if err != nil {
			serverErr = fmt.Errorf("no go toolchain to build the MCP server: %w", err)
			return
		}
		if serverDir, err = os.MkdirTemp("", "podagent-test-"); err != nil {
			serverErr = err
			return
		}
		serverBin = filepath.Join(serverDir, "mcpserver")
		cmd := exec.Command(gobin, "build", "-o", serverBin, "../../test/e2e/testdata/mcpserver")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			serverErr = fmt.Errorf("building the MCP server: %v\n%s", err, out)
		}
	})
	if serverErr != nil {
		t.Fatal(serverErr)
	}
	return serverBin
}

// pod is an agent process with its certificate, as a pod would run it.
type pod struct {
	name, addr, dir, secrets string
	ca                       *CA
	cmd                      *exec.Cmd
	certPEM, keyPEM          []byte

	mu     sync.Mutex
	stderr bytes.Buffer // guarded by mu
	exited chan struct{}
	code   int // set before exited closes
	// server is the server's process group, held by pidfd from when its
	// pid was logged; nil if never. Set before exited closes.
	server *procgroup.Group
}

type podOpts struct {
	ca    *CA           // nil: a new one
	flags []string      // more agent flags
	ttl   time.Duration // the pod certificate's; zero: DefaultPodTTL
}

var listenRE = regexp.MustCompile(`listening on (\S+)`)

// startPod starts an agent for pod name running the test MCP server, and
// waits until it listens.
func startPod(t testing.TB, name string, o podOpts) *pod {
	t.Helper()
	return startAgent(t, name, o, []string{mcpServer(t), "-name", name})
}

// startPodCommand starts an agent for pod name running command.
func startPodCommand(t testing.TB, name string, ca *CA, command []string) *pod {
	t.Helper()
	return startAgent(t, name, podOpts{ca: ca}, command)
}

func startAgent(t testing.TB, name string, o podOpts, command []string) *pod {
	t.Helper()
	ca := o.ca
	if ca == nil {
		var err error
		if ca, err = NewCA(); err != nil {
			t.Fatal(err)
		}
	}
	certPEM, keyPEM, err := ca.IssuePodTTL(name, cmp.Or(o.ttl, DefaultPodTTL))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := &pod{name: name, dir: dir, ca: ca, certPEM: certPEM, keyPEM: keyPEM, secrets: filepath.Join(dir, "secrets"), exited: make(chan struct{})}
	for f, data := range map[string][]byte{"pod.pem": certPEM, "pod-key.pem": keyPEM, "ca.pem": ca.CAPEM()} {
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(p.secrets, 0o700); err != nil {
		t.Fatal(err)
	}
	args := []string{"--listen", "127.0.0.1:0", "--cert", filepath.Join(dir, "pod.pem"),
		"--key", filepath.Join(dir, "pod-key.pem"), "--ca", filepath.Join(dir, "ca.pem"),
		"--secrets-dir", p.secrets, "--stop-timeout", "2s"}
	args = append(append(append(args, o.flags...), "--"), command...)
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = append(os.Environ(), "PODAGENT_TEST_AGENT=1", "MCPBOX_AGENT_CANARY=agent-only")
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.Write(sc.Bytes())
			p.stderr.WriteByte('\n')
			p.mu.Unlock()
			if m := listenRE.FindSubmatch(sc.Bytes()); m != nil {
				select {
				case listening <- string(m[1]):
				default:
				}
			}
			if m := pidRE.FindSubmatch(sc.Bytes()); m != nil && p.server == nil {
				n, _ := strconv.Atoi(string(m[1]))
				p.server = holdServer(p.cmd.Process.Pid, n)
			}
		}
		err := p.cmd.Wait()
		p.code = 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			p.code = ee.ExitCode()
		}
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
		// The server is in its own process group; end it if it outlived
		// the agent. By the pidfd held since it started: its number may
		// lead another program's group by now.
		if p.server != nil {
			_ = p.server.Kill()
			_ = p.server.Close()
		}
	})
	select {
	case p.addr = <-listening:
	case <-p.exited:
		t.Fatalf("the agent exited with %d before listening:\n%s", p.code, p.log())
	case <-time.After(20 * time.Second):
		t.Fatalf("the agent did not listen within 20s:\n%s", p.log())
	}
	return p
}

func (p *pod) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

var pidRE = regexp.MustCompile(`started the server \(pid (\d+)\)`)

// holdServer holds the process group of the server the agent agent
// logged as pid, or returns nil if pid no longer names the agent's child.
// The agent is not reaped yet (the caller reaps it later), so a process
// whose parent is the agent after the pidfd was opened is the server, and
// if the server died before, the pidfd names a dead process.
func holdServer(agent, pid int) *procgroup.Group {
	proc, err := os.FindProcess(pid)
	if err != nil {
		return nil
	}
	g, err := procgroup.Open(proc)
	if err != nil {
		return nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(b, ')') // the name may hold spaces or ')'
	if err != nil || i < 0 {
		_ = g.Close()
		return nil
	}
	if f := strings.Fields(string(b[i+1:])); len(f) < 2 || f[1] != strconv.Itoa(agent) {
		_ = g.Close()
		return nil
	}
	return g
}

func (p *pod) serverPID() int {
	m := pidRE.FindStringSubmatch(p.log())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// wait returns the agent's exit code, failing if it runs past d.
func (p *pod) wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.code
	case <-time.After(d):
		t.Fatalf("the agent still runs after %s:\n%s", d, p.log())
		return 0
	}
}

// waitLog waits until the agent's stderr holds s.
func (p *pod) waitLog(t testing.TB, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.log(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent's stderr lacks %q:\n%s", s, p.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// connTransport hands a go-sdk client a connection made already.
type connTransport struct{ c mcp.Connection }

func (t connTransport) Connect(context.Context) (mcp.Connection, error) { return t.c, nil }

func session(t testing.TB, c any, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var so *mcp.ClientSessionOptions
	if version != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	tr, ok := c.(mcp.Transport)
	if !ok {
		tr = connTransport{c.(mcp.Connection)}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts).Connect(ctx, tr, so)
	if err != nil {
		t.Fatalf("initializing through the agent: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func connect(t testing.TB, p *pod, start StartRequest) mcp.Connection {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Connect(ctx, p.addr, p.name, p.ca, start)
	if err != nil {
		t.Fatalf("Connect: %v\nagent:\n%s", err, p.log())
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func callText(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", err
	}
	if res.IsError {
		return "", fmt.Errorf("tool error: %v", res.Content)
	}
	var out strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out.WriteString(tc.Text)
		}
	}
	return out.String(), nil
}

func random(t testing.TB) string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func TestConnectRunsTheServer(t *testing.T) {
	p := startPod(t, "pod-a", podOpts{})
	envSecret, fileSecret := "env-"+random(t), "file-"+random(t)
	c := connect(t, p, StartRequest{Env: map[string]string{"API_TOKEN": envSecret},
		Files: map[string][]byte{"token": []byte(fileSecret)}})
	var progress sync.Map
	listChanged := make(chan struct{}, 8)
	cs := session(t, c, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			progress.Store(r.Params.Progress, true)
		},
		CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			prompt := r.Params.Messages[0].Content.(*mcp.TextContent).Text
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test", Content: &mcp.TextContent{Text: "sampled: " + prompt}}, nil
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case listChanged <- struct{}{}:
			default:
			}
		},
	}, "")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"echo", "getenv", "slow", "crash"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Errorf("tools/list through the agent lacks %s: %v", want, names)
		}
	}
	if got, err := callText(t, cs, "echo", map[string]any{"text": "héllo <&>"}); err != nil || got != "héllo <&>" {
		t.Errorf("echo = %q, %v", got, err)
	}
	if got, err := callText(t, cs, "whoami", nil); err != nil || got != "pod-a" {
		t.Errorf("whoami = %q, %v", got, err)
	}

	t.Run("secrets reach the server", func(t *testing.T) {
		if got, err := callText(t, cs, "getenv", map[string]any{"text": "API_TOKEN"}); err != nil || got != envSecret {
			t.Errorf("the server's API_TOKEN = %q, %v; want the secret sent at start", got, err)
		}
		path := filepath.Join(p.secrets, "token")
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o400 {
			t.Errorf("secret file mode %o, want 400", fi.Mode().Perm())
		}
		if b, _ := os.ReadFile(path); string(b) != fileSecret {
			t.Errorf("secret file holds %q, want %q", b, fileSecret)
		}
		if !inMemory(p.secrets) && !strings.Contains(p.log(), "is not memory-backed") {
			t.Errorf("secret files went to a disk-backed directory without a warning:\n%s", p.log())
		}
		if got, err := callText(t, cs, "getenv", map[string]any{"text": "MCPBOX_AGENT_CANARY"}); err != nil || got != "" {
			t.Errorf("the server inherited the agent's own setting MCPBOX_AGENT_CANARY=%q (%v)", got, err)
		}
	})
	t.Run("secrets are not the agent's", func(t *testing.T) {
		for _, f := range []string{"environ", "cmdline"} {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", p.cmd.Process.Pid, f))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b, []byte("PODAGENT_TEST_AGENT")) && f == "environ" {
				t.Fatalf("read the wrong process's environ")
			}
			for _, s := range []string{envSecret, fileSecret} {
				if bytes.Contains(b, []byte(s)) {
					t.Errorf("the agent's %s holds a secret", f)
				}
			}
		}
		if strings.Contains(p.log(), envSecret) || strings.Contains(p.log(), fileSecret) {
			t.Errorf("the agent logged a secret:\n%s", p.log())
		}
	})
	t.Run("progress arrives", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 10, "steps": 3},
			Meta: mcp.Meta{"progressToken": "tok-1"}})
		if err != nil || res.IsError {
			t.Fatalf("slow: %v %v", err, res)
		}
		// The go-sdk client runs notification handlers on their own, so
		// they may finish after the result (the order on the connection
		// is TestProgressBeforeResponse's).
		deadline := time.Now().Add(10 * time.Second)
		for n := 0; n != 3; {
			n = 0
			progress.Range(func(any, any) bool { n++; return true })
			if time.Now().After(deadline) {
				t.Fatalf("got %d progress notifications, want 3", n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	t.Run("stderr is forwarded", func(t *testing.T) {
		marker := "marker-" + random(t)
		if _, err := callText(t, cs, "stderr", map[string]any{"text": marker}); err != nil {
			t.Fatal(err)
		}
		p.waitLog(t, marker)
	})
	t.Run("the server's requests and the answers", func(t *testing.T) {
		// The server asks the client to sample during the call: its request
		// comes on the event stream, the answer goes back in a POST.
		if got, err := callText(t, cs, "sample", map[string]any{"prompt": "ping"}); err != nil || got != "sampled: ping" {
			t.Errorf("sample = %q, %v", got, err)
		}
	})
	t.Run("server notifications on the event stream", func(t *testing.T) {
		// add_tool makes the server send tools/list_changed: not a call's
		// progress, so it comes on the event stream.
		if _, err := callText(t, cs, "add_tool", map[string]any{"name": "late"}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-listChanged:
		case <-time.After(10 * time.Second):
			t.Fatal("no tools/list_changed from the server within 10s")
		}
	})
}

func TestConnectSessionless2026(t *testing.T) {
	p := startPod(t, "pod-new", podOpts{})
	c := connect(t, p, StartRequest{Env: map[string]string{"V": "x"}})
	cs := session(t, c, nil, "2026-07-28")
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Errorf("negotiated %q through the agent, want 2026-07-28 (server/discover)", v)
	}
	if got, err := callText(t, cs, "echo", map[string]any{"text": "sessionless"}); err != nil || got != "sessionless" {
		t.Errorf("echo = %q, %v", got, err)
	}
	if got, err := callText(t, cs, "getenv", map[string]any{"text": "V"}); err != nil || got != "x" {
		t.Errorf("getenv = %q, %v", got, err)
	}
}

// rawPost sends body to path on the pod with conf and returns the status.
func rawPost(t testing.TB, p *pod, conf *tls.Config, path string, body []byte) (int, error) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: conf, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+p.addr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestAgentRefusesAllButTheGateway(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	p := startPod(t, "pod-a", podOpts{ca: ca})
	otherClient, err := other.clientCert()
	if err != nil {
		t.Fatal(err)
	}
	podCert, err := tls.X509KeyPair(p.certPEM, p.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	// A second pod of the same CA, whose certificate an attacker in that
	// pod holds.
	bCert, bKey, err := ca.IssuePod("pod-b")
	if err != nil {
		t.Fatal(err)
	}
	podB, err := tls.X509KeyPair(bCert, bKey)
	if err != nil {
		t.Fatal(err)
	}
	// A client certificate the CA signed, but not the gateway's: what a
	// future use of the CA, or a bug in it, might issue.
	now := time.Now()
	stranger, err := sign(&x509.Certificate{Subject: pkix.Name{CommonName: "not the gateway"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca.cert, &ca.key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	// It holds the CA's key pair, as good as any for this test.
	strangerCert := tls.Certificate{Certificate: [][]byte{stranger}, PrivateKey: ca.key}
	trustPod := func(certs ...tls.Certificate) *tls.Config {
		conf := ca.ClientTLS(p.name)
		conf.GetClientCertificate = nil
		conf.Certificates = certs
		return conf
	}
	start := []byte(`{"env":{"X":"1"}}`)
	for _, tc := range []struct {
		name string
		conf *tls.Config
	}{
		{"no client certificate", trustPod()},
		{"another CA's gateway certificate", trustPod(*otherClient)},
		{"the pod's own certificate", trustPod(podCert)},
		{"another pod's certificate", trustPod(podB)},
		{"a client certificate of the CA not the gateway's", trustPod(strangerCert)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/v1/start", "/mcp", "/healthz"} {
				status, err := rawPost(t, p, tc.conf, path, start)
				if err == nil {
					t.Errorf("POST %s with %s: status %d, want the handshake refused", path, tc.name, status)
				}
			}
		})
	}
	t.Run("plain HTTP", func(t *testing.T) {
		resp, err := http.Post("http://"+p.addr+"/v1/start", "application/json", bytes.NewReader(start))
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Errorf("plain HTTP start: %s %s", resp.Status, body)
			}
		}
	})
	if pid := p.serverPID(); pid != 0 {
		t.Fatalf("a refused client started the server (pid %d)", pid)
	}
	// Each was refused for its own reason, in the handshake.
	for _, why := range []string{"didn't provide a certificate", "unknown authority", "incompatible key usage", "not the gateway's"} {
		if !strings.Contains(p.log(), why) {
			t.Errorf("the agent's log lacks a handshake refused for %q:\n%s", why, p.log())
		}
	}
	// The gateway still can: nothing was started before.
	c := connect(t, p, StartRequest{})
	cs := session(t, c, nil, "")
	if got, err := callText(t, cs, "whoami", nil); err != nil || got != "pod-a" {
		t.Errorf("whoami = %q, %v", got, err)
	}
}

func TestConnectRefusesAnotherPod(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	b := startPod(t, "pod-b", podOpts{ca: ca})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	secret := random(t)
	c, err := Connect(ctx, b.addr, "pod-a", ca, StartRequest{Env: map[string]string{"S": secret}})
	if err == nil {
		c.Close()
		t.Fatal("Connect to pod-b's address expecting pod-a succeeded")
	}
	if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Connect error %q does not name the certificate", err)
	}
	if pid := b.serverPID(); pid != 0 {
		t.Fatalf("pod-b started its server for a gateway that wanted pod-a")
	}
	// pod-b, asked for by name, works (nothing was started).
	cs := session(t, connect(t, b, StartRequest{}), nil, "")
	if got, err := callText(t, cs, "getenv", map[string]any{"text": "S"}); err != nil || got != "" {
		t.Errorf("pod-b's server has S=%q (%v): the secret meant for pod-a reached it", got, err)
	}
}

func TestSecondStartRefused(t *testing.T) {
	p := startPod(t, "pod-a", podOpts{})
	cs := session(t, connect(t, p, StartRequest{Env: map[string]string{"S": "first"}}), nil, "")
	conf := p.ca.ClientTLS(p.name)
	status, err := rawPost(t, p, conf, "/v1/start", []byte(`{"env":{"S":"second"}}`))
	if err != nil || status != http.StatusConflict {
		t.Errorf("a second start: status %d, %v; want 409", status, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := Connect(ctx, p.addr, p.name, p.ca, StartRequest{}); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("a second Connect: %v; want 409 Conflict", err)
	}
	if got, err := callText(t, cs, "getenv", map[string]any{"text": "S"}); err != nil || got != "first" {
		t.Errorf("after a second start, S = %q (%v), want first", got, err)
	}
	if n := strings.Count(p.log(), "started the server"); n != 1 {
		t.Errorf("the server started %d times", n)
	}
}

func TestBadStartRequests(t *testing.T) {
	p := startPod(t, "pod-a", podOpts{})
	conf := p.ca.ClientTLS(p.name)
	for _, body := range []string{
		`{"files":{"../escape":"eA=="}}`,
		`{"files":{"a/b":"eA=="}}`,
		`{"files":{"..":"eA=="}}`,
		`{"env":{"A=B":"x"}}`,
		`{"env":{"MCPBOX_AGENT_CERT":"x"}}`,
		`{"env":{"A":"x\u0000y"}}`,
		`{"unknown":1}`,
		`not json`,
	} {
		status, err := rawPost(t, p, conf, "/v1/start", []byte(body))
		if err != nil || status != http.StatusBadRequest {
			t.Errorf("start %s: status %d, %v; want 400", body, status, err)
		}
	}
	if _, err := os.Stat(filepath.Join(p.dir, "escape")); err == nil {
		t.Error("a file name escaped the secrets directory")
	}
	big := `{"env":{"A":"` + strings.Repeat("x", maxStartBody) + `"}}`
	if status, err := rawPost(t, p, conf, "/v1/start", []byte(big)); err == nil && status < 400 {
		t.Errorf("an oversized start: status %d", status)
	}
	if pid := p.serverPID(); pid != 0 {
		t.Fatal("a bad start request started the server")
	}
}

func TestNothingRunsBeforeStart(t *testing.T) {
	p := startPod(t, "pod-a", podOpts{flags: []string{"--start-timeout", "1500ms"}})
	status, err := rawPost(t, p, p.ca.ClientTLS(p.name), "/mcp", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil || status != http.StatusServiceUnavailable {
		t.Errorf("/mcp before start: %d, %v; want 503", status, err)
	}
	if kids := children(t, p.cmd.Process.Pid); len(kids) != 0 {
		t.Errorf("the agent has children before start: %v", kids)
	}
	if code := p.wait(t, 10*time.Second); code == 0 {
		t.Errorf("an agent never started exited 0; want non-zero")
	}
	if !strings.Contains(p.log(), "no start request") {
		t.Errorf("the agent's log does not say why it exited:\n%s", p.log())
	}
}

// children lists the processes whose parent is pid.
func children(t *testing.T, pid int) []string {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		kids = append(kids, strings.Fields(string(b))...)
	}
	return kids
}

func TestOversizedMessages(t *testing.T) {
	const limit = 64 << 10
	p := startPod(t, "pod-a", podOpts{flags: []string{"--max-message", strconv.Itoa(limit)}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := ConnectMax(ctx, p.addr, p.name, p.ca, StartRequest{}, limit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cs := session(t, c, nil, "")

	t.Run("from the server", func(t *testing.T) {
		_, err := callText(t, cs, "blob", map[string]any{"bytes": 2 * limit})
		if err == nil || !strings.Contains(err.Error(), "limit") {
			t.Errorf("a result over the limit: %v; want an error naming the limit", err)
		}
		// The call ended at once with an error, rather than at a timeout,
		// and the connection still works.
		if got, err := callText(t, cs, "echo", map[string]any{"text": "after"}); err != nil || got != "after" {
			t.Errorf("echo after an oversized result = %q, %v", got, err)
		}
	})
	t.Run("to the server", func(t *testing.T) {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, strings.Repeat("y", 2*limit))
		status, err := rawPost(t, p, p.ca.ClientTLS(p.name), "/mcp", []byte(body))
		if err != nil || status != http.StatusRequestEntityTooLarge {
			t.Errorf("a request over the limit: %d, %v; want 413", status, err)
		}
		_, err = callText(t, cs, "echo", map[string]any{"text": strings.Repeat("z", 2*limit)})
		if err == nil {
			t.Errorf("a call over the limit succeeded")
		}
		if got, err := callText(t, cs, "echo", map[string]any{"text": "still"}); err != nil || got != "still" {
			t.Errorf("echo after an oversized request = %q, %v", got, err)
		}
	})
	p.waitLog(t, "larger than")
}

func TestServerCrashEndsAgentAndConnection(t *testing.T) {
	p := startPod(t, "pod-a", podOpts{})
	c := connect(t, p, StartRequest{})
	rawInit(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, _ := jsonrpc.MakeID(float64(7))
	if err := c.Write(ctx, &jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{"name":"crash","arguments":{}}`)}); err != nil {
		t.Fatal(err)
	}
	// The call ends with an error, then the connection does.
	var connErr error
	for connErr == nil {
		msg, err := c.Read(ctx)
		if ctx.Err() != nil {
			t.Fatal("the connection did not end within 10s of the server's crash")
		}
		if r, ok := msg.(*jsonrpc.Response); ok && r.ID == id && r.Error == nil {
			t.Error("the crashing call succeeded")
		}
		connErr = err
	}
	if !errors.Is(connErr, ErrStreamEnded) {
		t.Errorf("the connection ended with %v, want ErrStreamEnded", connErr)
	}
	if code := p.wait(t, 10*time.Second); code != 3 {
		t.Errorf("the agent exited %d after its server exited 3; want 3", code)
	}
	if err := c.Write(ctx, &jsonrpc.Request{ID: id, Method: "tools/list"}); err == nil {
		t.Error("a write after the crash succeeded")
	}
}

// rawInit runs the session-based handshake on c by hand.
func rawInit(t *testing.T, c mcp.Connection) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, _ := jsonrpc.MakeID(float64(1))
	err := c.Write(ctx, &jsonrpc.Request{ID: id, Method: "initialize",
		Params: json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := c.Read(ctx)
	if r, ok := msg.(*jsonrpc.Response); err != nil || !ok || r.Error != nil {
		t.Fatalf("initialize: %v %+v", err, msg)
	}
	if err := c.Write(ctx, &jsonrpc.Request{Method: "notifications/initialized"}); err != nil {
		t.Fatal(err)
	}
}

// TestProgressBeforeResponse: a call's progress notifications reach the
// connection before its response (the gateway forwards them to the
// client before the result).
func TestProgressBeforeResponse(t *testing.T) {
	p := startPod(t, "pod-a", podOpts{})
	c := connect(t, p, StartRequest{})
	rawInit(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for round := range 5 {
		id, _ := jsonrpc.MakeID(float64(10 + round))
		tok := fmt.Sprintf("tok-%d", round)
		err := c.Write(ctx, &jsonrpc.Request{ID: id, Method: "tools/call",
			Params: json.RawMessage(`{"name":"slow","arguments":{"ms":5,"steps":4},"_meta":{"progressToken":"` + tok + `"}}`)})
		if err != nil {
			t.Fatal(err)
		}
		progress := 0
		for {
			msg, err := c.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r, ok := msg.(*jsonrpc.Response); ok && r.ID == id {
				if r.Error != nil {
					t.Fatal(r.Error)
				}
				break
			}
			if r, ok := msg.(*jsonrpc.Request); ok && r.Method == "notifications/progress" && strings.Contains(string(r.Params), tok) {
				progress++
			}
		}
		if progress != 4 {
			t.Errorf("round %d: %d progress notifications before the response, want 4", round, progress)
		}
	}
}

func TestSIGTERMStopsTheServer(t *testing.T) {
	p := startPod(t, "pod-a", podOpts{})
	cs := session(t, connect(t, p, StartRequest{}), nil, "")
	if _, err := callText(t, cs, "echo", map[string]any{"text": "x"}); err != nil {
		t.Fatal(err)
	}
	pid := p.serverPID()
	if pid == 0 {
		t.Fatal("no server pid in the agent's log")
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 10*time.Second); code != 0 {
		t.Errorf("the agent exited %d on SIGTERM; want 0\n%s", code, p.log())
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the server (pid %d) outlived its agent: kill 0 = %v", pid, err)
	}
}

func TestMainUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--help"}, 0, "-secrets-dir"},
		{[]string{"--cert", "c", "--key", "k", "--ca", "a"}, 2, "usage: mcpbox agent"},
		{[]string{"--", "true"}, 2, "usage: mcpbox agent"},
		{[]string{"--bogus"}, 2, "not defined"},
		{[]string{"--cert", "/nonexistent", "--key", "k", "--ca", "a", "--", "true"}, 1, "loading the pod certificate"},
	} {
		var buf bytes.Buffer
		if code := Main(tc.args, &buf); code != tc.code || !strings.Contains(buf.String(), tc.want) {
			t.Errorf("Main(%q) = %d, want %d with %q:\n%s", tc.args, code, tc.code, tc.want, buf.String())
		}
	}
}

func TestServerThatCannotStart(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	p := startPodCommand(t, "pod-a", ca, []string{"/nonexistent/server"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := Connect(ctx, p.addr, p.name, ca, StartRequest{}); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("Connect to a pod whose server cannot start: %v; want 500", err)
	}
	if code := p.wait(t, 10*time.Second); code == 0 {
		t.Error("the agent exited 0 when its server could not start")
	}
	if !strings.Contains(p.log(), "starting the server") {
		t.Errorf("the agent's log does not say why it exited:\n%s", p.log())
	}
}

// TestReapsOrphans: a process the server leaves behind becomes the
// agent's, and the agent waits for it when it ends, as a container's
// PID 1 must, instead of keeping a zombie for the pod's life.
func TestReapsOrphans(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	script := "(sleep 1 </dev/null >/dev/null 2>&1 &); exec " + mcpServer(t) + " -name reap"
	p := startAgent(t, "pod-a", podOpts{ca: ca, flags: []string{"--reap"}}, []string{"/bin/sh", "-c", script})
	cs := session(t, connect(t, p, StartRequest{}), nil, "")
	if got, err := callText(t, cs, "whoami", nil); err != nil || got != "reap" {
		t.Fatalf("whoami = %q, %v", got, err)
	}
	orphan := ""
	for _, pid := range children(t, p.cmd.Process.Pid) {
		if b, _ := os.ReadFile("/proc/" + pid + "/comm"); strings.TrimSpace(string(b)) == "sleep" {
			orphan = pid
		}
	}
	if orphan == "" {
		t.Fatal("the orphaned sleep is not the agent's child: the agent is no subreaper")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := os.Stat("/proc/" + orphan)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile("/proc/" + orphan + "/stat")
			t.Fatalf("the orphan %s was not reaped within 10s: %s", orphan, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got, err := callText(t, cs, "echo", map[string]any{"text": "alive"}); err != nil || got != "alive" {
		t.Errorf("the server after the reaping: %q, %v", got, err)
	}
}

func TestInMemory(t *testing.T) {
	if !inMemory("/dev/shm") {
		t.Skip("/dev/shm is not tmpfs here")
	}
	shm, err := os.MkdirTemp("/dev/shm", "podagent-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(shm)
	if !inMemory(shm) {
		t.Errorf("a directory on tmpfs is not in memory")
	}
	if inMemory("/proc/self") || inMemory("/nonexistent") {
		t.Errorf("procfs or a missing directory counts as memory-backed")
	}
}

// TestStopKillsALingeringServer: a server that outlives its closed stdin
// and ignores SIGTERM is killed after the grace, and the agent still ends.
func TestStopKillsALingeringServer(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	script := `trap "" TERM; ` + mcpServer(t) + ` -name linger; exec sleep 100`
	p := startAgent(t, "pod-a", podOpts{ca: ca, flags: []string{"--stop-timeout", "300ms"}}, []string{"/bin/sh", "-c", script})
	cs := session(t, connect(t, p, StartRequest{}), nil, "")
	if got, err := callText(t, cs, "whoami", nil); err != nil || got != "linger" {
		t.Fatalf("whoami = %q, %v", got, err)
	}
	pid := p.serverPID()
	begin := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 10*time.Second); code != 0 {
		t.Errorf("the agent exited %d on SIGTERM; want 0\n%s", code, p.log())
	}
	if d := time.Since(begin); d < 600*time.Millisecond {
		t.Errorf("the agent ended after %s, before the server's two graces of 300ms", d)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the lingering server (pid %d) outlived its agent: kill 0 = %v", pid, err)
	}
	if kids := children(t, p.cmd.Process.Pid); len(kids) != 0 {
		t.Errorf("the agent left children: %v", kids)
	}
}

// TestOnceRunsAJob: with --once the agent runs its command as a job once
// the gateway started it (StartJob, env from the start request, never
// the command line) and exits with the job's status: 0 completes the
// container, another status fails it.
func TestOnceRunsAJob(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		want         int
	}{
		{"ok", `test "$JOB_TOKEN" = tok-1 && sleep 0.3 && echo noise`, 0},
		{"fails", `exit 7`, 7},
		{"wrong-token", `test "$JOB_TOKEN" = other`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startAgent(t, "pod-"+tc.name, podOpts{flags: []string{"--once"}}, []string{"sh", "-c", tc.script})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := StartJob(ctx, p.addr, p.name, p.ca, StartRequest{Env: map[string]string{"JOB_TOKEN": "tok-1"}}); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(t, 10*time.Second); code != tc.want {
				t.Errorf("the agent exited %d, want %d:\n%s", code, tc.want, p.log())
			}
		})
	}
	// Another pod's certificate gets nothing started.
	p := startAgent(t, "pod-x", podOpts{flags: []string{"--once"}}, []string{"true"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := StartJob(ctx, p.addr, "pod-y", p.ca, StartRequest{}); err == nil {
		t.Error("a start for another pod's name was accepted")
	}
}
