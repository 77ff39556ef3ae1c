package dashboard

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
	"mcpbox/internal/redact"
	"mcpbox/internal/tcppeer"
	"mcpbox/internal/track"
)

const rigConfig = `version: 1
approvals: {timeout: 30s, channels: [web, cli]}
servers:
  echo:
    command: [echo-server]
    tools:
      rules:
        - {tool: echo, when: 'args.text.startsWith("forbidden")', action: deny}
        - {tool: echo, when: 'args.text.startsWith("review")', action: approve}
      allow: [echo]
  tools:
    command: [tools-server]
`

const (
	adminToken  = "mcpbox_admintoken0123456789"
	viewerToken = "mcpbox_viewertoken012345678"
	bossToken   = "mcpbox_bosstoken01234567890"
)

// rig is a real guard and gateway around an in-process echo server, the
// dashboard over them, and a loopback HTTP server for it.
type rig struct {
	g    *guard.Guard
	gw   *gateway.Gateway
	h    *Handler
	srv  *httptest.Server
	sess *mcp.ClientSession
	ev   *Events

	mu   sync.Mutex
	urls []string // every request's path and query, in order; guarded by mu
}

// requested returns the path and query of every request the server got.
func (r *rig) requested() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.urls)
}

func newRig(t *testing.T) *rig { return newRigWith(t, nil) }

// newRigWith builds the rig; observe, if non-nil, makes the observer
// FollowAudit passes every record to.
func newRigWith(t *testing.T, observe func(*guard.Guard, *gateway.Gateway) func(audit.Record)) *rig {
	t.Helper()
	c, err := config.Load("dash.yaml", []byte(rigConfig))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	g, err := guard.New(c, guard.Options{StateDir: dir, LockPath: filepath.Join(dir, "mcpbox.lock")}, log, &redact.Book{})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New([]*gateway.Server{{Name: "echo", Scope: gateway.ScopeAgent, Allow: []string{"*"}, Launch: trackedLauncher(g)}},
		gateway.Options{Logger: log, Hooks: g.Hooks()})
	if err != nil {
		t.Fatal(err)
	}
	g.Attach(gw)
	ctx, cancel := context.WithCancel(context.Background())
	ev := NewEvents()
	head, err := g.AuditStore().Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var obs []func(audit.Record)
	if observe != nil {
		obs = append(obs, observe(g, gw))
	}
	followed := make(chan struct{})
	go func() { FollowAudit(ctx, g.AuditStore(), head, ev, obs...); close(followed) }()
	h, err := New(Options{
		Backend: g.WebAdmin(gw), Audit: g.AuditStore(), Events: ev,
		Authenticate: func(tok string) (string, string, bool) {
			switch {
			case subtle.ConstantTimeCompare([]byte(tok), []byte(adminToken)) == 1:
				return RoleAdmin, "", true
			case subtle.ConstantTimeCompare([]byte(tok), []byte(viewerToken)) == 1:
				return RoleViewer, "viewer-client", true
			case subtle.ConstantTimeCompare([]byte(tok), []byte(bossToken)) == 1:
				return RoleAdmin, "boss", true // a client with role: admin
			}
			return "", "", false
		},
		LoginSecret:  func() string { return adminToken },
		LinkPeer:     tcppeer.SameUser,
		ToolInfo:     g.ToolInfo,
		Pinned:       g.Pinned,
		ApprovalPoll: 50 * time.Millisecond,
		Servers: func() []Server {
			return []Server{{Name: "echo", Transport: "stdio", Package: rigPackage, Pinned: rigPinned}, {Name: "tools", Transport: "stdio"}}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{}
	mux := http.NewServeMux()
	mux.Handle("/ui/", h)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.urls = append(r.urls, req.URL.RequestURI())
		r.mu.Unlock()
		mux.ServeHTTP(w, req)
	}))
	cr, gwW := io.Pipe()
	gwR, cw := io.Pipe()
	done := make(chan struct{})
	go func() { gw.ServeStdio(ctx, gateway.LocalAgent, gwR, gwW); close(done) }()
	sess, err := mcp.NewClient(&mcp.Implementation{Name: "dash-test", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		sess.Close()
		cancel()
		cw.Close()
		<-done
		<-followed
		gw.Close()
		g.Close()
	})
	r.g, r.gw, r.h, r.srv, r.sess, r.ev = g, gw, h, srv, sess, ev
	return r
}

// call calls echo with text and returns its text and whether it failed.
func (r *rig) call(t *testing.T, text string) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	res, err := r.sess.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		t.Errorf("call %q: %v", text, err)
		return "", true
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// flush waits until every record so far is committed.
func (r *rig) flush(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.g.AuditStore().Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// browser is an HTTP client with a cookie jar that sends the Origin a
// page of the dashboard would.
type browser struct {
	t      *testing.T
	base   string
	c      *http.Client
	origin string
	csrf   string
}

func (r *rig) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: r.srv.URL, origin: r.srv.URL, c: &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, path string, body io.Reader, hdr map[string]string) *http.Response {
	b.t.Helper()
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if b.origin != "" && method != "GET" {
		req.Header.Set("Origin", b.origin)
	}
	if b.csrf != "" && method == "GET" {
		req.Header.Set("X-CSRF-Token", b.csrf) // as the page sends it
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp
}

// login logs in with the form and takes the session's key from where
// the login sends the page (pageAfterLogin), as the page does.
func (b *browser) login(token string) *http.Response {
	b.t.Helper()
	resp := b.do("POST", "/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	resp.Body.Close()
	b.csrf = keyOf(resp)
	return resp
}

// keyOf is the session key in a login's redirect, or "".
func keyOf(resp *http.Response) string {
	u, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return ""
	}
	k, _ := strings.CutPrefix(u.Fragment, "key=")
	return k
}

func (b *browser) getJSON(path string, v any) int {
	b.t.Helper()
	resp := b.do("GET", path, nil, nil)
	defer resp.Body.Close()
	if resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			b.t.Fatalf("GET %s: %v", path, err)
		}
	}
	return resp.StatusCode
}

// post posts a JSON action with the CSRF token (csrf "" sends none).
func (b *browser) post(path, csrf string, v any) (int, string) {
	b.t.Helper()
	raw, _ := json.Marshal(v)
	hdr := map[string]string{"Content-Type": "application/json"}
	if csrf != "" {
		hdr["X-CSRF-Token"] = csrf
	}
	resp := b.do("POST", path, strings.NewReader(string(raw)), hdr)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// waitFor polls cond every 20 ms for up to 15 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// records are the committed records of event.
func (r *rig) records(t *testing.T, event string) []audit.Record {
	t.Helper()
	r.flush(t)
	recs, err := r.g.AuditStore().Query(context.Background(), audit.Filter{Event: event})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// trackedLauncher runs echoLauncher's server as a sandbox the guard
// tracks, as internal/launch does: its start, pause, resume and end are
// recorded, so the sandboxes page and its controls see it.
// rigPackage and rigPinned are what the rig's servers page says the
// echo server runs and what the lock pins of it (labels).
const (
	rigPackage = "npm:@example/echo@^1"
	rigPinned  = "npm:@example/echo@1.2.3"
)

// rigOutput is the host dir the rig's sandboxes say they write to.
const rigOutput = "/var/tmp/rig/workspaces/_local/echo/output"

func trackedLauncher(g *guard.Guard) func(context.Context, gateway.Scope) (*gateway.Process, error) {
	var n atomic.Int64
	return func(ctx context.Context, scope gateway.Scope) (*gateway.Process, error) {
		p, err := echoLauncher(ctx, scope)
		if err != nil {
			return nil, err
		}
		t := &track.Sandbox{ID: fmt.Sprintf("sbx_echo%d", n.Add(1)), Started: time.Now()}
		t.AddWritable(rigOutput, "/workspace/output") // a label: the echo server writes nothing
		done := g.SandboxStarted("echo", scope, t)
		stop := p.Stop
		p.Stop = func() {
			stop()
			t.SetExit("stopped") // as the local launcher says it (stoppedStatus)
			t.SetState(gateway.StateStopped)
			g.SandboxEnded("echo", scope, t, "exit status 0", true)
			done()
		}
		p.Pause = func() error {
			t.SetState(gateway.StatePaused)
			g.SandboxEvent(audit.EventSandboxPause, "echo", scope, t, "")
			return nil
		}
		p.Resume = func() error {
			t.SetState(gateway.StateRunning)
			g.SandboxEvent(audit.EventSandboxResume, "echo", scope, t, "")
			return nil
		}
		return p, nil
	}
}

// echoLauncher runs a go-sdk echo server in process.
func echoLauncher(context.Context, gateway.Scope) (*gateway.Process, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "returns text", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)}},
		func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
		})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		srv.Run(ctx, &mcp.IOTransport{Reader: inR, Writer: outW})
		outW.Close()
		close(done)
	}()
	return &gateway.Process{Stdin: inW, Stdout: outR, Stop: func() {
		cancel()
		inW.Close()
		outR.Close()
		<-done
	}}, nil
}

// TestLoginFormSlowBody: a login form's body, which anyone who reaches
// the listener may send, is read within loginReadWait, and a request the
// dashboard refuses (no Origin) is answered without reading its body:
// one sent slowly does not hold the connection.
func TestLoginFormSlowBody(t *testing.T) {
	defer func(d time.Duration) { loginReadWait = d }(loginReadWait)
	loginReadWait = 200 * time.Millisecond
	r := newRig(t)
	host := strings.TrimPrefix(r.srv.URL, "http://")
	for name, origin := range map[string]string{"login": "Origin: " + r.srv.URL + "\r\n", "refused": ""} {
		conn, err := net.DialTimeout("tcp", host, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// 6 of the 8000 bytes announced, and no more.
		req := "POST /ui/login HTTP/1.1\r\nHost: " + host + "\r\n" + origin +
			"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 8000\r\n\r\ntoken="
		if _, err := conn.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if got, err := io.ReadAll(conn); err != nil || !strings.HasPrefix(string(got), "HTTP/1.1 ") {
			t.Errorf("%s: the connection is still held after 5s: %v (read %q)", name, err, got)
		}
	}
}
