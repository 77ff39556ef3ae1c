package dashboard

import (
	"context"
	"embed"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"mcpbox/internal/admin"
	"mcpbox/internal/audit"
	"mcpbox/internal/integrity"
)

//go:embed static
var staticFS embed.FS

// csp is the Content-Security-Policy of every answer: only this origin's
// script, style, images and connections; no inline anything, no frames.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// AuditReader is what the calls, egress and integrity pages read:
// *audit.Store is one.
type AuditReader interface {
	Query(ctx context.Context, f audit.Filter) ([]audit.Record, error)
	Recent(ctx context.Context, f audit.Filter, outcome string, before int64, limit int) ([]audit.Record, error)
}

// Server is one configured server as the servers page shows it.
type Server struct {
	Name      string `json:"name"`
	Transport string `json:"transport,omitempty"` // stdio, http, builtin
	Placement string `json:"placement,omitempty"`
	Package   string `json:"package,omitempty"` // the package or image as the config names it
	// Pinned is what the lock file pins of it: a package's version
	// (ECOSYSTEM:NAME@VERSION), an image's digest; "": nothing yet.
	Pinned  string   `json:"pinned,omitempty"`
	URL     string   `json:"url,omitempty"`     // a remote server's, without user info or query
	Command []string `json:"command,omitempty"` // argv, or a package's or image's args; credential-shaped strings masked; configured secrets redacted
	Egress  []string `json:"egress,omitempty"`  // the allowed destinations
	// Status is StatusUnavailable for a server serve could not set up
	// (Error says why); "": it is served.
	Status string `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
}

// StatusUnavailable is Server.Status of a server serve could not set up.
const StatusUnavailable = "unavailable"

// Options configure New.
type Options struct {
	// Backend is the running gateway's admin back-end; required.
	Backend admin.Backend
	// Audit reads the audit trail; required.
	Audit AuditReader
	// Events, if non-nil, carries live updates to open pages (see
	// FollowAudit); nil: pages poll.
	Events *Events
	// Authenticate maps a token typed into the login form to a role
	// (RoleAdmin or RoleViewer) and who logs in with it (a client's
	// name; "" for the dashboard's own secret), which the audit records
	// of the session's decisions name; ok false refuses it. Required.
	// It must compare in constant time.
	Authenticate func(token string) (role, who string, ok bool)
	// LoginSecret, if non-nil, is the secret one-time login URLs are
	// signed with (the state dir's dashboard secret; see LoginURL); they
	// log in as RoleAdmin. Nil: only the form logs in.
	LoginSecret func() string
	// LinkPeer, if non-nil, is asked before a one-time login URL is
	// redeemed: an error refuses the request and leaves the URL unused.
	// The URL is in xdg-open's and the browser's command lines, which
	// every local user can read; mcpbox refuses a peer that is another
	// local user's process (tcppeer.SameUser).
	LinkPeer func(r *http.Request) error
	// Hosts are host names besides the loopback ones the page may be
	// reached by (a configured listen name); anything else is refused.
	Hosts []string
	// Servers, if non-nil, lists the configured servers for the servers
	// page; nil: the page lists the servers of the sandboxes.
	Servers func() []Server
	// ToolInfo, if non-nil, gives the annotations (untrusted hints) and
	// pin state ("pinned", "new", "changed", "off") of the tool a pending
	// request calls, for the approvals page; nil: not shown.
	ToolInfo func(server, tool string) (annotations map[string]any, pin string)
	// Pinned, if non-nil, gives the lock file's path and the counts of
	// each server's pins in it, for the integrity page; nil: not shown.
	Pinned func() (lock string, servers []integrity.ServerPins)
	// Secure marks the session cookie Secure even on plain-HTTP requests
	// (a TLS-terminating proxy in front). TLS requests always get it.
	Secure bool
	// SessionTTL is how long a session lasts. Zero: 12 hours.
	SessionTTL time.Duration
	// Now, if non-nil, is the clock of sessions and logins; nil: time.Now.
	Now func() time.Time
	// ApprovalPoll is how often an open event stream checks the pending
	// approvals (they are not audit records until decided). Zero: 500 ms.
	ApprovalPoll time.Duration
	// Logger, if non-nil, is told of each login and, at most once a
	// minute with their count, of refused ones; nil: nothing is logged.
	Logger *slog.Logger
}

// maxStreams bounds the open event streams, maxStreamsEach those of one
// login (a role and who), so that one (a viewer's token) cannot hold
// them all.
const (
	maxStreams     = 64
	maxStreamsEach = 8
)

// Handler serves /ui/. It is safe for concurrent use.
type Handler struct {
	opts    Options
	mux     *http.ServeMux
	streams chan struct{} // a slot per open event stream

	mu        sync.Mutex
	sessions  map[string]*session  // guarded by mu
	used      map[string]time.Time // one-time login nonces burnt, until they expire; guarded by mu
	refused   int                  // logins refused since the last logged; guarded by mu
	refusedAt time.Time            // when a refused login was last logged; guarded by mu
	// streamsOf counts the open event streams by login. Guarded by mu.
	streamsOf map[principal]int
}

// New returns the dashboard handler, to be mounted at /ui/ of the
// gateway's HTTP listener (the paths it answers start with /ui/).
func New(o Options) (*Handler, error) {
	if o.Backend == nil || o.Audit == nil || o.Authenticate == nil {
		return nil, errors.New("creating the dashboard: Backend, Audit and Authenticate are required")
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 12 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ApprovalPoll <= 0 {
		o.ApprovalPoll = 500 * time.Millisecond
	}
	h := &Handler{opts: o, mux: http.NewServeMux(), streams: make(chan struct{}, maxStreams),
		sessions: map[string]*session{}, used: map[string]time.Time{}, streamsOf: map[principal]int{}}
	sub, _ := fs.Sub(staticFS, "static")
	h.mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(sub)))
	h.mux.HandleFunc("GET /ui/login", h.serveLoginPage)
	h.mux.HandleFunc("POST /ui/login", h.serveLoginForm)
	h.mux.HandleFunc("GET /ui/{$}", h.page)
	h.routes()
	return h, nil
}

// ServeHTTP checks the Host (and, for anything but GET and HEAD, the
// Origin), sets the security headers, and routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: under no-referrer a browser sends
	// "Origin: null" with a form POST, which the Origin check refuses.
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	if !hostAllowed(r, h.opts.Hosts) {
		refuse(w, "dashboard: host "+r.Host+" is not allowed (loopback names or the configured ones)")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !originOK(r) {
		refuse(w, "dashboard: cross-origin request refused (Origin must be this host)")
		return
	}
	h.mux.ServeHTTP(w, r)
}

// refuse answers 403 with msg and ends the connection without reading
// the rest of the request's body: net/http would read it first, and it
// may come as slowly as the client likes.
func refuse(w http.ResponseWriter, msg string) {
	w.Header().Set("Connection", "close")
	http.Error(w, msg, http.StatusForbidden)
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// page serves the application page, or sends a browser without a session
// to the login.
func (h *Handler) page(w http.ResponseWriter, r *http.Request) {
	if _, s := h.session(r); s == nil {
		http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
		return
	}
	h.static(w, "index.html")
}

func (h *Handler) static(w http.ResponseWriter, name string) {
	b, err := staticFS.ReadFile("static/" + name)
	if err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b)
}

// serveLoginPage redeems a one-time login URL (?t=), or shows the form.
func (h *Handler) serveLoginPage(w http.ResponseWriter, r *http.Request) {
	if t := r.URL.Query().Get("t"); t != "" {
		var admit func() error
		if h.opts.LinkPeer != nil {
			admit = func() error { return h.opts.LinkPeer(r) }
		}
		sum := h.secretSum() // before the check: a rotation after it ends the session
		ok, err := h.redeem(t, admit)
		if err != nil {
			// A valid link from the wrong peer: it stays good for its user.
			if h.opts.Logger != nil {
				h.opts.Logger.Warn("dashboard login link refused", "from", r.RemoteAddr, "err", err)
			}
			http.Error(w, "dashboard: this login link was "+err.Error()+": open it as that user, or log in with the dashboard secret at /ui/login", http.StatusForbidden)
			return
		}
		if !ok {
			h.logRefused(r, "link")
			http.Error(w, "dashboard: this login link is invalid, expired or used already; print a new one (mcpbox ui --print-url)", http.StatusForbidden)
			return
		}
		key := h.newSession(w, r, RoleAdmin, "", sum)
		h.logLogin(r, RoleAdmin, "", "link")
		// A redirect, so the token leaves the address bar and history.
		http.Redirect(w, r, pageAfterLogin(key), http.StatusSeeOther)
		return
	}
	h.static(w, "login.html")
}

// loginReadWait bounds the reading of a login form's body, which comes
// from anyone who can reach the listener.
var loginReadWait = 10 * time.Second

// serveLoginForm logs in with the token typed into the form.
func (h *Handler) serveLoginForm(w http.ResponseWriter, r *http.Request) {
	// Before any login: a body sent slowly must not hold the connection.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(loginReadWait))
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	tok := r.PostFormValue("token")
	sum := h.secretSum() // before the check: a rotation after it ends the session
	role, who, ok := h.opts.Authenticate(tok)
	if tok == "" {
		ok = false // whatever Authenticate makes of it
	}
	if !ok || (role != RoleAdmin && role != RoleViewer) {
		h.logRefused(r, "form")
		http.Redirect(w, r, "/ui/login?failed=1", http.StatusSeeOther)
		return
	}
	key := h.newSession(w, r, role, who, sum)
	h.logLogin(r, role, who, "form")
	http.Redirect(w, r, pageAfterLogin(key), http.StatusSeeOther)
}
