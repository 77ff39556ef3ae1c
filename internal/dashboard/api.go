package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"mcpbox/internal/admin"
	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
	"mcpbox/internal/integrity"
)

// maxBody bounds an action's JSON body.
const maxBody = 64 << 10

// routes registers the JSON API: reads need a session, actions also the
// CSRF token and the admin role.
func (h *Handler) routes() {
	read := func(pattern string, f http.HandlerFunc) { h.mux.Handle("GET "+pattern, h.authed(f, false)) }
	act := func(pattern string, f http.HandlerFunc) { h.mux.Handle("POST "+pattern, h.authed(f, true)) }
	read("/ui/api/session", h.apiSession)
	read("/ui/api/events", h.apiEvents)
	read("/ui/api/approvals", h.apiApprovals)
	read("/ui/api/calls", h.apiCalls)
	read("/ui/api/calls/{seq}", h.apiCall)
	read("/ui/api/sandboxes", h.apiSandboxes)
	read("/ui/api/egress", h.apiEgress)
	read("/ui/api/integrity", h.apiIntegrity)
	read("/ui/api/servers", h.apiServers)
	act("/ui/api/approvals/{id}", h.apiDecide)
	act("/ui/api/approvals/remembered/{id}/revoke", h.apiRevoke)
	act("/ui/api/sandboxes/{id}/{op}", h.apiControl)
	act("/ui/api/integrity/trust", h.apiTrust)
	// A workspace diff shows file contents as they are, unredacted (as
	// `mcpbox diff` does to the user who runs serve): admins only.
	h.mux.Handle("GET /ui/api/sandboxes/{id}/diff", h.authed(h.apiDiff, true))
	// Logout needs the CSRF token (no cross-site logout) but no admin role.
	h.mux.Handle("POST /ui/api/logout", h.authed(h.apiLogout, false))
}

type ctxKey struct{}

// current is the session of the request (set by authed).
type current struct {
	id string
	s  *session
}

// authed wraps f: a live session (its cookie) and its key (csrfOK) are
// required, on reads too: a cookie that reached another port of the host
// (pageAfterLogin) reads nothing. For an action (or an admin-only read),
// the admin role too.
func (h *Handler) authed(f http.HandlerFunc, action bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, s := h.session(r)
		if s == nil {
			writeError(w, http.StatusUnauthorized, "not logged in")
			return
		}
		if !csrfOK(r, s) {
			// 401: the page logs in again (its storage lost the key).
			writeError(w, http.StatusUnauthorized, "missing or wrong session key (X-CSRF-Token): log in again")
			return
		}
		if action && s.role != RoleAdmin {
			writeError(w, http.StatusForbidden, "the viewer role cannot act")
			return
		}
		f(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, current{id, s})))
	})
}

func sessionOf(r *http.Request) current { c, _ := r.Context().Value(ctxKey{}).(current); return c }

func (h *Handler) apiSession(w http.ResponseWriter, r *http.Request) {
	c := sessionOf(r)
	writeJSON(w, map[string]any{"role": c.s.role}) // never the key: the page has it
}

func (h *Handler) apiLogout(w http.ResponseWriter, r *http.Request) {
	h.endSession(sessionOf(r).id)
	http.SetCookie(w, &http.Cookie{Name: cookieName(r), Value: "", Path: "/ui/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: h.opts.Secure || r.TLS != nil})
	writeJSON(w, map[string]any{"ok": true})
}

// pendingRow is a pending request with what the page shows of its tool.
type pendingRow struct {
	approval.Request
	Annotations map[string]any `json:"annotations,omitempty"`
	Pin         string         `json:"pin,omitempty"`
	// Change is, for a trust request, the pending change it is about
	// (its diff and the scanner's findings), nil once none is pending.
	Change *admin.PinChange `json:"change,omitempty"`
}

func (h *Handler) apiApprovals(w http.ResponseWriter, r *http.Request) {
	pending, remembered := h.opts.Backend.Approvals()
	rows := make([]pendingRow, len(pending))
	changes := map[string][]admin.PinChange{} // by server
	for i, p := range pending {
		rows[i].Request = p
		if p.Where != "" {
			// Another instance's: its pins and findings are its own,
			// which this one's must not stand in for.
			continue
		}
		if p.Kind == approval.KindTrust {
			if _, ok := changes[p.Server]; !ok {
				changes[p.Server], _ = h.opts.Backend.Pins(p.Server) // none: no change shown
			}
			rows[i].Change = changeOf(changes[p.Server], p.Tool)
			continue
		}
		if h.opts.ToolInfo != nil {
			rows[i].Annotations, rows[i].Pin = h.opts.ToolInfo(p.Server, p.Tool)
		}
	}
	writeJSON(w, map[string]any{"pending": rows, "remembered": nonNil(remembered)})
}

// changeOf finds the change a trust request names (its Tool is the key
// `mcpbox trust` takes: integrity.TrustKey).
func changeOf(cs []admin.PinChange, key string) *admin.PinChange {
	kind, name := integrity.ParseTrustKey(key)
	for i, c := range cs {
		if c.Kind == kind && c.Key == name {
			return &cs[i]
		}
	}
	return nil
}

// decideBody is an approval decision.
type decideBody struct {
	Decision string `json:"decision"` // allow or deny
	Scope    string `json:"scope"`    // once, session or always; "" once
}

func (h *Handler) apiDecide(w http.ResponseWriter, r *http.Request) {
	var b decideBody
	if !readJSON(w, r, &b) {
		return
	}
	scope := cmp.Or(b.Scope, approval.ScopeOnce)
	if (b.Decision != "allow" && b.Decision != "deny") || !slices.Contains([]string{approval.ScopeOnce, approval.ScopeSession, approval.ScopeAlways}, scope) {
		writeError(w, http.StatusBadRequest, "decision must be allow or deny, scope once, session or always")
		return
	}
	d := approval.Decision{Allow: b.Decision == "allow", Scope: scope, By: sessionOf(r).s.by()}
	if err := h.opts.Backend.Decide(r.PathValue("id"), d); err != nil {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	writeJSON(w, map[string]any{"ok": true})
}

// apiRevoke forgets a remembered decision (the Revoke button): the next
// such call waits for a person again.
func (h *Handler) apiRevoke(w http.ResponseWriter, r *http.Request) {
	if err := h.opts.Backend.Revoke(r.PathValue("id"), sessionOf(r).s.by()); err != nil {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	writeJSON(w, map[string]any{"ok": true})
}

// callRow is a record as the calls table lists it (no payload).
func callRow(rec audit.Record) audit.Record {
	rec.Payload = nil
	return rec
}

func (h *Handler) apiCalls(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := audit.Filter{Client: q.Get("client"), Server: q.Get("server"), Tool: q.Get("tool"),
		Decision: q.Get("decision"), Event: cmp.Or(q.Get("event"), audit.EventCall)}
	if f.Event == "all" {
		f.Event = ""
	}
	before, _ := strconv.ParseInt(q.Get("before"), 10, 64)
	limit, _ := strconv.Atoi(q.Get("limit"))
	limit = min(max(limit, 1), 500)
	if q.Get("limit") == "" {
		limit = 100
	}
	recs, err := h.opts.Audit.Recent(r.Context(), f, q.Get("outcome"), before, limit)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	rows := make([]audit.Record, len(recs))
	for i, rec := range recs {
		rows[i] = callRow(rec)
	}
	writeJSON(w, map[string]any{"records": rows})
}

func (h *Handler) apiCall(w http.ResponseWriter, r *http.Request) {
	seq, err := strconv.ParseInt(r.PathValue("seq"), 10, 64)
	if err != nil || seq <= 0 {
		writeError(w, http.StatusBadRequest, "bad record number")
		return
	}
	recs, err := h.opts.Audit.Query(r.Context(), audit.Filter{AfterSeq: seq - 1, Limit: 1})
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if len(recs) == 0 || recs[0].Seq != seq {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no audit record %d", seq))
		return
	}
	writeJSON(w, map[string]any{"record": recs[0]})
}

func (h *Handler) apiSandboxes(w http.ResponseWriter, r *http.Request) {
	rows := nonNil(h.opts.Backend.Sandboxes())
	if sessionOf(r).s.role != RoleAdmin {
		// Host paths (the user's home, the state dir) are for those who
		// may act on them; a viewer may be an agent's token.
		for i := range rows {
			rows[i].Output = ""
		}
	}
	writeJSON(w, map[string]any{"sandboxes": rows, "now": h.opts.Now().UTC()})
}

func (h *Handler) apiControl(w http.ResponseWriter, r *http.Request) {
	op := r.PathValue("op")
	if op != "pause" && op != "resume" && op != "stop" {
		writeError(w, http.StatusNotFound, "unknown sandbox action "+strconv.Quote(op))
		return
	}
	if err := h.opts.Backend.Control(op, r.PathValue("id"), sessionOf(r).s.by()); err != nil {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	writeJSON(w, map[string]any{"ok": true})
}

// maxDiff bounds a workspace diff the page shows or downloads.
const maxDiff = 8 << 20

func (h *Handler) apiDiff(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	lower, upper, ok := h.opts.Backend.Overlay(id)
	switch {
	case !ok:
		writeError(w, http.StatusNotFound, fmt.Sprintf("no sandbox %q", id))
		return
	case upper == "":
		writeError(w, http.StatusNotFound, fmt.Sprintf("sandbox %s has no input overlay (filesystem.input.mode: overlay)", id))
		return
	}
	var b strings.Builder
	if err := workspaceDiff(&limitWriter{w: &b, n: maxDiff}, lower, upper); err != nil && !errors.Is(err, errTooBig) {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	} else if errors.Is(err, errTooBig) {
		b.WriteString("\n[diff cut at 8 MiB]\n")
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if r.URL.Query().Get("download") != "" {
		w.Header().Set("Content-Type", "text/x-diff; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="`+safeFileName(id)+`.patch"`)
	}
	w.Write([]byte(b.String()))
}

// safeFileName keeps the characters of a sandbox id a file name may hold.
func safeFileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, s)
}

// egressHost is one destination of a server.
type egressHost struct {
	Host      string    `json:"host"`
	Port      int       `json:"port,omitempty"`
	Decision  string    `json:"decision"`
	Count     int       `json:"count"`
	BytesUp   int64     `json:"bytes_up"`
	BytesDown int64     `json:"bytes_down"`
	Last      time.Time `json:"last"`
	Reason    string    `json:"reason,omitempty"`
}

// egressServer is a server's egress, allowed and refused.
type egressServer struct {
	Server  string       `json:"server"`
	Allowed int          `json:"allowed"`
	Refused int          `json:"refused"`
	Hosts   []egressHost `json:"hosts"`
}

// egressWindow is how many egress records the page sums.
const egressWindow = 2000

func (h *Handler) apiEgress(w http.ResponseWriter, r *http.Request) {
	recs, err := h.opts.Audit.Recent(r.Context(), audit.Filter{Event: audit.EventEgress}, "", 0, egressWindow)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	type key struct {
		server, host, decision string
		port                   int
	}
	servers := map[string]*egressServer{}
	hosts := map[key]*egressHost{}
	for _, rec := range recs {
		name := rec.Server
		if phase := rec.Detail["phase"]; phase != "" {
			// An installer's connections, not the server's own (whose
			// sandbox may have no network at all).
			name += " (" + phase + ")"
		}
		s := servers[name]
		if s == nil {
			s = &egressServer{Server: name}
			servers[name] = s
		}
		for _, d := range rec.Domains {
			dec := cmp.Or(d.Decision, rec.Decision)
			if dec == "allow" && rec.Detail["refused"] != "" {
				dec = "refused" // a request in the connection (guard.EgressEvent)
			}
			if dec == "allow" {
				s.Allowed++
			} else {
				s.Refused++
			}
			k := key{name, d.Host, dec, d.Port}
			eh := hosts[k]
			if eh == nil {
				eh = &egressHost{Host: d.Host, Port: d.Port, Decision: dec, Last: rec.Time, Reason: rec.Detail["reason"]}
				hosts[k] = eh
			}
			eh.Count++
			eh.BytesUp += d.BytesUp
			eh.BytesDown += d.BytesDown
		}
	}
	for k, eh := range hosts {
		servers[k.server].Hosts = append(servers[k.server].Hosts, *eh)
	}
	out := make([]egressServer, 0, len(servers))
	for _, s := range servers {
		slices.SortFunc(s.Hosts, func(a, b egressHost) int {
			// Refused first, then the busiest.
			return cmp.Or(cmp.Compare(boolInt(a.Decision == "allow"), boolInt(b.Decision == "allow")), cmp.Compare(b.Count, a.Count), cmp.Compare(a.Host, b.Host))
		})
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b egressServer) int { return cmp.Compare(a.Server, b.Server) })
	writeJSON(w, map[string]any{"servers": out, "window": egressWindow})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (h *Handler) apiIntegrity(w http.ResponseWriter, r *http.Request) {
	scans, err := h.opts.Audit.Recent(r.Context(), audit.Filter{Event: audit.EventScan}, "", 0, 200)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	pins, err := h.opts.Audit.Recent(r.Context(), audit.Filter{Event: audit.EventPin}, "", 0, 200)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	changes, err := h.opts.Backend.Pins("")
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := map[string]any{"changes": nonNil(changes), "findings": nonNil(scans), "pins": nonNil(pins)}
	if h.opts.Pinned != nil {
		// What the lock holds now, including what mcpbox pin or another
		// instance pinned: the pin events above are this audit's only.
		lock, servers := h.opts.Pinned()
		out["lock"], out["pinned"] = lock, nonNil(servers)
	}
	writeJSON(w, out)
}

// trustBody trusts pending definition changes.
type trustBody struct {
	Server string   `json:"server"`
	Key    string   `json:"key"`    // "" for all of the server's
	Hashes []string `json:"hashes"` // the new hashes the page showed
}

func (h *Handler) apiTrust(w http.ResponseWriter, r *http.Request) {
	var b trustBody
	if !readJSON(w, r, &b) {
		return
	}
	if b.Server == "" || len(b.Hashes) == 0 {
		writeError(w, http.StatusBadRequest, "trust needs a server and the hashes shown")
		return
	}
	changes, err := h.opts.Backend.Trust(b.Server, b.Key, sessionOf(r).s.by(), b.Hashes)
	if err != nil {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	writeJSON(w, map[string]any{"ok": true, "changes": nonNil(changes)})
}

func (h *Handler) apiServers(w http.ResponseWriter, r *http.Request) {
	var servers []Server
	if h.opts.Servers != nil {
		servers = h.opts.Servers()
	}
	sb := h.opts.Backend.Sandboxes()
	if h.opts.Servers == nil {
		seen := map[string]bool{}
		for _, s := range sb {
			if !seen[s.Server] {
				seen[s.Server] = true
				servers = append(servers, Server{Name: s.Server})
			}
		}
	}
	type row struct {
		Server
		Sandboxes []admin.Sandbox `json:"sandboxes"`
		Restarts  int             `json:"restarts"`
	}
	out := make([]row, 0, len(servers))
	for _, s := range servers {
		rw := row{Server: s, Sandboxes: []admin.Sandbox{}}
		for _, x := range sb {
			if x.Server == s.Name {
				rw.Sandboxes = append(rw.Sandboxes, x)
				rw.Restarts += x.Restarts
			}
		}
		out = append(out, rw)
	}
	writeJSON(w, map[string]any{"servers": out})
}

// readJSON decodes an action's body: application/json, at most maxBody,
// no unknown fields.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "body must be application/json")
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
