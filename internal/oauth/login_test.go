package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"mcpbox/internal/tcppeer"
)

// browser returns an OpenURL that follows the authorization URL as a
// browser would (the test AS approves at once and redirects to the
// loopback listener), and counts its calls.
func browser(t *testing.T, calls *atomic.Int32) func(string) error {
	return func(u string) error {
		if calls != nil {
			calls.Add(1)
		}
		c := &http.Client{Timeout: 10 * time.Second}
		resp, err := c.Get(u)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil
	}
}

func testStore(t *testing.T) *FileStore {
	dir := t.TempDir()
	return &FileStore{Dir: filepath.Join(dir, "oauth"), Keys: KeyFile(filepath.Join(dir, "oauth.key"))}
}

func login(t *testing.T, as *testAS, rs *testRS, store Store, edit func(*LoginOptions)) (*Grant, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts := LoginOptions{Server: rs.url, OpenURL: browser(t, nil), Store: store, Wait: 10 * time.Second}
	if edit != nil {
		edit(&opts)
	}
	return Login(ctx, opts)
}

// call sends one request through a Transport for rs and returns status
// and body.
func call(t *testing.T, tr *Transport, u string) (int, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func TestLoginDiscoveryVariants(t *testing.T) {
	for _, prm := range []string{"header", "path", "root"} {
		for _, wk := range []string{"oauth", "oidc-inserted", "oidc-appended"} {
			for _, path := range []string{"", "/tenant1"} {
				if wk == "oidc-appended" && path == "" {
					continue // the same URL as oidc-inserted without a path
				}
				t.Run(prm+"/"+wk+path, func(t *testing.T) {
					as := newTestAS(t, func(a *testAS) { a.wellKnown, a.path, a.dcr = wk, path, true })
					rs := newTestRS(t, as, func(r *testRS) { r.prmAt = prm })
					store := testStore(t)
					g, err := login(t, as, rs, store, nil)
					if err != nil {
						t.Fatalf("login: %v", err)
					}
					if g.Issuer != as.issuer || g.Resource != rs.url {
						t.Errorf("grant bound to (%s, %s), want (%s, %s)", g.Issuer, g.Resource, as.issuer, rs.url)
					}
					code, body, err := call(t, &Transport{Server: rs.url, Store: store}, rs.url)
					if err != nil || code != 200 || !strings.HasPrefix(body, "hello alice") {
						t.Fatalf("call after login: %d %q %v", code, body, err)
					}
				})
			}
		}
	}
}

func TestLoginRegistration(t *testing.T) {
	// A TLS server hosts the client id metadata document; the AS fetches
	// it with a client that trusts the test certificate.
	var cimdURL string
	cimd := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc, err := ClientMetadataDocument(cimdURL, "")
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(doc)
	}))
	defer cimd.Close()
	cimdURL = cimd.URL + "/client.json"

	cases := []struct {
		name    string
		as      func(*testAS)
		opts    func(*LoginOptions)
		wantID  func(id string) bool
		wantDCR int
		wantErr error
	}{
		{name: "cimd preferred over dcr",
			as:      func(a *testAS) { a.cimd, a.dcr, a.cimdClient = true, true, cimd.Client() },
			opts:    func(o *LoginOptions) { o.ClientMetadataURL = cimdURL },
			wantID:  func(id string) bool { return id == cimdURL },
			wantDCR: 0},
		{name: "dcr when cimd not advertised",
			as:      func(a *testAS) { a.dcr = true },
			opts:    func(o *LoginOptions) { o.ClientMetadataURL = cimdURL },
			wantID:  func(id string) bool { return strings.HasPrefix(id, "dcr-") },
			wantDCR: 1},
		{name: "pre-registered public",
			as: func(a *testAS) {
				a.dcr, a.cimd, a.cimdClient = true, true, cimd.Client()
				a.clients["pre"] = testClient{method: AuthNone, redirectURIs: []string{"http://127.0.0.1/callback"}}
			},
			opts:    func(o *LoginOptions) { o.ClientID, o.ClientMetadataURL = "pre", cimdURL },
			wantID:  func(id string) bool { return id == "pre" },
			wantDCR: 0},
		{name: "pre-registered secret basic",
			as: func(a *testAS) {
				a.clients["conf"] = testClient{method: AuthSecretBasic, secret: "s3cret-basic", redirectURIs: []string{"http://127.0.0.1/callback"}}
			},
			opts:   func(o *LoginOptions) { o.ClientID, o.ClientSecret = "conf", "s3cret-basic" },
			wantID: func(id string) bool { return id == "conf" }},
		{name: "pre-registered secret post",
			as: func(a *testAS) {
				a.authMethods = []string{AuthSecretPost}
				a.clients["conf"] = testClient{method: AuthSecretPost, secret: "s3cret-post", redirectURIs: []string{"http://127.0.0.1/callback"}}
			},
			opts:   func(o *LoginOptions) { o.ClientID, o.ClientSecret = "conf", "s3cret-post" },
			wantID: func(id string) bool { return id == "conf" }},
		{name: "dcr confidential (post only)",
			as:      func(a *testAS) { a.dcr, a.authMethods = true, []string{AuthSecretPost} },
			wantID:  func(id string) bool { return strings.HasPrefix(id, "dcr-") },
			wantDCR: 1},
		{name: "no way to register",
			as:      func(a *testAS) {},
			wantErr: ErrNoRegistration},
		{name: "cimd url must be https with a path",
			as:      func(a *testAS) { a.cimd = true },
			opts:    func(o *LoginOptions) { o.ClientMetadataURL = "http://127.0.0.1/client.json" },
			wantErr: errAny},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			as := newTestAS(t, c.as)
			rs := newTestRS(t, as, nil)
			store := testStore(t)
			g, err := login(t, as, rs, store, c.opts)
			if c.wantErr != nil {
				if err == nil || (c.wantErr != errAny && !errors.Is(err, c.wantErr)) {
					t.Fatalf("login: %v, want %v", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("login: %v", err)
			}
			if got := as.lastAuthz(t).Get("client_id"); !c.wantID(got) || got != g.ClientID {
				t.Errorf("client_id %q (grant %q)", got, g.ClientID)
			}
			if as.registrations != c.wantDCR {
				t.Errorf("%d dynamic registrations, want %d", as.registrations, c.wantDCR)
			}
			if code, body, err := call(t, &Transport{Server: rs.url, Store: store}, rs.url); err != nil || code != 200 {
				t.Fatalf("call: %d %q %v", code, body, err)
			}
		})
	}
}

var errAny = errors.New("any error")

func TestLoginPKCEAndResourceIndicator(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, nil)
	if _, err := login(t, as, rs, testStore(t), nil); err != nil {
		t.Fatal(err)
	}
	authz := as.lastAuthz(t)
	tok := as.tokenRequests[len(as.tokenRequests)-1]
	sum := sha256.Sum256([]byte(tok.Get("code_verifier")))
	if authz.Get("code_challenge_method") != "S256" || authz.Get("code_challenge") != base64.RawURLEncoding.EncodeToString(sum[:]) {
		t.Errorf("PKCE: challenge %q method %q does not match the verifier", authz.Get("code_challenge"), authz.Get("code_challenge_method"))
	}
	if len(tok.Get("code_verifier")) < 43 {
		t.Errorf("verifier of %d characters, want >= 43", len(tok.Get("code_verifier")))
	}
	if authz.Get("resource") != rs.url || tok.Get("resource") != rs.url {
		t.Errorf("resource indicator: authorize %q, token %q, want %q", authz.Get("resource"), tok.Get("resource"), rs.url)
	}
	if len(authz.Get("state")) < 32 {
		t.Errorf("state %q is too short", authz.Get("state"))
	}
}

func TestLoginRefusals(t *testing.T) {
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	cases := []struct {
		name string
		as   func(*testAS)
		rs   func(*testRS)
		want error
	}{
		{"state mismatch", func(a *testAS) { a.dcr, a.tamperState = true, true }, nil, ErrStateMismatch},
		{"iss wrong", func(a *testAS) { a.dcr, a.issParam, a.sendIss = true, true, "https://evil.example" }, nil, ErrIssuerMismatch},
		{"iss wrong though not advertised", func(a *testAS) { a.dcr, a.sendIss = true, "https://evil.example" }, nil, ErrIssuerMismatch},
		{"iss advertised but missing", func(a *testAS) { a.dcr, a.omitIss = true, true }, nil, ErrIssuerMismatch},
		{"metadata issuer mismatch", func(a *testAS) { a.dcr, a.metaIssuer = true, "https://evil.example" }, nil, ErrIssuerMismatch},
		{"no PKCE", func(a *testAS) { a.dcr, a.noPKCE = true, true }, nil, ErrNoPKCE},
		{"resource mismatch", func(a *testAS) { a.dcr = true }, func(r *testRS) { r.resource = other.URL + "/mcp" }, ErrResourceMismatch},
		{"resource of a sibling path", func(a *testAS) { a.dcr = true }, func(r *testRS) { r.resource = r.srv.URL + "/mc" }, ErrResourceMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			as := newTestAS(t, c.as)
			rs := newTestRS(t, as, c.rs)
			store := testStore(t)
			_, err := login(t, as, rs, store, nil)
			if !errors.Is(err, c.want) {
				t.Fatalf("login: %v, want %v", err, c.want)
			}
			if _, err := store.Load(context.Background(), rs.url); !errors.Is(err, ErrNoToken) {
				t.Errorf("a refused login stored a grant: %v", err)
			}
			if c.want == ErrStateMismatch || c.want == ErrIssuerMismatch && as.metaIssuer == "" {
				if n := len(as.tokenRequests); n != 0 {
					t.Errorf("%d token requests after a refused redirect", n)
				}
			}
		})
	}
	t.Run("access denied", func(t *testing.T) {
		as := newTestAS(t, func(a *testAS) { a.dcr, a.deny = true, true })
		rs := newTestRS(t, as, nil)
		_, err := login(t, as, rs, testStore(t), nil)
		if err == nil || !strings.Contains(err.Error(), "access_denied") || len(as.tokenRequests) != 0 {
			t.Errorf("login: %v, %d token requests", err, len(as.tokenRequests))
		}
	})
	t.Run("iss correct", func(t *testing.T) {
		as := newTestAS(t, func(a *testAS) { a.dcr, a.issParam = true, true })
		rs := newTestRS(t, as, nil)
		if _, err := login(t, as, rs, testStore(t), nil); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLoginScopes(t *testing.T) {
	cases := []struct {
		name      string
		chScope   string
		supported []string
		explicit  []string
		want      string
		wantSet   bool
	}{
		{"from WWW-Authenticate", "mcp:read", []string{"mcp:read", "mcp:write"}, nil, "mcp:read", true},
		{"from scopes_supported", "", []string{"mcp:read", "mcp:write"}, nil, "mcp:read mcp:write", true},
		{"omitted when undefined", "", nil, nil, "", false},
		{"explicit", "mcp:read", nil, []string{"a", "b"}, "a b", true},
		{"offline_access where offered", "mcp:read", []string{"mcp:read", "offline_access"}, nil, "mcp:read offline_access", true},
		{"offline_access not doubled", "", []string{"offline_access", "mcp:read"}, nil, "offline_access mcp:read", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			as := newTestAS(t, func(a *testAS) { a.dcr, a.scopes = true, c.supported })
			rs := newTestRS(t, as, func(r *testRS) { r.chScope = c.chScope })
			if _, err := login(t, as, rs, testStore(t), func(o *LoginOptions) { o.Scopes = c.explicit }); err != nil {
				t.Fatal(err)
			}
			q := as.lastAuthz(t)
			if q.Get("scope") != c.want || q.Has("scope") != c.wantSet {
				t.Errorf("scope %q (set %v), want %q (set %v)", q.Get("scope"), q.Has("scope"), c.want, c.wantSet)
			}
		})
	}
}

func TestLoginHeadlessURLFirstAndTimeout(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, nil)
	var got string
	start := time.Now()
	_, err := login(t, as, rs, testStore(t), func(o *LoginOptions) {
		o.Wait = 300 * time.Millisecond
		o.OpenURL = func(u string) error { got = u; return nil } // nobody follows it
	})
	if !errors.Is(err, ErrLoginTimeout) {
		t.Fatalf("login: %v, want timeout", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("timed out after %v", time.Since(start))
	}
	if !strings.HasPrefix(got, as.srv.URL+"/authorize?") {
		t.Errorf("OpenURL got %q", got)
	}
	// The listener is gone after Login returns.
	redirect := authzParam(t, got, "redirect_uri")
	if _, err := (&http.Client{Timeout: 2 * time.Second}).Get(redirect); err == nil {
		t.Errorf("the redirect listener %s still answers after login returned", redirect)
	}
}

// TestLoginSilent: a silent login follows the authorization request
// itself with prompt=none, and fails at once where a person is needed.
func TestLoginSilent(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, nil)
	store := testStore(t)
	g, err := login(t, as, rs, store, func(o *LoginOptions) { o.OpenURL, o.Silent = nil, true })
	if err != nil || g.AccessToken == "" {
		t.Fatalf("silent login: %v", err)
	}
	if p := as.lastAuthz(t).Get("prompt"); p != "none" {
		t.Errorf("silent login sent prompt %q, want none", p)
	}
	if _, err := store.Load(context.Background(), rs.url); err != nil {
		t.Errorf("silent login stored nothing: %v", err)
	}
	for _, person := range []string{"page", "error"} {
		as.mu.Lock()
		as.person = person
		as.mu.Unlock()
		start := time.Now()
		_, err := login(t, as, rs, testStore(t), func(o *LoginOptions) { o.OpenURL, o.Silent = nil, true })
		if !errors.Is(err, ErrInteractionRequired) {
			t.Errorf("%s: silent login: %v, want ErrInteractionRequired", person, err)
		}
		if time.Since(start) > 5*time.Second {
			t.Errorf("%s: failed after %v, want at once", person, time.Since(start))
		}
	}
}

func authzParam(t *testing.T, u, k string) string {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req.URL.Query().Get(k)
}

func TestCallbackOneShot(t *testing.T) {
	cb, err := listenCallback(0, "y", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.close()
	c := &http.Client{Timeout: 5 * time.Second}
	for i, want := range []int{200, 410} {
		resp, err := c.Get(cb.redirectURI + "?code=x&state=y")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("request %d: status %d, want %d", i, resp.StatusCode, want)
		}
	}
	if !strings.HasPrefix(cb.redirectURI, "http://127.0.0.1:") {
		t.Errorf("redirect %q is not on 127.0.0.1", cb.redirectURI)
	}
}

// TestCallbackRefusesAnotherUser: a redirect to the loopback listener
// from another user's process (who read the port and state on
// xdg-open's command line) is refused and does not end the login: the
// user's browser's redirect is the one taken.
func TestCallbackRefusesAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot run a process of another uid")
	}
	cb, err := listenCallback(0, "s", tcppeer.SameUser)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.close()
	hostPort := strings.TrimPrefix(strings.TrimSuffix(cb.redirectURI, callbackPath), "http://")
	host, port, _ := net.SplitHostPort(hostPort)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := "GET " + callbackPath + "?code=theirs&state=stolen HTTP/1.0\r\nHost: " + hostPort + "\r\n\r\n"
	cmd := exec.CommandContext(ctx, "bash", "-c", `exec 3<>"/dev/tcp/$1/$2"; printf '%s' "$3" >&3; cat <&3`, "bash", host, port, req)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.Output(); err != nil || !strings.HasPrefix(string(out), "HTTP/1.0 403") {
		t.Fatalf("a redirect from uid 65534: %v\n%s\nwant 403", err, out)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(cb.redirectURI + "?code=mine&state=s")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the user's redirect after the refused one: %s", resp.Status)
	}
	if got := (<-cb.got).Get("code"); got != "mine" {
		t.Errorf("the login got code %q, want the user's", got)
	}
}

// TestCallbackRefusesForgedState: a redirect with another state (a page
// in the user's browser can send one to the loopback port) gets 400 and
// does not end the login: the genuine redirect after it is taken. A
// login that gets only forged ones ends at its wait, saying so.
func TestCallbackRefusesForgedState(t *testing.T) {
	cb, err := listenCallback(0, "the-state", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.close()
	hc := &http.Client{Timeout: 5 * time.Second}
	for _, q := range []string{"?code=theirs&state=wrong", "?code=theirs", "?code=theirs&state=the-stat"} {
		resp, err := hc.Get(cb.redirectURI + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("forged redirect %s: %s, want 400", q, resp.Status)
		}
	}
	sm := &ServerMetadata{Issuer: "https://as"}
	if _, err := cb.await(context.Background(), 100*time.Millisecond, sm); !errors.Is(err, ErrLoginTimeout) || !errors.Is(err, ErrStateMismatch) {
		t.Errorf("await after forged redirects only: %v, want a timeout that names them", err)
	}
	resp, err := hc.Get(cb.redirectURI + "?code=mine&state=the-state")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the genuine redirect after the forged ones: %s", resp.Status)
	}
	if code, err := cb.await(context.Background(), 5*time.Second, sm); err != nil || code != "mine" {
		t.Errorf("await: %q, %v; want the genuine code", code, err)
	}
}

// TestCallbackDropsSlowRequests: a local process that sends a redirect
// and then its body a byte at a time, or nothing at all, loses its
// connection at the deadline rather than holding it for the login.
func TestCallbackDropsSlowRequests(t *testing.T) {
	defer func(d time.Duration) { callbackDeadline = d }(callbackDeadline)
	callbackDeadline = 300 * time.Millisecond
	cb, err := listenCallback(0, "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.close()
	addr := strings.TrimPrefix(strings.TrimSuffix(cb.redirectURI, callbackPath), "http://")
	for name, req := range map[string]string{
		"body":    "POST " + callbackPath + "?state=wrong HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 100000\r\n\r\nab",
		"headers": "GET " + callbackPath + "?state=wrong HTTP/1.1\r\nHost: " + addr + "\r\nX-Slow: ",
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, req); err != nil {
				t.Fatal(err)
			}
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			start := time.Now()
			done := make(chan error, 1)
			go func() { _, err := io.Copy(io.Discard, conn); done <- err }()
			for {
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("the connection was not closed by the listener: %v after %v", err, time.Since(start))
					}
					return
				case <-time.After(50 * time.Millisecond):
					io.WriteString(conn, "x") // a byte at a time; fails once closed
				}
			}
		})
	}
}

func TestGrantFormattingHidesSecrets(t *testing.T) {
	g := &Grant{Issuer: "https://as", Resource: "https://rs", ClientID: "c", AccessToken: "AT-SECRET", RefreshToken: "RT-SECRET", ClientSecret: "CS-SECRET"}
	if s := g.Secrets(); len(s) != 3 {
		t.Errorf("secrets %d, want 3", len(s))
	}
	for _, s := range []string{
		strings.Join([]string{g.String(), g.GoString()}, " "),
		sprintf("%v %+v %#v %s", g, g, g, g),
	} {
		if strings.Contains(s, "SECRET") {
			t.Errorf("formatting shows a secret: %s", s)
		}
	}
}

func sprintf(f string, a ...any) string { return fmt.Sprintf(f, a...) }

func TestLoginResourceIsPrefixOfServer(t *testing.T) {
	// The metadata names the origin as the resource; the server URL has a
	// path. The grant is stored under the server URL and bound to the
	// origin resource, which is also what the token's audience says.
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, func(r *testRS) { r.resource = r.srv.URL })
	store := testStore(t)
	g, err := login(t, as, rs, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.Server != rs.url || g.Resource != rs.srv.URL || as.lastAuthz(t).Get("resource") != rs.srv.URL {
		t.Errorf("grant server %q resource %q, authorize resource %q", g.Server, g.Resource, as.lastAuthz(t).Get("resource"))
	}
	if code, body, err := call(t, &Transport{Server: rs.url, Store: store}, rs.url); err != nil || code != 200 {
		t.Fatalf("call: %d %q %v", code, body, err)
	}
}

func TestLoginIssuerPin(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, nil)
	if _, err := login(t, as, rs, testStore(t), func(o *LoginOptions) { o.Issuer = "https://trusted.example" }); !errors.Is(err, ErrIssuerMismatch) {
		t.Errorf("login with another pinned issuer: %v, want ErrIssuerMismatch", err)
	}
	if _, err := login(t, as, rs, testStore(t), func(o *LoginOptions) { o.Issuer = as.issuer }); err != nil {
		t.Errorf("login with the pinned issuer: %v", err)
	}
}

func TestClientMetadataDocument(t *testing.T) {
	for _, bad := range []string{"http://example.com/c.json", "https://example.com", "https://example.com/", "https://example.com/c#x", ":"} {
		if _, err := ClientMetadataDocument(bad, ""); err == nil {
			t.Errorf("%q accepted as a client id", bad)
		}
	}
	b, err := ClientMetadataDocument("https://example.com/mcpbox.json", "")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		ClientID     string   `json:"client_id"`
		RedirectURIs []string `json:"redirect_uris"`
		Method       string   `json:"token_endpoint_auth_method"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.ClientID != "https://example.com/mcpbox.json" ||
		len(doc.RedirectURIs) != 1 || doc.RedirectURIs[0] != "http://127.0.0.1/callback" || doc.Method != "none" {
		t.Errorf("document %s %v", b, err)
	}
}

func TestLoginLegacyServer(t *testing.T) {
	// A 2025-03-26 server: no resource metadata; the authorization server
	// is the server's origin, with metadata or with the default endpoints.
	for _, noMeta := range []bool{false, true} {
		t.Run(fmt.Sprintf("no-metadata=%v", noMeta), func(t *testing.T) {
			as := newTestAS(t, func(a *testAS) { a.dcr, a.mcp, a.noMetadata = true, true, noMeta })
			server := as.srv.URL + "/mcp"
			store := testStore(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			g, err := Login(ctx, LoginOptions{Server: server, OpenURL: browser(t, nil), Store: store, Wait: 10 * time.Second})
			if err != nil {
				t.Fatalf("login: %v", err)
			}
			if g.Issuer != as.srv.URL || g.Resource != server || as.lastAuthz(t).Get("resource") != server {
				t.Errorf("grant issuer %q resource %q", g.Issuer, g.Resource)
			}
			if as.registrations != 1 {
				t.Errorf("%d registrations at the default /register, want 1", as.registrations)
			}
			if code, body, err := call(t, &Transport{Server: server, Store: store}, server); err != nil || code != 200 || body != "hello alice" {
				t.Fatalf("call: %d %q %v", code, body, err)
			}
		})
	}
	t.Run("pinned issuer elsewhere", func(t *testing.T) {
		as := newTestAS(t, func(a *testAS) { a.dcr, a.mcp = true, true })
		_, err := login(t, as, &testRS{url: as.srv.URL + "/mcp"}, testStore(t), func(o *LoginOptions) { o.Issuer = "https://as.example" })
		if !errors.Is(err, ErrIssuerMismatch) {
			t.Errorf("login: %v, want ErrIssuerMismatch", err)
		}
	})
	t.Run("metadata server error is not a fallback", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/.well-known/oauth-protected-resource") {
				http.Error(w, "down", http.StatusInternalServerError)
				return
			}
			http.NotFound(w, r)
		}))
		defer srv.Close()
		_, err := login(t, nil, &testRS{url: srv.URL + "/mcp"}, testStore(t), nil)
		if err == nil || !strings.Contains(err.Error(), "status 500") {
			t.Errorf("login: %v, want the 500 reported", err)
		}
	})
}

func TestDowngradeRefused(t *testing.T) {
	ctx := context.Background()
	// Metadata that points an endpoint at plain http off loopback.
	for _, field := range []string{"token_endpoint", "authorization_endpoint", "registration_endpoint", "revocation_endpoint", "jwks_uri"} {
		t.Run(field, func(t *testing.T) {
			var issuer string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				m := map[string]any{
					"issuer": issuer, "authorization_endpoint": issuer + "/authorize", "token_endpoint": issuer + "/token",
					"code_challenge_methods_supported": []string{"S256"},
				}
				m[field] = "http://as.example/" + field
				writeJSON(w, 200, m)
			}))
			defer srv.Close()
			issuer = srv.URL
			if _, err := DiscoverServer(ctx, nil, issuer); err == nil || !strings.Contains(err.Error(), field) {
				t.Errorf("metadata with an http %s: %v", field, err)
			}
		})
	}
	t.Run("resource metadata names an http authorization server", func(t *testing.T) {
		var self string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 200, map[string]any{"resource": self + "/mcp", "authorization_servers": []string{"http://as.example"}})
		}))
		defer srv.Close()
		self = srv.URL
		if _, err := Discover(ctx, nil, srv.URL+"/mcp", Challenge{}); err == nil || !strings.Contains(err.Error(), "only https") {
			t.Errorf("discover: %v", err)
		}
	})
	t.Run("https metadata redirecting to http", func(t *testing.T) {
		var hits atomic.Int32
		plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
		defer plain.Close()
		tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, strings.Replace(plain.URL, "127.0.0.1", "as.example", 1)+r.URL.Path, http.StatusFound)
		}))
		defer tls.Close()
		if _, err := DiscoverServer(ctx, tls.Client(), tls.URL); err == nil || !strings.Contains(err.Error(), "redirect refused") {
			t.Errorf("discover through a downgrade redirect: %v", err)
		}
	})
	t.Run("https metadata redirecting to loopback http", func(t *testing.T) {
		var hits atomic.Int32
		plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
		defer plain.Close()
		tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, plain.URL+r.URL.Path, http.StatusFound)
		}))
		defer tls.Close()
		if _, err := DiscoverServer(ctx, tls.Client(), tls.URL); err == nil || !strings.Contains(err.Error(), "drops TLS") {
			t.Errorf("discover through a downgrade redirect: %v", err)
		}
		if hits.Load() != 0 {
			t.Errorf("the plain http server got %d requests", hits.Load())
		}
	})
	t.Run("server URL", func(t *testing.T) {
		if _, err := Login(ctx, LoginOptions{Server: "http://mcp.example/mcp", OpenURL: func(string) error { return nil }}); err == nil {
			t.Error("login to a plain-http remote server")
		}
	})
}

func TestRemoteDocumentsCannotPointIntoLoopback(t *testing.T) {
	if _, err := resourceMetadataURLs("https://mcp.example/mcp", Challenge{ResourceMetadata: "http://127.0.0.1:9/x"}); err == nil {
		t.Error("a remote server's challenge sent discovery to loopback")
	}
	if _, err := resourceMetadataURLs("http://127.0.0.1:1/mcp", Challenge{ResourceMetadata: "http://127.0.0.1:9/x"}); err != nil {
		t.Errorf("a loopback server's own loopback metadata: %v", err)
	}
	sm := ServerMetadata{Issuer: "https://as.example", AuthorizationEndpoint: "https://as.example/a",
		TokenEndpoint: "http://localhost:8080/token", CodeChallengeMethodsSupported: []string{"S256"}}
	if err := sm.check(); err == nil || !strings.Contains(err.Error(), "token_endpoint") {
		t.Errorf("a remote issuer's loopback token endpoint: %v", err)
	}
	sm.TokenEndpoint = "https://as.example/t"
	if err := sm.check(); err != nil {
		t.Errorf("metadata: %v", err)
	}
}

func TestRedirectRules(t *testing.T) {
	check := orDefault(nil, "https://as.example").CheckRedirect
	req := func(u string) *http.Request { r, _ := http.NewRequest("GET", u, nil); return r }
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{"https://as.example/a", "https://as2.example/b", true},
		{"http://127.0.0.1:1/a", "http://localhost:2/b", true},
		{"https://as.example/a", "http://127.0.0.1:8080/admin", false}, // downgrade and into loopback
		{"https://as.example/a", "https://127.0.0.1:8443/admin", false},
		{"https://as.example/a", "http://as.example/b", false},
		{"https://as.example/a", "file:///etc/passwd", false},
		{"http://127.0.0.1:1/a", "https://as.example/b", true},
	} {
		err := check(req(c.to), []*http.Request{req(c.from)})
		if (err == nil) != c.ok {
			t.Errorf("%s → %s: %v, want ok=%v", c.from, c.to, err, c.ok)
		}
	}
	var many []*http.Request
	for range 5 {
		many = append(many, req("https://as.example/"))
	}
	if check(req("https://as.example/x"), many) == nil {
		t.Error("a sixth redirect was followed")
	}
}

// A store whose key cannot be had fails the login before anyone is sent
// to authorize: after it, the tokens issued would be thrown away.
func TestLoginChecksStoreKeyFirst(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, nil)
	store := &FileStore{Dir: t.TempDir(), Keys: KeyFunc(func(context.Context) ([]byte, error) {
		return nil, errors.New("MCPBOX_OAUTH_KEY is shorter than 8 bytes")
	})}
	opened := false
	_, err := Login(context.Background(), LoginOptions{Server: rs.url, Store: store, Wait: time.Second,
		OpenURL: func(string) error { opened = true; return nil }})
	if err == nil || !strings.Contains(err.Error(), "token store") || !strings.Contains(err.Error(), "shorter than 8 bytes") {
		t.Errorf("login: %v, want the store's key error", err)
	}
	if opened {
		t.Error("the authorization URL was opened")
	}
}

// A silent login at the authorization server of the login it renews
// uses that login's client and redirect again, instead of registering
// a client (with no consent to renew) each time; with the redirect's
// port taken it registers one of its own.
func TestLoginSilentReusesClient(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, nil)
	store := testStore(t)
	first, err := login(t, as, rs, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	silent := func(o *LoginOptions) { o.OpenURL, o.Silent = nil, true }
	for range 2 {
		g, err := login(t, as, rs, store, silent)
		if err != nil {
			t.Fatalf("silent login: %v", err)
		}
		if g.ClientID != first.ClientID || g.RedirectURI != first.RedirectURI || as.lastAuthz(t).Get("client_id") != first.ClientID {
			t.Errorf("silent login as client %q on %q, want the login's %q on %q", g.ClientID, g.RedirectURI, first.ClientID, first.RedirectURI)
		}
	}
	as.mu.Lock()
	n := as.registrations
	as.mu.Unlock()
	if n != 1 {
		t.Errorf("%d registrations for a login and two silent renewals, want 1", n)
	}

	u, _ := url.Parse(first.RedirectURI)
	ln, err := net.Listen("tcp4", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	g, err := login(t, as, rs, store, silent)
	if err != nil || g.ClientID == first.ClientID || g.RedirectURI == first.RedirectURI {
		t.Errorf("silent login with the redirect's port taken: %v, client %q on %q", err, g.ClientID, g.RedirectURI)
	}
}
