package daemon

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"mcpbox/internal/admin"
	"mcpbox/internal/bearer"
	"mcpbox/internal/config"
	"mcpbox/internal/dashboard"
	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
	"mcpbox/internal/instance"
	"mcpbox/internal/metrics"
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
	// stopMetrics stops the --metrics-addr listener.
	stopMetrics func()
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
	w.m = metrics.New(metrics.Options{Servers: names, KnownTool: g.KnownTool, Gauges: w.gauges})
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

// stop ends the --metrics-addr listener and the audit follower.
func (w *web) stop() {
	if w.stopMetrics != nil {
		w.stopMetrics()
	}
	w.cancel()
	<-w.done
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
		out.Sandboxes = append(out.Sandboxes, metrics.Sandbox{Server: s.Server, State: s.State, Memory: s.Memory, Pids: s.Pids})
	}
	return out
}

// attach mounts the dashboard, /metrics, /healthz and /readyz on the
// HTTP listener's options (when serve listens) once the gateway exists,
// and serves --metrics-addr.
func (d *daemon) attach(w *web, g *guard.Guard, gw *gateway.Gateway) error {
	w.backend = g.WebAdmin(gw)
	ready := metrics.Readyz(func() error { return g.AuditStore().Err() })
	if d.o.MetricsAddr != "" {
		ln, err := net.Listen("tcp", d.o.MetricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr: listening on %s: %w", d.o.MetricsAddr, admin.ExplainAddrInUse(d.o.MetricsAddr, err))
		}
		w.stopMetrics = serveMetrics(ln, w.m.Handler(), ready)
	}
	if d.addr == "" {
		return nil
	}
	tokens, err := bearer.NewWatch(d.dir)
	if err != nil {
		return fmt.Errorf("the dashboard's login token: %w", err)
	}
	ui, err := dashboard.New(dashboard.Options{
		Backend: w.backend, Audit: g.AuditStore(), Events: w.ev, ToolInfo: g.ToolInfo,
		Authenticate: d.dashboardRoles(tokens),
		LoginSecret: func() string {
			tok, _, _ := tokens.Refresh()
			return tok
		},
		Hosts:   listenHosts(d.addr),
		Secure:  d.cert != "",
		Servers: func() []dashboard.Server { return dashboardServers(d.c) },
	})
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

// dashboardRoles is the dashboard's login check: the state dir's token
// (the local user's, as it is now: rotation applies) is an admin; a
// client's token has the client's role (clients[].role), none without.
func (d *daemon) dashboardRoles(tokens *bearer.Watch) func(string) (string, bool) {
	type cand struct{ token, role string }
	var clients []cand
	for _, cl := range d.hopts.Clients {
		for _, c := range d.c.Clients {
			if c.Name == cl.Name && c.Role != "" {
				clients = append(clients, cand{string(cl.Token), c.Role})
			}
		}
	}
	return func(token string) (string, bool) {
		local, _, _ := tokens.Refresh()
		role := ""
		for _, c := range append([]cand{{local, dashboard.RoleAdmin}}, clients...) {
			if subtle.ConstantTimeCompare([]byte(token), []byte(c.token)) == 1 && c.token != "" {
				role = c.role
			}
		}
		return role, role != ""
	}
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

// dashboardServers are the servers page's rows, from the config.
func dashboardServers(c *config.Config) []dashboard.Server {
	var out []dashboard.Server
	for _, s := range c.Servers {
		row := dashboard.Server{Name: s.Name, Placement: s.Placement, Transport: "stdio", Package: s.Image.Ref}
		switch {
		case s.URL != "":
			row.Transport = "http"
		case s.Builtin != "":
			row.Transport, row.Command = "builtin", []string{s.Builtin}
		default:
			row.Command = s.Command
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

// serveMetrics serves /metrics, /healthz and /readyz without credentials
// on ln (loopback); requests must name a loopback host (no DNS
// rebinding). It returns the listener's stop.
func serveMetrics(ln net.Listener, m, ready http.Handler) func() {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m)
	mux.Handle("GET /healthz", metrics.Healthz())
	mux.Handle("GET /readyz", ready)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackAddr(r.Host) && !loopbackAddr(r.Host+":0") {
			http.Error(w, "Forbidden: invalid Host header", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})}
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

// UILoginURL is a one-time login URL (valid 5 minutes, one use) of the
// dashboard of the serve instance running on stateDir (`mcpbox ui`).
func UILoginURL(stateDir string) (string, error) {
	recs, err := instance.List(stateDir)
	if err != nil {
		return "", err
	}
	if len(recs) == 0 {
		return "", fmt.Errorf("no mcpbox serve is running on %s: start one with mcpbox serve --http 127.0.0.1:8765", stateDir)
	}
	for _, r := range recs {
		base, ok := strings.CutSuffix(r.URL, gateway.EndpointPath)
		if r.URL == "" || !ok {
			continue
		}
		tok, err := bearer.Read(stateDir)
		if err != nil {
			return "", fmt.Errorf("the dashboard's login secret: %w", err)
		}
		return dashboard.LoginURL(loopbackBase(base), tok, 5*time.Minute)
	}
	if recs[0].Transport != "stdio" {
		return "", fmt.Errorf("the running mcpbox serve (pid %d) is not listening on HTTP yet: try again in a moment", recs[0].PID)
	}
	return "", fmt.Errorf("the running mcpbox serve (pid %d) serves stdio only, and the dashboard is on serve's HTTP listener: "+
		"add --http 127.0.0.1:0 to its command line (e.g. mcpbox serve --stdio --http 127.0.0.1:0 in the client's config) and run mcpbox ui again", recs[0].PID)
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

// OpenBrowser opens u with xdg-open where there is one (mcpbox ui).
func OpenBrowser(u string) { openBrowser(u) }
