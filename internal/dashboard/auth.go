package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Roles of a session.
const (
	RoleAdmin  = "admin"  // sees everything and acts
	RoleViewer = "viewer" // sees everything, acts on nothing
)

// MaxLoginTTL bounds the life of a one-time login URL; a token claiming
// a later expiry is refused.
const MaxLoginTTL = 10 * time.Minute

// cookieBase starts the session cookie's name (see cookieName).
const cookieBase = "mcpbox_ui"

// cookieName is the session cookie of the dashboard r reached:
// cookieBase and the port r names. Browsers keep cookies per host, not
// per port, so two serve on 127.0.0.1 would otherwise overwrite each
// other's session at every login.
func cookieName(r *http.Request) string {
	_, port, err := net.SplitHostPort(r.Host)
	if err != nil || port == "" || len(port) > 5 || strings.Trim(port, "0123456789") != "" {
		return cookieBase
	}
	return cookieBase + "_" + port
}

// maxSessions bounds the sessions held in memory, maxSessionsEach those
// of one principal (a role and who): a login past it ends that
// principal's oldest session, and a login into a full table ends the
// oldest of the principal holding the most. So no one login (a viewer's
// token, logging in again and again) can fill the table and lock the
// others, the admin included, out.
const (
	maxSessions     = 256
	maxSessionsEach = 32
)

// principal is who a session is of: its role and Options.Authenticate's
// who. The bounds on sessions and event streams are per principal.
type principal struct{ role, who string }

// session is one logged-in browser.
type session struct {
	role    string
	who     string // Options.Authenticate's who: a client's name, or ""
	csrf    string
	expires time.Time
	// secret is what the login secret was when the session began: a
	// session ends when it changes (its file replaced), so that one
	// begun with a leaked secret does not outlive its rotation.
	secret [sha256.Size]byte
}

// secretSum is the digest of the login secret as it is now.
func (h *Handler) secretSum() [sha256.Size]byte {
	if h.opts.LoginSecret == nil {
		return sha256.Sum256(nil)
	}
	return sha256.Sum256([]byte(h.opts.LoginSecret()))
}

// loginKey derives the MAC key of one-time logins from the shared secret,
// so that the secret itself never keys anything else.
func loginKey(secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("mcpbox ui login v1"))
	return m.Sum(nil)
}

// MintLogin returns a one-time login token for the dashboard of the serve
// whose login secret (Options.LoginSecret: the state dir's dashboard
// secret) is secret, valid until now+ttl (at most MaxLoginTTL) and for
// one login.
func MintLogin(secret string, now time.Time, ttl time.Duration) (string, error) {
	if secret == "" {
		return "", errors.New("minting a login token: no secret")
	}
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return mint(secret, nonce, now.Add(min(ttl, MaxLoginTTL))), nil
}

// mint is the token of nonce (16 bytes) expiring at exp: base64url of
// nonce and exp (Unix seconds, big endian), ".", base64url of their MAC.
func mint(secret string, nonce []byte, exp time.Time) string {
	payload := make([]byte, 24)
	copy(payload, nonce)
	binary.BigEndian.PutUint64(payload[16:], uint64(exp.Unix()))
	m := hmac.New(sha256.New, loginKey(secret))
	m.Write(payload)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(m.Sum(nil))
}

// LoginURL is the one-time login URL of the dashboard at base
// ("http://127.0.0.1:8080"), what `mcpbox ui --print-url` prints.
func LoginURL(base, secret string, ttl time.Duration) (string, error) {
	tok, err := MintLogin(secret, time.Now(), ttl)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(base, "/") + "/ui/login?t=" + url.QueryEscape(tok), nil
}

// redeem checks a one-time login token and burns it. admit, if non-nil,
// is asked only of a token that is valid (signed, in time, unused),
// before it is burnt: its error refuses the login and leaves the token
// good (a peer check, which costs more than the signature's).
func (h *Handler) redeem(tok string, admit func() error) (bool, error) {
	if h.opts.LoginSecret == nil {
		return false, nil
	}
	secret := h.opts.LoginSecret()
	p, mac, ok := strings.Cut(tok, ".")
	if !ok || secret == "" {
		return false, nil
	}
	payload, err1 := decodeB64(p)
	sum, err2 := decodeB64(mac)
	if err1 != nil || err2 != nil || len(payload) != 24 {
		return false, nil
	}
	m := hmac.New(sha256.New, loginKey(secret))
	m.Write(payload)
	if !hmac.Equal(m.Sum(nil), sum) {
		return false, nil
	}
	now := h.opts.Now()
	exp := time.Unix(int64(binary.BigEndian.Uint64(payload[16:])), 0)
	if !now.Before(exp) || exp.After(now.Add(MaxLoginTTL+time.Minute)) {
		return false, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for n, e := range h.used {
		if now.After(e) {
			delete(h.used, n)
		}
	}
	nonce := string(payload[:16])
	if _, seen := h.used[nonce]; seen {
		return false, nil
	}
	if admit != nil {
		// Under h.mu, so that the token is not burnt meanwhile.
		if err := admit(); err != nil {
			return false, err
		}
	}
	h.used[nonce] = exp
	return true, nil
}

// newSession starts a session of role for who and sets its cookie; sum is the
// login secret's digest as it was before the login was checked, so that
// a rotation during the check ends the session too.
func (h *Handler) newSession(w http.ResponseWriter, r *http.Request, role, who string, sum [sha256.Size]byte) (key string) {
	id, csrf := rand.Text()+rand.Text(), rand.Text()
	now := h.opts.Now()
	h.mu.Lock()
	for k, s := range h.sessions {
		if now.After(s.expires) {
			delete(h.sessions, k)
		}
	}
	h.makeRoomFor(role, who)
	h.sessions[id] = &session{role: role, who: who, csrf: csrf, expires: now.Add(h.opts.SessionTTL), secret: sum}
	h.mu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name: cookieName(r), Value: id, Path: "/ui/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: h.opts.Secure || r.TLS != nil,
		MaxAge: int(h.opts.SessionTTL.Seconds()),
	})
	return csrf
}

// makeRoomFor ends a session, if need be, so that one of role and who
// fits (maxSessionsEach, maxSessions): the oldest of that principal's
// when it holds its most, else, in a full table, the oldest of the
// principal holding the most.
//
// Preconditions: h.mu held.
func (h *Handler) makeRoomFor(role, who string) {
	count := map[principal]int{}
	oldest := map[principal]string{}
	for k, s := range h.sessions {
		p := principal{s.role, s.who}
		count[p]++
		if o, ok := oldest[p]; !ok || s.expires.Before(h.sessions[o].expires) {
			oldest[p] = k
		}
	}
	me := principal{role, who}
	if count[me] >= maxSessionsEach {
		delete(h.sessions, oldest[me])
		return
	}
	if len(h.sessions) < maxSessions {
		return
	}
	var most principal
	found := false
	for p, n := range count {
		if !found || n > count[most] || n == count[most] && h.sessions[oldest[p]].expires.Before(h.sessions[oldest[most]].expires) {
			most, found = p, true
		}
	}
	delete(h.sessions, oldest[most])
}

// pageAfterLogin is where a new session's browser goes: the page, with
// the session's key in the fragment, which only the page reads (no
// request carries a fragment) and keeps in its origin's storage. The
// cookie alone does not make a request: browsers send a host's cookies to
// every port of it, so another local user's web server on the same
// loopback address gets the cookie when the browser visits it; the key,
// in storage of this origin (scheme, host and port), it never sees.
func pageAfterLogin(key string) string { return "/ui/#key=" + url.QueryEscape(key) }

// logLogin tells the logger of a session begun with method ("form",
// "link").
func (h *Handler) logLogin(r *http.Request, role, who, method string) {
	if h.opts.Logger == nil {
		return
	}
	args := []any{"role", role, "with", method, "from", r.RemoteAddr}
	if who != "" {
		args = append(args, "client", who)
	}
	h.opts.Logger.Info("dashboard login", args...)
}

// by is who decides in the session, as audit records name them:
// "web:ROLE", and ":CLIENT" for a session begun with a client's token.
func (s *session) by() string {
	if s.who == "" {
		return "web:" + s.role
	}
	return "web:" + s.role + ":" + s.who
}

// logRefused counts a refused login and tells the logger at most once a
// minute, with the count since the last time: whoever can reach the page
// can try, and must not flood the log.
func (h *Handler) logRefused(r *http.Request, method string) {
	if h.opts.Logger == nil {
		return
	}
	h.mu.Lock()
	h.refused++
	n, now := h.refused, h.opts.Now()
	due := now.Sub(h.refusedAt) >= time.Minute
	if due {
		h.refused, h.refusedAt = 0, now
	}
	h.mu.Unlock()
	if due {
		h.opts.Logger.Warn("dashboard login refused", "with", method, "from", r.RemoteAddr, "refused", n)
	}
}

// session is the live session of r's cookie, or nil.
func (h *Handler) session(r *http.Request) (string, *session) {
	c, err := r.Cookie(cookieName(r))
	if err != nil {
		return "", nil
	}
	sum := h.secretSum()
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sessions[c.Value]
	if s == nil || h.opts.Now().After(s.expires) || s.secret != sum {
		delete(h.sessions, c.Value)
		return "", nil
	}
	return c.Value, s
}

// endSession forgets the session id.
func (h *Handler) endSession(id string) {
	h.mu.Lock()
	delete(h.sessions, id)
	h.mu.Unlock()
}

// alive says whether session id still exists (an open event stream ends
// when its session does).
func (h *Handler) alive(id string) bool {
	sum := h.secretSum()
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sessions[id]
	return s != nil && !h.opts.Now().After(s.expires) && s.secret == sum
}

// hostAllowed says whether r's Host is a loopback name or one of hosts:
// a page on another name reached through DNS rebinding is refused.
func hostAllowed(r *http.Request, hosts []string) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	switch host {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return host != "" && slices.Contains(hosts, host)
}

// originOK says whether r's Origin names this very host: state-changing
// requests must come from the dashboard's own pages.
func originOK(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return false
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Path != "" && u.Path != "/" {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

// csrfOK checks the request's session key (X-CSRF-Token, the page's copy
// of the key pageAfterLogin gave it) against the session's. Only the
// header counts: a key in an address would stay in the browser's history
// and in proxies' logs.
func csrfOK(r *http.Request, s *session) bool {
	got := r.Header.Get("X-CSRF-Token")
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) == 1
}

// decodeB64 decodes the parts of a login token: unpadded base64url, with
// the unused trailing bits zero, so that each token has one spelling.
// encoding/base64 skips \r and \n even in strict mode, so they are
// refused here.
func decodeB64(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, base64.CorruptInputError(strings.IndexAny(s, "\r\n"))
	}
	return base64.RawURLEncoding.Strict().DecodeString(s)
}
