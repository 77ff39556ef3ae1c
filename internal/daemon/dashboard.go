package daemon

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"mcpbox/internal/admin"
	"mcpbox/internal/bearer"
	"mcpbox/internal/config"
	"mcpbox/internal/dashboard"
	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
	"mcpbox/internal/instance"
	"mcpbox/internal/integrity"
	"mcpbox/internal/metrics"
	"mcpbox/internal/redact"
	"mcpbox/internal/tcppeer"
)

// This file wires the dashboard and the metrics (packages dashboard and
// metrics) into serve: /ui/, /metrics (behind the endpoint's bearer
// check), /healthz and /readyz on the HTTP listener, --metrics-addr, and
// the one-time login URL of `mcpbox ui`.

// web is the dashboard's and the metrics' state of one serve.
type web struct {
	ev      *dashboard.Events
	m       *metrics.Metrics
	backend admin.Backend // set by attach, before anything is served
	cancel  context.CancelFunc
	done    chan struct{}

	mu      sync.Mutex
	closers []func() // guarded by mu: the listeners' stops
	closed  bool     // guarded by mu: closeListeners ran
	uiURL   string   // guarded by mu: the on-demand listener's base URL
}

// startWeb follows the audit trail from its current head into the
// dashboard's events and the metrics. It runs after the guard opens and
// before the gateway exists, so that no call's record is missed; stop
// ends it, before the guard closes.
func (d *daemon) startWeb(ctx context.Context, g *guard.Guard) (*web, error) {
	head, err := g.AuditStore().Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the audit head: %w", err)
	}
	w := &web{ev: dashboard.NewEvents(), done: make(chan struct{})}
	var names []string
	for _, s := range d.c.Servers {
		names = append(names, s.Name)
	}
	w.m = metrics.New(metrics.Options{Servers: names, KnownTool: g.KnownTool, Gauges: w.gauges,
		Redactions: func() float64 { return float64(d.book.Redactions()) }})
	fctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	go func() {
		defer close(w.done)
		if err := dashboard.FollowAudit(fctx, g.AuditStore(), head, w.ev, w.m.Observe); err != nil && fctx.Err() == nil {
			d.log.Warn("following the audit trail for the dashboard and metrics stopped", "err", err)
		}
	}()
	return w, nil
}

// stop ends the audit follower.
func (w *web) stop() {
	w.cancel()
	<-w.done
}

// closeListeners stops the --metrics-addr and on-demand dashboard
// listeners (before the gateway closes: their handlers use it); none
// starts after.
func (w *web) closeListeners() {
	w.mu.Lock()
	closers := w.closers
	w.closers, w.closed = nil, true
	w.mu.Unlock()
	for _, c := range closers {
		c()
	}
}

// gauges are the metrics' live values: pending approvals, sandboxes.
func (w *web) gauges() metrics.Gauges {
	var out metrics.Gauges
	if w.backend == nil {
		return out
	}
	reqs, _ := w.backend.Approvals()
	for _, r := range reqs {
		out.Pending = append(out.Pending, r.Time)
	}
	for _, s := range w.backend.Sandboxes() {
		if s.Remote != "" { // a connection, not a sandbox
			continue
		}
		out.Sandboxes = append(out.Sandboxes, metrics.Sandbox{Server: s.Server, State: s.State, Memory: s.Memory, Pids: s.Pids})
	}
	return out
}

// attach mounts the dashboard, /metrics, /healthz and /readyz on the
// HTTP listener's options (when serve listens) once the gateway exists,
// serves --metrics-addr, and lets a stdio-only serve start the
// dashboard on demand (the admin socket's ui op). closeListeners stops
// what it started.
func (d *daemon) attach(w *web, g *guard.Guard, gw *gateway.Gateway, inst *admin.Instance) error {
	w.backend = g.WebAdmin(gw)
	ready := metrics.Readyz(func() error { return g.AuditStore().Err() })
	if d.o.MetricsAddr != "" {
		ln, err := net.Listen("tcp", d.o.MetricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr: listening on %s: %w", d.o.MetricsAddr, admin.ExplainAddrInUse(d.o.MetricsAddr, err))
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", w.m.Handler())
		mux.Handle("GET /healthz", metrics.Healthz())
		mux.Handle("GET /readyz", ready)
		stop := serveLoopback(ln, mux)
		w.mu.Lock()
		w.closers = append(w.closers, stop)
		w.mu.Unlock()
	}
	if d.addr == "" {
		if inst != nil {
			inst.SetUI(func() (string, error) { return d.uiOnDemand(w, g, ready) })
		}
		return nil
	}
	ui, err := d.newUI(w, g, listenHosts(d.addr), d.cert != "")
	if err != nil {
		return err
	}
	if d.hopts.Extra == nil {
		d.hopts.Extra = map[string]http.Handler{}
	}
	d.hopts.Extra["/ui/"] = ui
	d.hopts.Extra["/healthz"] = metrics.Healthz()
	d.hopts.Extra["/readyz"] = ready
	d.hopts.Authed = map[string]http.Handler{"/metrics": w.m.Handler()}
	return nil
}

// newUI is the dashboard handler of this serve.
func (d *daemon) newUI(w *web, g *guard.Guard, hosts []string, secure bool) (*dashboard.Handler, error) {
	// The secret is never sent anywhere; should a log or an answer ever
	// carry it, it is redacted there like the bearer token.
	secret := &secretFile{dir: d.dir, file: bearer.Dashboard, learn: func(tok string) {
		if d.book != nil {
			d.book.Add("dashboard_secret", []byte(tok))
		}
	}}
	return dashboard.New(dashboard.Options{
		Backend: w.backend, Audit: g.AuditStore(), Events: w.ev, ToolInfo: g.ToolInfo, Pinned: g.Pinned,
		Authenticate: d.dashboardRoles(secret),
		LoginSecret:  secret.token,
		LinkPeer:     tcppeer.SameUser,
		Hosts:        hosts,
		Secure:       secure,
		Logger:       d.log,
		Servers:      func() []dashboard.Server { return dashboardServers(d.c, d.setups.Down(), d.lock) },
	})
}

// uiOnDemand starts, once, the dashboard of a serve without an HTTP
// listener on 127.0.0.1 (a free port): /ui/, /metrics behind the state
// dir's dashboard secret (a serve without HTTP has no token file),
// /healthz and /readyz; it returns the base URL.
func (d *daemon) uiOnDemand(w *web, g *guard.Guard, ready http.Handler) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closed:
		return "", errors.New("the gateway is shutting down")
	case w.uiURL != "":
		return w.uiURL, nil
	}
	ui, err := d.newUI(w, g, nil, false)
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", ui)
	mux.Handle("GET /metrics", requireToken(&secretFile{dir: d.dir, file: bearer.Dashboard}, w.m.Handler()))
	mux.Handle("GET /healthz", metrics.Healthz())
	mux.Handle("GET /readyz", ready)
	w.closers = append(w.closers, serveLoopback(ln, mux))
	w.uiURL = "http://" + ln.Addr().String()
	g.SetDashboard(w.uiURL + "/ui/")
	d.log.Info("dashboard listening (mcpbox ui)", "url", w.uiURL+"/ui/")
	return w.uiURL, nil
}

// secretFile follows a secret file of the state dir (the token, or the
// dashboard's login secret) without making it: a serve with clients,
// with --no-auth or without HTTP may have no token file, and the
// dashboard secret is made by `mcpbox ui` (UILoginURL).
type secretFile struct {
	dir  string
	file bearer.File
	// learn, if non-nil, is told each new token (the redaction book
	// learns it), under mu.
	learn func(token string)

	mu   sync.Mutex
	w    *bearer.Watch // guarded by mu; nil until the file exists
	last string        // the token learn was last told; guarded by mu
}

// token is the file's token as it is now (rotation applies); "" while
// there is no usable file.
func (l *secretFile) token() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		if _, err := l.file.Read(l.dir); err != nil {
			return ""
		}
		w, err := l.file.Watch(l.dir)
		if err != nil {
			return ""
		}
		l.w = w
	}
	tok, _, _ := l.w.Refresh()
	if l.learn != nil && tok != l.last {
		l.learn(tok)
		l.last = tok
	}
	return tok
}

// requireToken lets through requests bearing the secret as it is now
// (rotation applies); others get 401.
func requireToken(secret *secretFile, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := secret.token()
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || tok == "" || subtle.ConstantTimeCompare([]byte(got), []byte(tok)) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// dashboardRoles is the dashboard's login check: the state dir's
// dashboard secret (the local user's, as it is now: rotation applies) is
// an admin; a client's token has the client's role (clients[].role), none
// without. The state dir's token is not one of them: client configs hold
// it, and so may the agents they run.
func (d *daemon) dashboardRoles(secret *secretFile) func(string) (string, string, bool) {
	type cand struct{ token, role, who string }
	var clients []cand
	for _, cl := range d.hopts.Clients {
		for _, c := range d.c.Clients {
			if c.Name == cl.Name && c.Role != "" {
				clients = append(clients, cand{string(cl.Token), c.Role, c.Name})
			}
		}
	}
	return func(token string) (string, string, bool) {
		local := secret.token()
		role, who := "", ""
		for _, c := range append([]cand{{local, dashboard.RoleAdmin, ""}}, clients...) {
			if subtle.ConstantTimeCompare([]byte(token), []byte(c.token)) == 1 && c.token != "" {
				role, who = c.role, c.who
			}
		}
		return role, who, role != ""
	}
}

// maskedArgv is a server's command as the dashboard shows it, to viewers
// too: credential-shaped strings masked (literalSecretWarnings), as in
// the audit's argv. Configured secrets are redacted by value on the way
// out, as in every answer.
func maskedArgv(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = redact.MaskShaped(a)
	}
	return out
}

// displayURL is a remote server's URL as the dashboard shows it: without
// user info and query, either of which may hold a credential, and with
// credential-shaped strings in the rest (a key in the path) masked.
func displayURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	query := u.RawQuery != ""
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	// A key in the path (https://host/s/KEY/mcp), as serve redacts it
	// everywhere else (learnURLKeys), and any credential-shaped string.
	keys := &redact.Book{}
	_ = addURLKeys(keys, "url", raw) // a key it cannot hold is a config's, which serve refused
	shown := redact.MaskShaped(keys.String(u.String()))
	if query {
		shown += "?…"
	}
	return shown
}

// listenHosts are the names besides loopback the dashboard answers to:
// the listen address's host when it is a specific one.
func listenHosts(addr string) []string {
	host, _, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	if err != nil || host == "" || loopbackAddr(addr) || (ip != nil && ip.IsUnspecified()) {
		return nil
	}
	return []string{host}
}

// dashboardServers are the servers page's rows, from the config, with
// the servers serve could not set up (down) marked unavailable and what
// the lock file at lockPath pins of packages and images.
func dashboardServers(c *config.Config, down map[string]string, lockPath string) []dashboard.Server {
	var out []dashboard.Server
	lock, err := integrity.ReadLock(lockPath)
	if err != nil || lockPath == "" {
		lock = &integrity.Lock{} // the page shows the config without pins
	}
	// A pin counts only for what the config names now, as serve reads it.
	sources := map[string]string{}
	if pss, err := PackageServers(c); err == nil {
		for _, ps := range pss {
			sources[ps.Server.Name] = ps.Source.String()
		}
	}
	for _, s := range c.Servers {
		row := dashboard.Server{Name: s.Name, Placement: s.Placement, Transport: "stdio", Package: cmp.Or(s.Image.Ref, s.Package)}
		if p, ok := lock.Images[s.Name]; ok && s.Image.Ref != "" && p.Ref == s.Image.Ref && p.Platform == platformOf(s) {
			row.Pinned = p.Digest
		} else if p, ok := lock.Packages[s.Name]; ok && sources[s.Name] != "" && p.Source == sources[s.Name] {
			row.Pinned = p.String() // package:, or npx -y PKG, uvx PKG
		}
		if why, ok := down[s.Name]; ok {
			row.Status, row.Error = dashboard.StatusUnavailable, why
		}
		switch {
		case s.URL != "":
			row.Transport, row.URL = "http", displayURL(s.URL)
		case s.Builtin != "":
			row.Transport, row.Command = "builtin", []string{s.Builtin}
		case row.Package != "":
			row.Command = maskedArgv(s.Args)
		default:
			row.Command = maskedArgv(s.Command)
		}
		for _, e := range s.Network.Egress {
			row.Egress = append(row.Egress, strings.TrimSpace(e.Host+" "+e.CIDR))
		}
		out = append(out, row)
	}
	return out
}

// checkMetricsAddr refuses a --metrics-addr that is no loopback
// HOST:PORT: it serves without credentials.
func checkMetricsAddr(addr string) error {
	if addr == "" {
		return nil
	}
	if !loopbackAddr(addr) {
		return fmt.Errorf("--metrics-addr %s: only a loopback address (127.0.0.1:PORT, [::1]:PORT, localhost:PORT) may serve metrics without credentials", addr)
	}
	return nil
}

// serveLoopback serves h on ln (a loopback listener); requests must name
// a loopback host (no DNS rebinding). It returns the listener's stop.
// Its bounds are those of serve's HTTP listener (transport.go): no request holds a
// connection by sending slowly or not at all.
func serveLoopback(ln net.Listener, mux http.Handler) func() {
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		Handler: gateway.BodyDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !loopbackAddr(r.Host) && !loopbackAddr(r.Host+":0") {
				http.Error(w, "Forbidden: invalid Host header", http.StatusForbidden)
				return
			}
			mux.ServeHTTP(w, r)
		}))}
	var wg sync.WaitGroup
	wg.Go(func() { srv.Serve(ln) })
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
		wg.Wait()
	}
}

// UIServeArgs are the arguments of the serve whose dashboard mcpbox ui,
// given configPath or stateDir, would open: with the config it named, or
// the ./mcpbox.yaml a user who ran no serve yet means, and an HTTP
// listener.
func UIServeArgs(configPath, stateDir string) []string {
	var args []string
	switch {
	case configPath != "":
		args = []string{"--config", configPath}
	case stateDir != "":
		args = []string{"--state-dir", stateDir}
	default:
		if _, err := os.Stat("mcpbox.yaml"); err == nil {
			args = []string{"--config", "mcpbox.yaml"}
		}
	}
	return append(args, "--http", "127.0.0.1:8765")
}

// ErrNoServe is UILoginURL's error when no serve runs on the state dir.
var ErrNoServe = errors.New("no mcpbox serve is running")

// UILoginURL is a one-time login URL (valid 5 minutes, one use) of the
// dashboard of the serve instance running on stateDir (`mcpbox ui`).
// rotate replaces the state dir's dashboard secret first, running serve
// or not: every dashboard session and login URL made before ends (the
// serves watch the file).
func UILoginURL(stateDir string, pid int, rotate bool) (string, error) {
	if stateDir == admin.AllStateDirs {
		return "", errors.New("--all: the dashboard is one instance's; run mcpbox ui in the project, or pass --config, --state-dir or --instance PID")
	}
	if rotate {
		if err := guard.StateDirOwned(stateDir); err != nil {
			return "", err
		}
		if _, err := bearer.Dashboard.Rotate(stateDir); err != nil {
			return "", fmt.Errorf("replacing the dashboard's login secret: %w", err)
		}
	}
	recs, err := instance.List(stateDir)
	if err != nil {
		return "", err
	}
	if len(recs) == 0 {
		done := ""
		if rotate {
			done = " (the dashboard secret is replaced)"
		}
		return "", fmt.Errorf("%w on %s%s", ErrNoServe, stateDir, done)
	}
	if pid != 0 {
		recs = slices.DeleteFunc(recs, func(r instance.Record) bool { return r.PID != pid })
		if len(recs) == 0 {
			return "", fmt.Errorf("no mcpbox serve with pid %d is running on %s (mcpbox ps --instances lists them)", pid, stateDir)
		}
	}
	if len(recs) > 1 {
		// Each has its own dashboard: guessing would show the wrong
		// one's sandboxes and approvals.
		var b strings.Builder
		fmt.Fprintf(&b, "%d mcpbox serve instances run on %s; choose one with --instance PID:\n", len(recs), stateDir)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  INSTANCE\tTRANSPORT\tURL\tPROJECT\tCONFIG")
		for _, r := range recs {
			// The config tells apart two of one project (mcpbox ps's column).
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", r.PID, r.Transport, cmp.Or(r.URL, "-"), r.Project, cmp.Or(r.Config, "(default)"))
		}
		tw.Flush()
		return "", errors.New(strings.TrimSuffix(b.String(), "\n"))
	}
	base := ""
	for _, r := range recs {
		if b, ok := strings.CutSuffix(r.URL, gateway.EndpointPath); r.URL != "" && ok {
			base = loopbackBase(b)
			break
		}
	}
	if base == "" && recs[0].Transport != "stdio" {
		return "", fmt.Errorf("the running mcpbox serve (pid %d) is not listening on HTTP yet: try again in a moment", recs[0].PID)
	}
	if base == "" {
		// A stdio-only serve starts the dashboard on demand.
		if base, err = (admin.Client{StateDir: stateDir, PID: recs[0].PID}).UI(); err != nil {
			return "", fmt.Errorf("starting the dashboard of the running mcpbox serve (pid %d): %w", recs[0].PID, err)
		}
	}
	// The serve reads the secret made here at the login.
	if err := guard.StateDirOwned(stateDir); err != nil {
		return "", err
	}
	tok, err := bearer.Dashboard.Load(stateDir)
	if err != nil {
		return "", fmt.Errorf("the dashboard's login secret: %w", err)
	}
	return dashboard.LoginURL(base, tok, 5*time.Minute)
}

// loopbackBase turns a listener on the unspecified address into one a
// browser on this host can open.
func loopbackBase(base string) string {
	scheme, hostport, _ := strings.Cut(base, "://")
	host, port, err := net.SplitHostPort(hostport)
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsUnspecified() {
		return scheme + "://" + net.JoinHostPort("127.0.0.1", port)
	}
	return base
}

// OpenBrowser opens u with xdg-open (macOS: open) where there is one
// (mcpbox ui).
func OpenBrowser(u string) { openBrowser(u) }
