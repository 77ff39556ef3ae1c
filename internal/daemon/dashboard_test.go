package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/admin"
	"mcpbox/internal/bearer"
	"mcpbox/internal/dashboard"
	"mcpbox/internal/gateway"
	"mcpbox/internal/instance"
)

// TestDashboardRoles: the state dir's dashboard secret logs in as an
// admin (the rotated one from the rotation on, the old one no more), its
// token (which client configs hold) not at all; a client's
// token with its role; a client without a role, an unknown or empty
// token not at all.
func TestDashboardRoles(t *testing.T) {
	dir := t.TempDir()
	c := loadTestConfig(t, `
version: 1
clients:
  - {name: boss, token: {from: env:T1}, role: admin}
  - {name: watcher, token: {from: env:T2}, role: viewer}
  - {name: agent, token: {from: env:T3}}
servers:
  s: {command: [x]}
`)
	d := &daemon{c: c, dir: dir, hopts: gateway.HTTPOptions{Clients: []gateway.Client{
		{Name: "boss", Token: []byte("boss-token-0123456789")},
		{Name: "watcher", Token: []byte("watcher-token-0123456789")},
		{Name: "agent", Token: []byte("agent-token-0123456789")},
	}}}
	var learned []string // what the redaction book would learn
	secret := &secretFile{dir: dir, file: bearer.Dashboard, learn: func(tok string) { learned = append(learned, tok) }}
	auth := d.dashboardRoles(secret)
	if _, _, ok := auth(""); ok {
		t.Error("an empty token logs in while there is no dashboard secret")
	}
	if secret.token() != "" {
		t.Error("the dashboard made its secret file")
	}
	local, err := bearer.Dashboard.Load(dir) // as mcpbox ui does
	if err != nil {
		t.Fatal(err)
	}
	// The gateway's token is in client configs: an agent reading its
	// client's config must not log in and approve its own calls.
	mcpToken, err := bearer.Token.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ token, role, who string }{
		{local, dashboard.RoleAdmin, ""},
		{mcpToken, "", ""},
		{"boss-token-0123456789", dashboard.RoleAdmin, "boss"},
		{"watcher-token-0123456789", dashboard.RoleViewer, "watcher"},
		{"agent-token-0123456789", "", ""},
		{"", "", ""},
		{"wrong-token-0123456789", "", ""},
	} {
		role, who, ok := auth(c.token)
		if role != c.role || who != c.who || ok != (c.role != "") {
			t.Errorf("token %q: role %q of %q %v, want %q of %q", c.token, role, who, ok, c.role, c.who)
		}
	}
	rotated, err := bearer.Dashboard.Rotate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := auth(local); ok {
		t.Error("the rotated-away dashboard secret still logs in")
	}
	if role, _, _ := auth(rotated); role != dashboard.RoleAdmin {
		t.Errorf("the rotated dashboard secret: role %q, want admin", role)
	}
	if !slices.Equal(learned, []string{local, rotated}) {
		t.Errorf("the book learned %d secrets, want the first and the rotated one, once each", len(learned))
	}
}

func TestMetricsAddrLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:9090": true, "[::1]:0": true, "localhost:9090": true,
		"0.0.0.0:9090": false, "10.1.2.3:9090": false, ":9090": false, "example.com:9090": false,
	} {
		if err := checkMetricsAddr(addr); (err == nil) != ok {
			t.Errorf("--metrics-addr %s: %v, want ok %v", addr, err, ok)
		}
	}
}

// TestMetricsListenerRefusesOtherHosts: the credential-less listener
// answers loopback names only (a DNS-rebound page names its own host).
func TestMetricsListenerRefusesOtherHosts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "mcpbox_calls_total 1\n") })
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m)
	mux.Handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	stop := serveLoopback(ln, mux)
	defer stop()
	get := func(host, path string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+path, nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, c := range []struct {
		host, path string
		want       int
	}{
		{ln.Addr().String(), "/metrics", 200},
		{"localhost:" + port, "/metrics", 200},
		{"localhost", "/healthz", 200},
		{"evil.example:" + port, "/metrics", 403},
		{"evil.example", "/healthz", 403},
		{ln.Addr().String(), "/mcp", 404},
	} {
		if got := get(c.host, c.path); got != c.want {
			t.Errorf("Host %s %s: %d, want %d", c.host, c.path, got, c.want)
		}
	}
}

// TestUILoginURL: the URL of a listening instance logs in with the state
// dir's dashboard secret (not its token); a stdio-only instance is asked to start its dashboard's
// listener; with none running, or HTTP not up yet, the error says what
// to do.
func TestUILoginURL(t *testing.T) {
	tmp := shortTemp(t)
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "xdg"))
	state := filepath.Join(tmp, "s")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := UILoginURL(state, 0, false); err == nil || !strings.Contains(err.Error(), "no mcpbox serve is running") {
		t.Fatalf("no instance: %v", err)
	}
	// --rotate replaces the dashboard secret even when no serve runs, so
	// that the next one does not take login URLs made with the old one.
	before, err := bearer.Dashboard.Load(state)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := UILoginURL(state, 0, true); err == nil || !strings.Contains(err.Error(), "no mcpbox serve is running") || !strings.Contains(err.Error(), "secret is replaced") {
		t.Fatalf("--rotate, no instance: %v", err)
	}
	if after, err := bearer.Dashboard.Read(state); err != nil || after == before {
		t.Fatalf("--rotate with no serve left the secret as it was (%v)", err)
	}
	mcpToken, err := bearer.Token.Load(state)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inst, err := admin.Start(ctx, admin.NewRecord(state, "", tmp, true, ""), admin.InstanceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	inst.Attach(nopBackend{})
	inst.SetUI(func() (string, error) { return "http://127.0.0.1:4567", nil })
	check := func(u, host string) {
		t.Helper()
		p, err := url.Parse(u)
		if err != nil || p.Host != host || p.Path != "/ui/login" || p.Query().Get("t") == "" {
			t.Fatalf("login URL %q (%v), want one on %s", u, err, host)
		}
		// Signed with the state dir's dashboard secret (made by the
		// first UILoginURL): a dashboard with that login secret takes it,
		// one with another (the gateway's token) does not.
		tok, err := bearer.Dashboard.Read(state)
		if err != nil {
			t.Fatalf("no dashboard secret after UILoginURL: %v", err)
		}
		for secret, want := range map[string]int{tok: http.StatusSeeOther, mcpToken: http.StatusForbidden, bearer.New(): http.StatusForbidden} {
			h, err := dashboard.New(dashboard.Options{Backend: nopBackend{}, Audit: nopAudit{},
				Authenticate: func(string) (string, string, bool) { return "", "", false }, LoginSecret: func() string { return secret }})
			if err != nil {
				t.Fatal(err)
			}
			rr := httptest.NewRecorder()
			h.ServeHTTP(rr, httptest.NewRequest("GET", "http://"+host+p.RequestURI(), nil))
			if rr.Code != want {
				t.Errorf("secret %s…: login answered %d, want %d", secret[:10], rr.Code, want)
			}
		}
	}
	u, err := UILoginURL(state, 0, false)
	if err != nil {
		t.Fatalf("stdio-only instance: %v", err)
	}
	check(u, "127.0.0.1:4567")
	// With a serve: a new secret signs the new URL (check reads the file).
	before, _ = bearer.Dashboard.Read(state)
	if u, err = UILoginURL(state, 0, true); err != nil {
		t.Fatalf("--rotate: %v", err)
	}
	if after, _ := bearer.Dashboard.Read(state); after == before {
		t.Fatal("--rotate left the secret as it was")
	}
	check(u, "127.0.0.1:4567")
	inst.Update(func(r *instance.Record) { r.Transport = "stdio+http" })
	if _, err := UILoginURL(state, 0, false); err == nil || !strings.Contains(err.Error(), "not listening on HTTP yet") {
		t.Fatalf("an instance whose HTTP is not up yet: %v", err)
	}
	inst.Update(func(r *instance.Record) { r.URL = "http://0.0.0.0:4321/mcp" })
	if u, err = UILoginURL(state, 0, false); err != nil {
		t.Fatal(err)
	}
	check(u, "127.0.0.1:4321")

	// A second instance on the state dir (another serve over HTTP): ui
	// does not guess, it lists both and --instance picks one.
	const other = 4194305 // above pid_max: no real process's
	srv, err := admin.Serve(ctx, instance.SocketPath(state, other), admin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := instance.Write(instance.Record{PID: other, Started: time.Now(), StateDir: state, Project: tmp,
		Transport: "http", URL: "http://127.0.0.1:5555/mcp"}); err != nil {
		t.Fatal(err)
	}
	_, err = UILoginURL(state, 0, false)
	for _, want := range []string{"--instance PID", strconv.Itoa(os.Getpid()), strconv.Itoa(other), "http://127.0.0.1:5555/mcp"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("two instances, none chosen: %v, want an error listing them (%q)", err, want)
		}
	}
	if u, err = UILoginURL(state, other, false); err != nil {
		t.Fatal(err)
	}
	check(u, "127.0.0.1:5555")
	if u, err = UILoginURL(state, os.Getpid(), false); err != nil {
		t.Fatal(err)
	}
	check(u, "127.0.0.1:4321")
	if _, err = UILoginURL(state, other+1, false); err == nil || !strings.Contains(err.Error(), "no mcpbox serve with pid") {
		t.Fatalf("an instance that does not run: %v", err)
	}
}

// nopBackend and nopAudit fill the dashboard's required options; the
// login never reaches them.
type nopBackend struct{ admin.Backend }
type nopAudit struct{ dashboard.AuditReader }
