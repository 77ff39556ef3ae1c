package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestDashboardServe: `mcpbox serve --http 127.0.0.1:0` with the default
// config serves the dashboard and the metrics on its listener. `mcpbox
// ui --print-url`, run in the project, prints a one-time login URL; a
// browser-like client follows it once (a second time is refused), reads
// the pages' API and sees a call made through MCP in the calls list;
// /metrics needs the bearer token and counts that call; /healthz and
// /readyz need nothing. The bearer token does not log in: the dashboard
// has its own secret, which mcpbox ui makes.
func TestDashboardServe(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		p := newDefaultProject(t, m)
		env := "HOME=" + m.dir(t)
		args := defaultServeArgs(t, m, p.dir)[1:]
		for i, a := range args {
			if a == "--config" { // --config=FILE: keeps the token (noAuthArgs)
				args = append(args[:i:i], append([]string{"--config=" + args[i+1]}, args[i+2:]...)...)
				break
			}
		}
		maddr := dashFreeAddr(t)
		args = append(args, "--metrics-addr", maddr)
		g := gwServeIn(t, m, p.dir, args, env)
		base := strings.TrimSuffix(g.url, "/mcp")
		home := strings.TrimPrefix(env, "HOME=")
		files, _ := filepath.Glob(filepath.Join(home, ".local", "state", "mcpbox", "projects", "*", "token"))
		if len(files) != 1 {
			t.Fatalf("token files of the project: %v, want one", files)
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		token := strings.TrimSpace(string(b))

		// Health needs no credentials; the metrics need the token.
		dashStatus(t, nil, base+"/healthz", "", http.StatusOK)
		dashStatus(t, nil, base+"/readyz", "", http.StatusOK)
		dashStatus(t, nil, base+"/metrics", "", http.StatusUnauthorized)
		dashStatus(t, nil, base+"/metrics", token+"x", http.StatusUnauthorized)
		dashStatus(t, nil, base+"/ui/api/calls", "", http.StatusUnauthorized)
		// The bearer token does not open the dashboard's API: only a session.
		dashStatus(t, nil, base+"/ui/api/calls", token, http.StatusUnauthorized)
		// Nor does it log in: client configs hold it, and an agent that
		// reads its client's config must not approve its own calls.
		if role := dashFormLogin(t, base, token); role != "" {
			t.Errorf("the gateway's bearer token logs in to the dashboard as %q", role)
		}

		r := runIn(t, m, p.dir, "", []string{env}, "ui", "--print-url")
		login := strings.TrimSpace(r.stdout)
		if r.code != 0 || !strings.HasPrefix(login, base+"/ui/login?t=") || strings.Contains(login, token) {
			t.Fatalf("mcpbox ui --print-url (serving %s):\n%s", base, r)
		}
		// mcpbox ui made the dashboard's own secret: it logs in as admin.
		b, err = os.ReadFile(filepath.Join(filepath.Dir(files[0]), "dashboard-secret"))
		if err != nil {
			t.Fatalf("mcpbox ui made no dashboard secret: %v", err)
		}
		secret := strings.TrimSpace(string(b))
		if secret == token || dashFormLogin(t, base, secret) != "admin" {
			t.Errorf("the dashboard secret does not log in as admin, or is the gateway's token")
		}
		if role := dashFormLogin(t, base, token); role != "" {
			t.Errorf("with the dashboard secret made, the gateway's bearer token logs in as %q", role)
		}
		browser := dashBrowser()
		if final, _ := strings.CutSuffix(dashGet(t, browser, login, http.StatusOK), "#key="+dashKeyOf(browser)); !strings.HasSuffix(final, "/ui/") {
			t.Errorf("the login URL led to %s, want /ui/ (the token out of the address bar) and the session key in the fragment", final)
		}
		u, _ := url.Parse(base + "/ui/")
		if len(browser.Jar.Cookies(u)) == 0 {
			t.Fatal("no session cookie after the login URL")
		}
		// One use: a second browser following the same URL is refused.
		dashGet(t, dashBrowser(), login, http.StatusForbidden)

		var sess struct{ Role string }
		dashJSON(t, browser, base+"/ui/api/session", &sess)
		if sess.Role != "admin" || dashKeyOf(browser) == "" {
			t.Errorf("session %+v, key %q: want the admin role and a session key", sess, dashKeyOf(browser))
		}
		// The cookie alone (what another port of 127.0.0.1 gets from the
		// browser) reads nothing.
		dashGet(t, &http.Client{Jar: browser.Jar, Timeout: 30 * time.Second}, base+"/ui/api/approvals", http.StatusUnauthorized)
		var pending map[string]any
		dashJSON(t, browser, base+"/ui/api/approvals", &pending)

		// A call through MCP shows in the calls list and in the metrics.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		mc := gwConnect(t, ctx, g.url, &http.Client{Transport: gwBearer{token: token, base: gwHTTP.Transport}}, nil, gwLegacy)
		gwMustCall(t, mc, "read_file", map[string]any{"path": "input/hello.txt"}, p.hello)
		gwClose(t, mc)
		var calls struct {
			Records []struct {
				Seq            int64
				Tool, Decision string
			}
		}
		var fams map[string]*dto.MetricFamily
		n, counted := 0, 0.0
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			dashJSON(t, browser, base+"/ui/api/calls?tool=read_file", &calls)
			n = len(calls.Records)
			fams = dashScrape(t, base+"/metrics", token)
			counted = dashSum(fams, "mcpbox_calls_total", map[string]string{"tool": "read_file", "decision": "allow"})
			if (n == 1 && counted == 1) || time.Now().After(deadline) {
				break
			}
		}
		if n != 1 || calls.Records[0].Decision != "allow" {
			t.Errorf("the calls list has %d read_file records (%+v), want the one call, allowed", n, calls.Records)
		}
		if counted != float64(n) {
			t.Errorf("mcpbox_calls_total{tool=read_file,decision=allow} = %v, the audit has %d such calls", counted, n)
		}
		if fams["mcpbox_call_duration_seconds"] == nil {
			t.Error("no mcpbox_call_duration_seconds in the scrape")
		}
		// --metrics-addr: the same metrics without credentials, on loopback.
		if got := dashSum(dashScrape(t, "http://"+maddr+"/metrics", ""), "mcpbox_calls_total", map[string]string{"tool": "read_file"}); got != counted {
			t.Errorf("--metrics-addr counts %v read_file calls, the gateway listener %v", got, counted)
		}
		dashStatus(t, nil, "http://"+maddr+"/healthz", "", http.StatusOK)
		var rec struct{ Record map[string]any }
		if n > 0 {
			dashJSON(t, browser, base+"/ui/api/calls/"+strconv.FormatInt(calls.Records[0].Seq, 10), &rec)
			if rec.Record["tool"] != "read_file" || rec.Record["outcome"] != "ok" {
				t.Errorf("the call's full record: %v", rec)
			}
		}

		// Logout needs the session key and the page's Origin; then the
		// session is gone.
		req, _ := http.NewRequest("POST", base+"/ui/api/logout", nil)
		req.Header.Set("Origin", base)
		if resp, err := (&http.Client{Jar: browser.Jar, Timeout: 30 * time.Second}).Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("logout without the session key: %v %v, want 401", resp, err)
		} else {
			resp.Body.Close()
		}
		req, _ = http.NewRequest("POST", base+"/ui/api/logout", nil)
		req.Header.Set("Origin", base)
		if resp, err := browser.Do(req); err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("logout: %v %v, want 200", resp, err)
		} else {
			resp.Body.Close()
		}
		dashGet(t, browser, base+"/ui/api/calls", http.StatusUnauthorized)

		// A new dashboard secret (the file deleted, mcpbox ui makes
		// another) ends the sessions begun with the old one, and the old
		// one no longer logs in.
		browser3 := dashBrowser()
		dashGet(t, browser3, strings.TrimSpace(runIn(t, m, p.dir, "", []string{env}, "ui", "--print-url").stdout), http.StatusOK)
		dashJSON(t, browser3, base+"/ui/api/session", &sess)
		secretFile := filepath.Join(filepath.Dir(files[0]), "dashboard-secret")
		if err := os.Remove(secretFile); err != nil {
			t.Fatal(err)
		}
		if r := runIn(t, m, p.dir, "", []string{env}, "ui", "--print-url"); r.code != 0 {
			t.Fatalf("mcpbox ui after the secret was deleted:\n%s", r)
		}
		if b, err := os.ReadFile(secretFile); err != nil || strings.TrimSpace(string(b)) == secret {
			t.Fatalf("mcpbox ui made no new dashboard secret (%v)", err)
		}
		dashGet(t, browser3, base+"/ui/api/session", http.StatusUnauthorized)
		if role := dashFormLogin(t, base, secret); role != "" {
			t.Errorf("the replaced dashboard secret still logs in as %q", role)
		}

		// ui --rotate does the same in one step, and its URL logs in.
		b, err = os.ReadFile(secretFile)
		if err != nil {
			t.Fatal(err)
		}
		second := strings.TrimSpace(string(b))
		browser4 := dashBrowser()
		dashGet(t, browser4, strings.TrimSpace(runIn(t, m, p.dir, "", []string{env}, "ui", "--print-url").stdout), http.StatusOK)
		dashJSON(t, browser4, base+"/ui/api/session", &sess)
		r = runIn(t, m, p.dir, "", []string{env}, "ui", "--rotate", "--print-url")
		if b, err := os.ReadFile(secretFile); r.code != 0 || err != nil || strings.TrimSpace(string(b)) == second {
			t.Fatalf("mcpbox ui --rotate made no new dashboard secret (%v):\n%s", err, r)
		}
		dashGet(t, browser4, base+"/ui/api/session", http.StatusUnauthorized)
		if role := dashFormLogin(t, base, second); role != "" {
			t.Errorf("the rotated dashboard secret still logs in as %q", role)
		}
		dashGet(t, browser4, strings.TrimSpace(r.stdout), http.StatusOK)
		dashJSON(t, browser4, base+"/ui/api/session", &sess)
	})
}

// dashFormLogin logs in to the dashboard at base with token typed into
// the login form and returns the session's role, "" when refused.
func dashFormLogin(t *testing.T, base, token string) string {
	t.Helper()
	hc := dashBrowser()
	req, _ := http.NewRequest("POST", base+"/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if u := resp.Request.URL; !strings.HasSuffix(u.Scheme+"://"+u.Host+u.Path, "/ui/") {
		return ""
	}
	var s struct{ Role string }
	dashJSON(t, hc, base+"/ui/api/session", &s)
	return s.Role
}

// dashBrowser is an HTTP client that acts as the dashboard's page: its
// jar keeps the session cookie, and the session key a login sends the
// page in its URL's fragment (#key=...) it sends with every API request,
// as the page does from its storage.
func dashBrowser() *http.Client {
	jar, _ := cookiejar.New(nil)
	k := &dashKeyTransport{base: http.DefaultTransport}
	return &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: k,
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			if key, ok := strings.CutPrefix(req.URL.Fragment, "key="); ok {
				k.key.Store(key)
			}
			return nil
		}}
}

// dashKeyOf is the session key dashBrowser hc holds, or "".
func dashKeyOf(hc *http.Client) string {
	k, _ := hc.Transport.(*dashKeyTransport).key.Load().(string)
	return k
}

type dashKeyTransport struct {
	base http.RoundTripper
	key  atomic.Value // string
}

func (k *dashKeyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if key, _ := k.key.Load().(string); key != "" && strings.Contains(r.URL.Path, "/ui/api/") && r.Header.Get("X-CSRF-Token") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("X-CSRF-Token", key)
	}
	return k.base.RoundTrip(r)
}

// dashStatus GETs u with token ("": none) and checks the status.
func dashStatus(t *testing.T, hc *http.Client, u, token string, want int) {
	t.Helper()
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	req, _ := http.NewRequest("GET", u, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Errorf("GET %s (token %v): %d, want %d", u, token != "", resp.StatusCode, want)
	}
}

// dashGet GETs u with hc, checks the final status and returns the final URL.
func dashGet(t *testing.T, hc *http.Client, u string, want int) string {
	t.Helper()
	resp, err := hc.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != want {
		t.Errorf("GET %s: %d, want %d", u, resp.StatusCode, want)
	}
	return resp.Request.URL.String()
}

// dashJSON GETs u with hc's session and decodes the JSON answer.
func dashJSON(t *testing.T, hc *http.Client, u string, v any) {
	t.Helper()
	resp, err := hc.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, v) != nil {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
}

// dashScrape GETs /metrics with the token and parses it.
func dashScrape(t *testing.T, u, token string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s (token %v): %d", u, token != "", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// dashSum adds the counter samples of name whose labels include labels.
func dashSum(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	var total float64
	f := fams[name]
	if f == nil {
		return 0
	}
next:
	for _, mt := range f.Metric {
		have := map[string]string{}
		for _, lp := range mt.Label {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		total += mt.GetCounter().GetValue()
	}
	return total
}

// dashFreeAddr is a loopback address with a port free a moment ago.
func dashFreeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestDashboardStdioOnDemand: `mcpbox ui --print-url` for a stdio-only
// serve has it start the dashboard on a loopback listener, whose login
// URL works once, whose /metrics needs the state dir's dashboard secret,
// and which ends with serve. --metrics-addr beyond loopback is refused.
func TestDashboardStdioOnDemand(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		p := newDefaultProject(t, m)
		env := "HOME=" + m.dir(t)
		bad := runIn(t, m, p.dir, "", []string{env}, defaultServeArgs(t, m, p.dir, "--stdio", "--metrics-addr", "0.0.0.0:9")...)
		if bad.code != 2 || !strings.Contains(bad.stderr, "only a loopback address") {
			t.Errorf("serve --metrics-addr 0.0.0.0:9:\n%s", bad)
		}

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cmd := m.command(ctx, defaultServeArgs(t, m, p.dir, "--stdio")...)
		cmd.Dir = p.dir
		cmd.Env = append(cmd.Env, env)
		logs := newGWLog()
		cmd.Stderr = logs
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		defer func() {
			stdin.Close()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("stdio serve after its stdin closed: %v\n%s", err, logs)
				}
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Errorf("stdio serve did not stop within 30 s of its stdin closing\n%s", logs)
			}
		}()

		var r result
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			r = runIn(t, m, p.dir, "", []string{env}, "ui", "--print-url")
			if r.code == 0 || time.Now().After(deadline) {
				break
			}
		}
		login := strings.TrimSpace(r.stdout)
		base, _, ok := strings.Cut(login, "/ui/login?t=")
		if r.code != 0 || !ok || !strings.HasPrefix(base, "http://127.0.0.1:") {
			t.Fatalf("mcpbox ui --print-url for a stdio serve:\n%s\nserve:\n%s", r, logs)
		}
		browser := dashBrowser()
		dashGet(t, browser, login, http.StatusOK)
		var sess struct{ Role string }
		dashJSON(t, browser, base+"/ui/api/session", &sess)
		if sess.Role != "admin" {
			t.Errorf("session %+v, want admin", sess)
		}
		var servers map[string]any
		dashJSON(t, browser, base+"/ui/api/servers", &servers)
		dashGet(t, &http.Client{Timeout: 30 * time.Second}, login, http.StatusForbidden)

		// A second ui answers the same listener.
		r2 := runIn(t, m, p.dir, "", []string{env}, "ui", "--print-url")
		if b2, _, _ := strings.Cut(strings.TrimSpace(r2.stdout), "/ui/login?t="); r2.code != 0 || b2 != base {
			t.Errorf("second mcpbox ui --print-url (first on %s):\n%s", base, r2)
		}
		files, _ := filepath.Glob(filepath.Join(strings.TrimPrefix(env, "HOME="), ".local", "state", "mcpbox", "projects", "*", "dashboard-secret"))
		if len(files) != 1 {
			t.Fatalf("dashboard secret files: %v, want one", files)
		}
		b, _ := os.ReadFile(files[0])
		secret := strings.TrimSpace(string(b))
		dashStatus(t, nil, base+"/metrics", "", http.StatusUnauthorized)
		dashScrape(t, base+"/metrics", secret)
		dashStatus(t, nil, base+"/healthz", "", http.StatusOK)
		dashStatus(t, nil, base+"/mcp", secret, http.StatusNotFound)
	})
}

// TestDashboardClientRoles: with clients, a client's token logs in to the
// dashboard with its role (clients[].role) and one without a role not at
// all, though it reads /metrics like /mcp; `mcpbox ui` makes the state
// dir's dashboard secret for the admin login (and no token file), and
// that secret does not open /mcp.
func TestDashboardClientRoles(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		cfg := gwConfigWith(t, m, gwConfigOpts{servers: []string{"solo"},
			clients: map[string]string{"boss": "BOSS_TOKEN", "watcher": "WATCH_TOKEN", "agent": "AGENT_TOKEN"}})
		var c map[string]any
		b, err := os.ReadFile(cfg)
		if err != nil || json.Unmarshal(b, &c) != nil {
			t.Fatalf("reading %s: %v", cfg, err)
		}
		for _, cl := range c["clients"].([]any) {
			cl := cl.(map[string]any)
			switch cl["name"] {
			case "boss":
				cl["role"] = "admin"
			case "watcher":
				cl["role"] = "viewer"
			}
		}
		b, _ = json.Marshal(c)
		if err := os.WriteFile(cfg, b, 0o644); err != nil {
			t.Fatal(err)
		}
		toks := map[string]string{"boss": "boss-token-0123456789", "watcher": "watch-token-0123456789", "agent": "agent-token-0123456789"}
		g := gwServeIn(t, m, "", []string{"--config", cfg},
			"BOSS_TOKEN="+toks["boss"], "WATCH_TOKEN="+toks["watcher"], "AGENT_TOKEN="+toks["agent"])
		base := strings.TrimSuffix(g.url, "/mcp")
		stateDir := filepath.Join(filepath.Dir(cfg), "state")
		if _, err := os.Lstat(filepath.Join(stateDir, "token")); err == nil {
			t.Errorf("serve with clients made a token file")
		}
		for name, want := range map[string]string{"boss": "admin", "watcher": "viewer", "agent": ""} {
			if got := dashFormLogin(t, base, toks[name]); got != want {
				t.Errorf("client %s logs in to the dashboard as %q, want %q", name, got, want)
			}
			dashStatus(t, nil, base+"/metrics", toks[name], http.StatusOK)
		}
		if got := dashFormLogin(t, base, "wrong-token-0123456789"); got != "" {
			t.Errorf("an unknown token logs in as %q", got)
		}
		dashStatus(t, nil, base+"/metrics", "", http.StatusUnauthorized)

		r := runIn(t, m, "", "", nil, "ui", "--print-url", "--config", cfg)
		login := strings.TrimSpace(r.stdout)
		if r.code != 0 || !strings.HasPrefix(login, base+"/ui/login?t=") {
			t.Fatalf("mcpbox ui --print-url --config:\n%s", r)
		}
		browser := dashBrowser()
		dashGet(t, browser, login, http.StatusOK)
		var s struct{ Role string }
		dashJSON(t, browser, base+"/ui/api/session", &s)
		if s.Role != "admin" {
			t.Errorf("the login URL's session: role %q, want admin", s.Role)
		}
		if _, err := os.Lstat(filepath.Join(stateDir, "token")); err == nil {
			t.Errorf("mcpbox ui made a token file")
		}
		b, err = os.ReadFile(filepath.Join(stateDir, "dashboard-secret"))
		if err != nil {
			t.Fatalf("mcpbox ui made no dashboard secret: %v", err)
		}
		local := strings.TrimSpace(string(b))
		tokenStatus(t, g.url, local, http.StatusUnauthorized)
		dashStatus(t, nil, base+"/metrics", local, http.StatusUnauthorized)
		if got := dashFormLogin(t, base, local); got != "admin" {
			t.Errorf("the dashboard secret logs in as %q, want admin", got)
		}
	})
}

// TestDashboardOtherInstanceApprovals: a call held for approval at a
// stdio serve shows on the dashboard of an HTTP serve of the same config,
// which names where it waits, and deciding it there releases the call at
// the other; the record names the dashboard's user. Before, that
// dashboard showed nothing pending, and the call was denied after 50 s.
func TestDashboardOtherInstanceApprovals(t *testing.T) {
	m := mode{name: "root", uid: -1}
	s := auConfig(t, m, "", auApproveBox)
	g := s.serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stdio, pid := instStdio(t, ctx, m, s.dir, []string{auTokenEnv + "=" + s.token}, "--config", s.cfg)
	call := callAsync(stdio, "whoami", nil)

	base := strings.TrimSuffix(g.url, "/mcp")
	// Without --instance, ui lists both, each with its config (two
	// configs may share a project and its state dir).
	r := s.cli(t, "ui", "--print-url", "--config", s.cfg)
	if r.code == 0 || !strings.Contains(r.stderr, "CONFIG") || strings.Count(r.stderr, s.cfg) < 2 {
		t.Errorf("mcpbox ui with two instances: want both listed with their config\n%s", r)
	}
	r = s.cli(t, "ui", "--print-url", "--instance", strconv.Itoa(g.cmd.Process.Pid), "--config", s.cfg)
	login := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(login, base+"/ui/login?t=") {
		t.Fatalf("mcpbox ui --print-url --instance %d: %s", g.cmd.Process.Pid, r)
	}
	browser := dashBrowser()
	dashGet(t, browser, login, http.StatusOK)
	type pending struct{ ID, Tool, Where string }
	var held pending
	for deadline := time.Now().Add(30 * time.Second); held.ID == ""; time.Sleep(200 * time.Millisecond) {
		var d struct{ Pending []pending }
		dashJSON(t, browser, base+"/ui/api/approvals", &d)
		for _, p := range d.Pending {
			if p.Tool == "whoami" {
				held = p
			}
		}
		if held.ID == "" && time.Now().After(deadline) {
			t.Fatalf("the HTTP serve's dashboard lists no whoami call waiting at the stdio serve (pid %d) within 30 s: %+v", pid, d)
		}
	}
	if want := fmt.Sprintf("(pid %d)", pid); !strings.HasSuffix(held.Where, want) {
		t.Errorf("the request's where: %q, want it to end in %q", held.Where, want)
	}
	req, _ := http.NewRequest("POST", base+"/ui/api/approvals/"+held.ID, strings.NewReader(`{"decision":"allow","scope":"once"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", base)
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("allowing %s on the dashboard: %s %s", held.ID, resp.Status, body)
	}
	wantOK(t, await(t, call), auServer)
	// The listing read after the decision no longer has it.
	var after struct{ Pending []pending }
	if dashJSON(t, browser, base+"/ui/api/approvals", &after); slices.ContainsFunc(after.Pending, func(p pending) bool { return p.ID == held.ID }) {
		t.Errorf("the decided request %s is still listed: %+v", held.ID, after.Pending)
	}
	recs := s.calls(t, "whoami")
	if len(recs) != 1 || recs[0].str("decision") != "approved" || !strings.Contains(recs[0].str("approver"), " for web") {
		t.Errorf("the call's records %v, want one approved for the dashboard's user", recs)
	}
}
