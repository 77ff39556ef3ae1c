package dashboard

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// pendingCall starts a call that waits for approval and returns the
// approval's id and a channel with the call's result.
func pendingCall(t *testing.T, r *rig, b *browser, text string) (string, chan string) {
	t.Helper()
	res := make(chan string, 1)
	go func() {
		out, isErr := r.call(t, text)
		if isErr {
			out = "error: " + out
		}
		res <- out
	}()
	var id string
	waitFor(t, "a pending approval", func() bool {
		var a struct{ Pending []struct{ ID string } }
		if b.getJSON("/ui/api/approvals", &a) == 200 && len(a.Pending) == 1 {
			id = a.Pending[0].ID
		}
		return id != ""
	})
	return id, res
}

// rememberAlways has b approve a call for always, so that a decision is
// remembered.
func rememberAlways(t *testing.T, r *rig, b *browser) {
	t.Helper()
	id, res := pendingCall(t, r, b, "review and remember")
	if code, body := b.post("/ui/api/approvals/"+id, b.csrf, map[string]string{"decision": "allow", "scope": "always"}); code != 200 {
		t.Fatalf("approve always: %d %s", code, body)
	}
	<-res
}

// TestLoginAndSessions: no session, no page or API; a wrong token logs
// nobody in; the right one sets a strict, HttpOnly cookie on /ui/.
func TestLoginAndSessions(t *testing.T) {
	r := newRig(t)
	b := r.browser(t)
	resp := b.do("GET", "/ui/", nil, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
		t.Errorf("page without a session: %s %q", resp.Status, resp.Header.Get("Location"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Errorf("CSP %q", csp)
	}
	var v any
	if code := b.getJSON("/ui/api/approvals", &v); code != http.StatusUnauthorized {
		t.Errorf("API without a session: %d", code)
	}
	b.login("mcpbox_wrong-token-0000000")
	b.login("")
	if code := b.getJSON("/ui/api/approvals", &v); code != http.StatusUnauthorized {
		t.Errorf("API after a wrong token: %d", code)
	}
	resp = b.login(adminToken)
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if strings.HasPrefix(c.Name, cookieBase+"_") {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/ui/" {
		t.Fatalf("session cookie %+v", cookie)
	}
	if code := b.getJSON("/ui/api/approvals", &v); code != 200 || b.csrf == "" {
		t.Errorf("API after login: %d, csrf %q", code, b.csrf)
	}
	if code, _ := b.post("/ui/api/logout", b.csrf, nil); code != 200 {
		t.Errorf("logout %d", code)
	}
	if code := b.getJSON("/ui/api/approvals", &v); code != http.StatusUnauthorized {
		t.Errorf("API after logout: %d", code)
	}
	// A login form posted from another origin (login CSRF) is refused.
	b2 := r.browser(t)
	b2.origin = "http://evil.example"
	if resp := b2.login(adminToken); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin login: %s", resp.Status)
	}
}

// TestActionsNeedCSRFOriginAndAdmin: a decision without the CSRF token,
// with a wrong one, from another Origin or without one, or from a
// viewer, is refused and the call stays pending; the admin's goes
// through.
func TestActionsNeedCSRFOriginAndAdmin(t *testing.T) {
	r := newRig(t)
	b := r.browser(t)
	b.login(adminToken)
	id, res := pendingCall(t, r, b, "review please")
	decide := map[string]string{"decision": "allow", "scope": "once"}
	path := "/ui/api/approvals/" + id
	if code, _ := b.post(path, "", decide); code != http.StatusUnauthorized {
		t.Errorf("no CSRF token: %d, want 401", code)
	}
	if code, _ := b.post(path, b.csrf+"x", decide); code != http.StatusUnauthorized {
		t.Errorf("wrong CSRF token: %d, want 401", code)
	}
	b.origin = "http://evil.example"
	if code, _ := b.post(path, b.csrf, decide); code != http.StatusForbidden {
		t.Errorf("wrong Origin: %d, want 403", code)
	}
	b.origin = ""
	if code, _ := b.post(path, b.csrf, decide); code != http.StatusForbidden {
		t.Errorf("no Origin: %d, want 403", code)
	}
	b.origin = b.base
	v := r.browser(t)
	v.login(viewerToken)
	var a struct {
		Pending []struct {
			ID, Pin     string
			Annotations map[string]any
		}
	}
	if code := v.getJSON("/ui/api/approvals", &a); code != 200 || len(a.Pending) != 1 {
		t.Fatalf("viewer reads approvals: %d %+v", code, a)
	}
	if p := a.Pending[0]; p.Pin != "pinned" || p.Annotations["readOnlyHint"] != true {
		t.Errorf("the tool of the request: pin %q, annotations %v", p.Pin, p.Annotations)
	}
	if code, body := v.post(path, v.csrf, decide); code != http.StatusForbidden || !strings.Contains(body, "viewer") {
		t.Errorf("viewer decides: %d %s, want 403", code, body)
	}
	if code, _ := v.post("/ui/api/sandboxes/x/stop", v.csrf, nil); code != http.StatusForbidden {
		t.Errorf("viewer stops a sandbox: %d, want 403", code)
	}
	// A viewer's CSRF token is no admin's.
	if code, _ := b.post(path, v.csrf, decide); code != http.StatusUnauthorized {
		t.Errorf("another session's CSRF token: %d, want 401", code)
	}
	select {
	case out := <-res:
		t.Fatalf("the call ended before the admin decided: %q", out)
	default:
	}
	if code, body := b.post(path, b.csrf, decide); code != 200 {
		t.Fatalf("admin decides: %d %s", code, body)
	}
	select {
	case out := <-res:
		if out != "review please" {
			t.Errorf("approved call answered %q", out)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the approved call did not finish")
	}
	recs := r.records(t, "approval")
	if len(recs) != 1 || recs[0].Decision != "approved" || recs[0].Approver != "web:admin" {
		t.Errorf("approval records %+v", recs)
	}
}

// TestHostChecked: a request for another host name (DNS rebinding) is
// refused before any routing, even with a valid session.
func TestHostChecked(t *testing.T) {
	r := newRig(t)
	b := r.browser(t)
	b.login(adminToken)
	for _, host := range []string{"evil.example", "evil.example:80", "127.0.0.1.evil.example", "localhost.evil.example"} {
		req, _ := http.NewRequest("GET", b.base+"/ui/api/session", nil)
		req.Host = host
		resp, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("Host %s: %s, want 403", host, resp.Status)
		}
	}
	req, _ := http.NewRequest("GET", b.base+"/ui/api/session", nil)
	req.Host = strings.Replace(req.URL.Host, "127.0.0.1", "localhost", 1)
	// Past the Host check (the session is the concern of the other tests).
	if resp, err := b.c.Do(req); err != nil || resp.StatusCode == http.StatusForbidden {
		t.Errorf("Host localhost: %v %v", resp, err)
	}
}

// TestOneTimeLogin: a login URL works once, and not after it expires,
// nor when altered, nor when minted with another secret.
func TestOneTimeLogin(t *testing.T) {
	r := newRig(t)
	u, err := LoginURL(r.srv.URL, adminToken, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimPrefix(u, r.srv.URL)
	b := r.browser(t)
	resp := b.do("GET", path, nil, nil)
	if b.csrf = keyOf(resp); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/#key=") || b.csrf == "" {
		t.Fatalf("first use: %s, to %s", resp.Status, resp.Header.Get("Location"))
	}
	var s struct{ Role string }
	if code := b.getJSON("/ui/api/session", &s); code != 200 || s.Role != RoleAdmin {
		t.Errorf("session after the link: %d %+v", code, s)
	}
	if resp := r.browser(t).do("GET", path, nil, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("second use: %s, want 403", resp.Status)
	}
	other, _ := LoginURL(r.srv.URL, "mcpbox_someothersecret00000", time.Minute)
	tok, _ := MintLogin(adminToken, time.Now().Add(-time.Hour), time.Minute)
	valid, _ := MintLogin(adminToken, time.Now(), time.Minute)
	// Alter the first character: to one it is not (an "A" put over an
	// "A" would leave the link valid, one time in 64).
	altered := "A" + valid[1:]
	if valid[0] == 'A' {
		altered = "B" + valid[1:]
	}
	for name, p := range map[string]string{
		"another secret": strings.TrimPrefix(other, r.srv.URL),
		"expired":        "/ui/login?t=" + url.QueryEscape(tok),
		"altered":        "/ui/login?t=" + url.QueryEscape(altered),
		"no mac":         "/ui/login?t=" + url.QueryEscape(strings.Split(valid, ".")[0]),
	} {
		if resp := r.browser(t).do("GET", p, nil, nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s, want 403", name, resp.Status)
		}
	}
}

// TestLoginLinkOtherUser: a login URL presented over loopback by a
// process of another user (who read it on xdg-open's command line) is
// refused naming that user, and stays good for the user's own browser.
func TestLoginLinkOtherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot run a process of another uid")
	}
	r := newRig(t)
	u, err := LoginURL(r.srv.URL, adminToken, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	hostPort := strings.TrimPrefix(r.srv.URL, "http://")
	host, port, _ := net.SplitHostPort(hostPort)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := "GET " + strings.TrimPrefix(u, r.srv.URL) + " HTTP/1.0\r\nHost: " + hostPort + "\r\n\r\n"
	cmd := exec.CommandContext(ctx, "bash", "-c", `exec 3<>"/dev/tcp/$1/$2"; printf '%s' "$3" >&3; cat <&3`, "bash", host, port, req)
	cmd.Dir = "/"
	const nobody = 65534
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.Output()
	if err != nil || !strings.HasPrefix(string(out), "HTTP/1.0 403") || !strings.Contains(string(out), "uid 65534") {
		t.Fatalf("the link from uid %d: %v\n%s\nwant 403 naming the uid", nobody, err, out)
	}
	b := r.browser(t)
	resp := b.do("GET", strings.TrimPrefix(u, r.srv.URL), nil, nil)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/#key=") {
		t.Fatalf("the user's own use after the refusal: %s, want the login", resp.Status)
	}
}

// TestEventsStream: an open stream says "approvals" when a call starts to
// wait, and "record" when its audit record is committed.
func TestEventsStream(t *testing.T) {
	r := newRig(t)
	b := r.browser(t)
	b.login(adminToken)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// As the page asks: the key in its header.
	req, _ := http.NewRequestWithContext(ctx, "GET", b.base+"/ui/api/events", nil)
	req.Header.Set("X-CSRF-Token", b.csrf)
	b.c.Timeout = 0
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	expect := func(what string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("stream ended before %q", what)
				}
				if l == what {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no %q on the stream", what)
			}
		}
	}
	id, res := pendingCall(t, r, r.browserLoggedIn(t), "review stream")
	expect("event: approvals")
	if code, body := b.post("/ui/api/approvals/"+id, b.csrf, map[string]string{"decision": "deny"}); code != 200 {
		t.Fatalf("deny: %d %s", code, body)
	}
	expect("event: record")
	if out := <-res; !strings.HasPrefix(out, "error: ") {
		t.Errorf("denied call answered %q", out)
	}
}

func (r *rig) browserLoggedIn(t *testing.T) *browser {
	b := r.browser(t)
	b.login(adminToken)
	return b
}

// TestSessionsEndOnRotation: a session, begun with the form or a login
// URL, ends when the login secret changes (its file replaced): one
// begun with a leaked secret does not keep its rights past the rotation.
func TestSessionsEndOnRotation(t *testing.T) {
	r := newRig(t)
	var secret atomic.Value
	secret.Store(adminToken)
	r.h.opts.LoginSecret = func() string { return secret.Load().(string) } // before any request
	form, link := r.browser(t), r.browser(t)
	form.login(adminToken)
	u, err := LoginURL(r.srv.URL, adminToken, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	resp := link.do("GET", strings.TrimPrefix(u, r.srv.URL), nil, nil)
	resp.Body.Close()
	link.csrf = keyOf(resp)
	var s struct{ Role string }
	for name, b := range map[string]*browser{"form": form, "link": link} {
		if code := b.getJSON("/ui/api/session", &s); code != 200 || s.Role != RoleAdmin {
			t.Fatalf("%s: session before the rotation: %d %+v", name, code, s)
		}
	}
	secret.Store("mcpbox_rotated000000000000000")
	for name, b := range map[string]*browser{"form": form, "link": link} {
		if code := b.getJSON("/ui/api/session", &s); code == 200 {
			t.Errorf("%s: the session outlived the rotation: %+v", name, s)
		}
		if code, _ := b.post("/ui/api/sandboxes/sbx_x/pause", b.csrf, nil); code != http.StatusUnauthorized && code != http.StatusForbidden {
			t.Errorf("%s: an action after the rotation: %d, want 401 or 403", name, code)
		}
	}
}

// TestTwoDashboardsOneHost: a browser logged in to two dashboards on one
// host (two serve on 127.0.0.1, other ports) keeps both sessions: cookies
// are kept per host, not per port, so each port has its own cookie name.
func TestTwoDashboardsOneHost(t *testing.T) {
	a, b := newRig(t), newRig(t)
	ba, bb := a.browser(t), b.browser(t)
	bb.c.Jar = ba.c.Jar // one browser
	ba.login(adminToken)
	bb.login(adminToken)
	var s struct{ Role string }
	for name, br := range map[string]*browser{"first": ba, "second": bb} {
		if code := br.getJSON("/ui/api/session", &s); code != 200 || s.Role != RoleAdmin {
			t.Errorf("the %s dashboard's session after both logins: %d %+v", name, code, s)
		}
	}
	// Logging out of one leaves the other.
	if code, _ := bb.post("/ui/api/logout", bb.csrf, nil); code != 200 {
		t.Fatalf("logout: %d", code)
	}
	if code := ba.getJSON("/ui/api/session", &s); code != 200 {
		t.Errorf("the first dashboard's session after the second's logout: %d", code)
	}
	if code := bb.getJSON("/ui/api/session", &s); code != http.StatusUnauthorized {
		t.Errorf("the second dashboard's session after its logout: %d", code)
	}
}

// TestLoginsLogged: a login is logged with its role and method; refused
// ones are counted and logged at most once a minute, so that whoever can
// reach the page cannot flood the log; no secret is logged.
func TestLoginsLogged(t *testing.T) {
	r := newRig(t)
	var buf bytes.Buffer
	var mu sync.Mutex
	r.h.opts.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil)) // before any request
	b := r.browser(t)
	for range 5 {
		b.login("mcpbox_wrong-token-0000000")
	}
	b.login(adminToken)
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if n := strings.Count(out, "dashboard login refused"); n != 1 || !strings.Contains(out, "refused=1") {
		t.Errorf("5 refused logins logged %d times (want once, the first):\n%s", n, out)
	}
	if !strings.Contains(out, "dashboard login") || !strings.Contains(out, "role=admin with=form") {
		t.Errorf("the admin login is not logged:\n%s", out)
	}
	if strings.Contains(out, adminToken) || strings.Contains(out, "wrong-token") {
		t.Errorf("a secret in the log:\n%s", out)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestDecisionNamesClient: a decision made in a session begun with a
// client's token (clients[].role: admin) is audited with that client's
// name, not only the role the dashboard's own secret has too.
func TestDecisionNamesClient(t *testing.T) {
	r := newRig(t)
	b := r.browser(t)
	b.login(bossToken)
	id, res := pendingCall(t, r, b, "review boss")
	if code, body := b.post("/ui/api/approvals/"+id, b.csrf, map[string]string{"decision": "deny"}); code != 200 {
		t.Fatalf("deny: %d %s", code, body)
	}
	<-res
	recs := r.records(t, "approval")
	if len(recs) != 1 || recs[0].Approver != "web:admin:boss" {
		t.Errorf("approval records %+v, want one by web:admin:boss", recs)
	}
}

// TestCookieAloneDoesNothing: the session cookie without the session's
// key, as another local user's web server on another port of 127.0.0.1
// gets it from the browser (cookies are per host, not per port), reads
// nothing and decides nothing, with the page's Origin forged too; the
// key is never served, and the call stays pending.
func TestCookieAloneDoesNothing(t *testing.T) {
	r := newRig(t)
	b := r.browserLoggedIn(t)
	id, res := pendingCall(t, r, b, "review please")
	thief := r.browser(t) // the victim's cookie, not its key
	u, _ := url.Parse(r.srv.URL + "/ui/")
	if len(b.c.Jar.Cookies(u)) == 0 {
		t.Fatal("the page has no cookie to steal")
	}
	thief.c.Jar.SetCookies(u, b.c.Jar.Cookies(u))
	for _, p := range []string{"/ui/api/session", "/ui/api/approvals", "/ui/api/calls", "/ui/api/events", "/ui/api/sandboxes/sbx_x/diff?download=1", "/ui/api/approvals?key=" + b.csrf + "x",
		// The right key, in the address rather than the header: refused, so
		// that no page puts it where history and logs keep it.
		"/ui/api/approvals?key=" + b.csrf, "/ui/api/events?key=" + b.csrf, "/ui/api/sandboxes/sbx_x/diff?download=1&key=" + b.csrf} {
		resp := thief.do("GET", p, nil, nil)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), b.csrf) {
			t.Errorf("GET %s with the cookie alone: %d %s, want 401", p, resp.StatusCode, body)
		}
	}
	if code, body := thief.post("/ui/api/approvals/"+id, "", map[string]string{"decision": "allow", "scope": "always"}); code != http.StatusUnauthorized {
		t.Errorf("a decision with the cookie alone: %d %s, want 401", code, body)
	}
	var s map[string]any
	if code := b.getJSON("/ui/api/session", &s); code != 200 || s["csrf"] != nil || s["role"] != RoleAdmin {
		t.Errorf("the page's session: %d %v, want its role and never the key", code, s)
	}
	select {
	case out := <-res:
		t.Fatalf("the call ended: %q", out)
	default:
	}
	if code, body := b.post("/ui/api/approvals/"+id, b.csrf, map[string]string{"decision": "deny"}); code != 200 {
		t.Fatalf("the page decides: %d %s", code, body)
	}
	<-res
}

// TestViewerCannotFillSessions: a viewer's token logging in again and
// again ends its own oldest sessions past maxSessionsEach; the admin
// still logs in, and the viewer's newest sessions still work.
func TestViewerCannotFillSessions(t *testing.T) {
	r := newRig(t)
	var viewers []*browser
	for range maxSessions + 10 {
		v := r.browser(t)
		if resp := v.login(viewerToken); resp.StatusCode != http.StatusSeeOther || v.csrf == "" {
			t.Fatalf("viewer login %d: %s", len(viewers), resp.Status)
		}
		viewers = append(viewers, v)
	}
	var v any
	a := r.browser(t)
	if resp := a.login(adminToken); resp.StatusCode != http.StatusSeeOther || a.getJSON("/ui/api/approvals", &v) != 200 {
		t.Fatalf("admin login after %d viewer logins: %s", len(viewers), resp.Status)
	}
	if code := viewers[len(viewers)-1].getJSON("/ui/api/approvals", &v); code != 200 {
		t.Errorf("the viewer's newest session: %d", code)
	}
	if code := viewers[len(viewers)-1-maxSessionsEach].getJSON("/ui/api/approvals", &v); code != http.StatusUnauthorized {
		t.Errorf("the viewer's session %d logins back: %d, want ended", maxSessionsEach, code)
	}
}

// TestFullSessionTableMakesRoom: in a full table, a new principal's
// login ends the oldest session of the principal holding the most.
func TestFullSessionTableMakesRoom(t *testing.T) {
	h := &Handler{sessions: map[string]*session{}}
	now := time.Now()
	add := func(key, who string, age int) {
		h.sessions[key] = &session{role: RoleViewer, who: who, expires: now.Add(-time.Duration(age) * time.Second)}
	}
	for i := range maxSessionsEach - 1 {
		add(fmt.Sprint("big", i), "big", i)
	}
	for i := 0; len(h.sessions) < maxSessions; i++ {
		add(fmt.Sprint("small", i), fmt.Sprint("small", i%15), 1000+i) // older, but fewer each
	}
	h.makeRoomFor(RoleAdmin, "")
	_, kept := h.sessions[fmt.Sprint("big", maxSessionsEach-2)]
	if len(h.sessions) != maxSessions-1 || kept {
		t.Errorf("%d sessions (want %d), big's oldest kept: %v; want it ended", len(h.sessions), maxSessions-1, kept)
	}
}

// TestViewerCannotHoldAllStreams: one login's event streams stop at
// maxStreamsEach; the admin's page still gets its stream.
func TestViewerCannotHoldAllStreams(t *testing.T) {
	r := newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(b *browser) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", b.base+"/ui/api/events", nil)
		req.Header.Set("X-CSRF-Token", b.csrf)
		c := *b.c
		c.Timeout = 0
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			resp.Body.Close()
		} else {
			t.Cleanup(func() { resp.Body.Close() })
		}
		return resp.StatusCode
	}
	v := r.browser(t)
	v.login(viewerToken)
	for i := range maxStreamsEach {
		if code := open(v); code != 200 {
			t.Fatalf("the viewer's stream %d: %d", i, code)
		}
	}
	if code := open(v); code != http.StatusServiceUnavailable {
		t.Errorf("the viewer's stream past %d: %d, want 503", maxStreamsEach, code)
	}
	if code := open(r.browserLoggedIn(t)); code != 200 {
		t.Errorf("the admin's stream beside the viewer's: %d", code)
	}
}
