package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// loginFor returns an Authorize hook that runs Login headlessly.
func loginFor(t *testing.T, rs *testRS, store Store, calls *atomic.Int32) AuthorizeFunc {
	return func(ctx context.Context, ch Challenge, step bool) error {
		calls.Add(1)
		_, err := Login(ctx, LoginOptions{Server: rs.url, Challenge: ch, OpenURL: browser(t, nil), Store: store, Wait: 10 * time.Second})
		return err
	}
}

func TestTransportAuthorizesOn401(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, func(r *testRS) { r.chScope = "mcp:read" })
	store := testStore(t)

	// No Authorize hook: a clear error, no loop.
	_, _, err := call(t, &Transport{Server: rs.url, Store: store}, rs.url)
	var are *AuthRequiredError
	if !errors.As(err, &are) || are.StepUp || are.Challenge.Scope != "mcp:read" {
		t.Fatalf("call without login: %v, want AuthRequiredError with scope", err)
	}
	if !strings.Contains(err.Error(), rs.url) {
		t.Errorf("error %q does not name the server", err)
	}

	var n atomic.Int32
	tr := &Transport{Server: rs.url, Store: store, Authorize: loginFor(t, rs, store, &n)}
	code, body, err := call(t, tr, rs.url)
	if err != nil || code != 200 {
		t.Fatalf("call: %d %q %v", code, body, err)
	}
	if n.Load() != 1 || as.lastAuthz(t).Get("scope") != "mcp:read" {
		t.Errorf("authorize ran %d times with scope %q", n.Load(), as.lastAuthz(t).Get("scope"))
	}
	// The next call uses the stored token.
	if code, _, err := call(t, tr, rs.url); err != nil || code != 200 || n.Load() != 1 {
		t.Errorf("second call: %d %v, authorize ran %d times", code, err, n.Load())
	}
}

func TestTransportStepUp(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, func(r *testRS) { r.chScope = "mcp:read" })
	store := testStore(t)
	if _, err := login(t, as, rs, store, nil); err != nil {
		t.Fatal(err)
	}
	rs.setNeedScope("mcp:write") // the 403 names only the missing scope

	_, _, err := call(t, &Transport{Server: rs.url, Store: store}, rs.url)
	var are *AuthRequiredError
	if !errors.As(err, &are) || !are.StepUp {
		t.Fatalf("call needing more scope without a hook: %v, want step-up AuthRequiredError", err)
	}

	var n atomic.Int32
	tr := &Transport{Server: rs.url, Store: store, Authorize: loginFor(t, rs, store, &n)}
	code, body, err := call(t, tr, rs.url)
	if err != nil || code != 200 || !strings.Contains(body, "mcp:write") {
		t.Fatalf("step-up call: %d %q %v", code, body, err)
	}
	got := strings.Fields(as.lastAuthz(t).Get("scope"))
	if len(got) != 2 || got[0] != "mcp:read" || got[1] != "mcp:write" {
		t.Errorf("step-up asked for scope %q, want the held and the new scope", got)
	}
}

func TestTransportStepUpRetriesOnce(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, nil)
	store := testStore(t)
	if _, err := login(t, as, rs, store, nil); err != nil {
		t.Fatal(err)
	}
	rs.setNeedScope("admin")
	var n atomic.Int32
	// A hook that "succeeds" without getting the scope: the server keeps
	// answering 403, and the transport must give up after one retry.
	tr := &Transport{Server: rs.url, Store: store, Authorize: func(context.Context, Challenge, bool) error { n.Add(1); return nil }}
	code, _, err := call(t, tr, rs.url)
	if err != nil || code != http.StatusForbidden {
		t.Fatalf("call: %d %v, want the 403 passed on", code, err)
	}
	rs.mu.Lock()
	seen := len(rs.seen)
	rs.mu.Unlock()
	if n.Load() != 1 || seen != 3 { // login's probe, the call, one retry
		t.Errorf("authorize ran %d times, server saw %d requests", n.Load(), seen)
	}
}

func TestTransportRefresh(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, nil)
	store := testStore(t)
	g0, err := login(t, as, rs, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	t.Run("before expiry", func(t *testing.T) {
		// A clock an hour ahead: the token is due; the transport refreshes
		// before sending.
		tr := &Transport{Server: rs.url, Store: store, Now: func() time.Time { return time.Now().Add(time.Hour) }}
		if code, body, err := call(t, tr, rs.url); err != nil || code != 200 {
			t.Fatalf("call: %d %q %v", code, body, err)
		}
		g1, err := store.Load(ctx, rs.url)
		if err != nil {
			t.Fatal(err)
		}
		if g1.AccessToken == g0.AccessToken || g1.RefreshToken == g0.RefreshToken {
			t.Error("the stored grant was not refreshed (or the rotated refresh token not kept)")
		}
		last := as.tokenRequests[len(as.tokenRequests)-1]
		if last.Get("grant_type") != "refresh_token" || last.Get("resource") != rs.url {
			t.Errorf("refresh request %v", last)
		}
	})

	t.Run("on 401 with a stored token", func(t *testing.T) {
		g, _ := store.Load(ctx, rs.url)
		g.AccessToken = "revoked-or-garbage" // the server refuses it
		if err := store.Save(ctx, g); err != nil {
			t.Fatal(err)
		}
		if code, body, err := call(t, &Transport{Server: rs.url, Store: store}, rs.url); err != nil || code != 200 {
			t.Fatalf("call: %d %q %v", code, body, err)
		}
	})

	t.Run("refresh refused: error without the token", func(t *testing.T) {
		g, _ := store.Load(ctx, rs.url)
		g.RefreshToken = "rt-UNKNOWN-SECRET-VALUE"
		store.Save(ctx, g)
		tr := &Transport{Server: rs.url, Store: store, Now: func() time.Time { return time.Now().Add(time.Hour) }}
		_, _, err := call(t, tr, rs.url)
		if err == nil || !strings.Contains(err.Error(), "invalid_grant") {
			t.Fatalf("call: %v, want the server's invalid_grant", err)
		}
		if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), g.AccessToken) {
			t.Errorf("error carries a token: %v", err)
		}
		// The dead refresh token is dropped: the grant no longer reads as
		// refreshable (mcpbox login --status said "refreshed at next use").
		if g2, err := store.Load(ctx, rs.url); err != nil || g2.RefreshToken != "" || g2.AccessToken != g.AccessToken {
			t.Errorf("after invalid_grant the store holds refresh token %q, access token kept %v (%v)", g2.RefreshToken, g2.AccessToken == g.AccessToken, err)
		}
	})
}

func TestTransportBearerOnlyForItsServer(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, nil)
	store := testStore(t)
	if _, err := login(t, as, rs, store, nil); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var leaked []string
	spy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	defer spy.Close()
	// The same host with another path, via a handler on the RS mux: use a
	// path the RS answers 404 for; the header is recorded by a wrapper.
	tr := &Transport{Server: rs.url, Store: store}
	for _, u := range []string{spy.URL + "/mcp", strings.Replace(rs.url, "127.0.0.1", "localhost", 1), rs.srv.URL + "/mcpx", rs.srv.URL + "/other"} {
		req, _ := http.NewRequest("GET", u, nil)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			if resp.Request != nil && resp.Request.Header.Get("Authorization") != "" {
				t.Errorf("%s: request carried a token", u)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, h := range leaked {
		if h != "" {
			t.Errorf("another server received Authorization %q", h[:min(len(h), 12)])
		}
	}
	if len(leaked) != 1 {
		t.Errorf("spy saw %d requests, want 1", len(leaked))
	}
	// Under the server's path it is sent.
	if !tr.covers(mustURL(t, rs.url+"/sub")) || !tr.covers(mustURL(t, rs.url+"?x=1")) {
		t.Error("paths under the server are not covered")
	}
}

func TestTransportGrantBoundToServer(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, nil)
	store := testStore(t)
	g, err := login(t, as, rs, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The grant saved under another server's name (as if a second
	// server's entry pointed at it) is refused by that server's
	// transport: its resource does not cover that server.
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	g2 := *g
	g2.Server = other.URL + "/mcp"
	if err := store.Save(context.Background(), &g2); err != nil {
		t.Fatal(err)
	}
	tr := &Transport{Server: other.URL + "/mcp", Store: store}
	if _, _, err := call(t, tr, other.URL+"/mcp"); !errors.Is(err, ErrTokenCorrupt) {
		t.Errorf("a grant for resource %s was used for %s: %v", rs.url, other.URL, err)
	}
}

func TestLogoutRevokes(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr, a.revocation = true, true })
	rs := newTestRS(t, as, nil)
	store := testStore(t)
	g, err := login(t, as, rs, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	revoked, err := Logout(context.Background(), nil, store, rs.url)
	if err != nil || !revoked {
		t.Fatalf("logout: revoked=%v %v", revoked, err)
	}
	as.mu.Lock()
	got := append([]string(nil), as.revoked...)
	as.mu.Unlock()
	if len(got) != 2 || got[0] != g.RefreshToken || got[1] != g.AccessToken {
		t.Errorf("revoked %d tokens, want the refresh and the access token", len(got))
	}
	if _, err := store.Load(context.Background(), rs.url); !errors.Is(err, ErrNoToken) {
		t.Errorf("grant still stored after logout: %v", err)
	}
	// The refresh token no longer works at the server.
	if err := Refresh(context.Background(), nil, g); err == nil {
		t.Error("a revoked refresh token still refreshes")
	}
	if _, err := Logout(context.Background(), nil, store, rs.url); !errors.Is(err, ErrNoToken) {
		t.Errorf("second logout: %v, want ErrNoToken", err)
	}

	t.Run("no revocation endpoint", func(t *testing.T) {
		as := newTestAS(t, func(a *testAS) { a.dcr = true })
		rs := newTestRS(t, as, nil)
		store := testStore(t)
		if _, err := login(t, as, rs, store, nil); err != nil {
			t.Fatal(err)
		}
		revoked, err := Logout(context.Background(), nil, store, rs.url)
		if err != nil || revoked {
			t.Errorf("logout: revoked=%v %v, want deleted without revocation", revoked, err)
		}
	})
}

// TestLogoutKeepsUnreadableGrant: a grant that cannot be read for now
// (its store's key unreadable) is kept and nothing is revoked, so that
// a logout once the key is back revokes it; a corrupt one is deleted.
func TestLogoutKeepsUnreadableGrant(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr, a.revocation = true, true })
	rs := newTestRS(t, as, nil)
	store := testStore(t)
	if _, err := login(t, as, rs, store, nil); err != nil {
		t.Fatal(err)
	}
	keys := store.Keys
	store.Keys = KeyFunc(func(context.Context) ([]byte, error) { return nil, errors.New("key file: permission denied") })
	if _, err := Logout(context.Background(), nil, store, rs.url); !errors.Is(err, ErrTokenKept) || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("logout with the key unreadable: %v, want ErrTokenKept naming the cause", err)
	}
	store.Keys = keys
	if _, err := store.Load(context.Background(), rs.url); err != nil {
		t.Fatalf("the grant after that logout: %v, want it kept", err)
	}
	if revoked, err := Logout(context.Background(), nil, store, rs.url); err != nil || !revoked {
		t.Fatalf("logout with the key back: revoked=%v %v", revoked, err)
	}

	// A grant sealed under another key can never be read: deleted.
	if _, err := login(t, as, rs, store, nil); err != nil {
		t.Fatal(err)
	}
	store.Keys = KeyFunc(func(context.Context) ([]byte, error) { return make([]byte, 32), nil })
	if _, err := Logout(context.Background(), nil, store, rs.url); !errors.Is(err, ErrTokenCorrupt) {
		t.Fatalf("logout of a grant under another key: %v, want ErrTokenCorrupt", err)
	}
	if _, err := store.Load(context.Background(), rs.url); !errors.Is(err, ErrNoToken) {
		t.Errorf("the corrupt grant after logout: %v, want it deleted", err)
	}
}

func TestTransportReauthorizesWhenRefreshRefused(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, nil)
	store := testStore(t)
	if _, err := login(t, as, rs, store, nil); err != nil {
		t.Fatal(err)
	}
	g, _ := store.Load(context.Background(), rs.url)
	g.RefreshToken = "rt-revoked"
	g.Expiry = time.Now().Add(-time.Hour)
	store.Save(context.Background(), g)
	var n atomic.Int32
	tr := &Transport{Server: rs.url, Store: store, Authorize: loginFor(t, rs, store, &n)}
	if code, body, err := call(t, tr, rs.url); err != nil || code != 200 || n.Load() != 1 {
		t.Fatalf("call: %d %q %v, authorize ran %d times", code, body, err, n.Load())
	}
}

func TestServerErrorTextScrubbed(t *testing.T) {
	// A server that echoes the request into its error description.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		oauthErr(w, 400, "invalid_grant", "bad token "+r.PostForm.Get("refresh_token")+" for client secret "+r.PostForm.Get("client_secret"))
	}))
	defer srv.Close()
	g := &Grant{Server: srv.URL, Resource: srv.URL, ClientID: "c", ClientSecret: "CLIENT-SECRET-XYZ", AuthMethod: AuthSecretPost,
		TokenEndpoint: srv.URL + "/token", RefreshToken: "REFRESH-SECRET-XYZ"}
	err := Refresh(context.Background(), nil, g)
	if err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("refresh: %v", err)
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("error carries a secret: %v", err)
	}
}

func TestTransportConcurrentRefreshOnce(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, nil)
	store := testStore(t)
	if _, err := login(t, as, rs, store, nil); err != nil {
		t.Fatal(err)
	}
	as.mu.Lock()
	as.expiresIn = 7200 // the refreshed token is not due on the shifted clock
	before := as.tokensIssued
	as.mu.Unlock()
	// 59.5 minutes ahead: the login's one-hour token is within the margin.
	tr := &Transport{Server: rs.url, Store: store, Now: func() time.Time { return time.Now().Add(59*time.Minute + 30*time.Second) }}
	trs := make([]*Transport, 8)
	for i := range trs {
		trs[i] = tr // one transport, eight requests at once
	}
	callAll(t, rs.url, trs)
	as.mu.Lock()
	defer as.mu.Unlock()
	if n := as.tokensIssued - before; n != 1 {
		t.Errorf("%d refreshes for 8 concurrent calls, want 1", n)
	}
}

// callAll sends a request to url through each transport at once, and
// fails t for each that does not get 200.
func callAll(t *testing.T, url string, trs []*Transport) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(trs))
	for _, tr := range trs {
		wg.Go(func() {
			if code, body, err := call(t, tr, url); err != nil || code != 200 {
				errs <- fmt.Errorf("call: %d %q %v", code, body, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Connections of several processes (each its own Transport and
// FileStore on one dir) share one grant whose refresh token rotates: one
// refreshes, the others wait for it and take its token. Each refreshed
// with the refresh token it had loaded before, and all but one were
// refused (invalid_grant).
func TestTransportsOfManyProcessesRefreshOnce(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, nil)
	store := testStore(t)
	if _, err := login(t, as, rs, store, nil); err != nil {
		t.Fatal(err)
	}
	as.mu.Lock()
	as.expiresIn = 7200 // the refreshed token is not due on the shifted clock
	before := as.tokensIssued
	as.mu.Unlock()
	ahead := func() time.Time { return time.Now().Add(59*time.Minute + 30*time.Second) }
	trs := make([]*Transport, 8)
	for i := range trs {
		trs[i] = &Transport{Server: rs.url, Store: &FileStore{Dir: store.Dir, Keys: store.Keys}, Now: ahead}
	}
	callAll(t, rs.url, trs)
	as.mu.Lock()
	defer as.mu.Unlock()
	if n := as.tokensIssued - before; n != 1 {
		t.Errorf("%d refreshes for 8 connections, want 1", n)
	}
}

// Connections refused together (a revoked token, no refresh token) log
// in once: the others take the grant the first one left.
func TestTransportsAuthorizeOnce(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, nil)
	store := testStore(t)
	if _, err := login(t, as, rs, store, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	g, _ := store.Load(ctx, rs.url)
	g.AccessToken, g.RefreshToken = "revoked", ""
	if err := store.Save(ctx, g); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	trs := make([]*Transport, 6)
	for i := range trs {
		s := &FileStore{Dir: store.Dir, Keys: store.Keys}
		trs[i] = &Transport{Server: rs.url, Store: s, Authorize: loginFor(t, rs, s, &n)}
	}
	callAll(t, rs.url, trs)
	if n.Load() != 1 {
		t.Errorf("authorized %d times for 6 connections refused together, want 1", n.Load())
	}
}

// A token of a minute or less: without a refresh token it is sent until
// it expires (it was taken for expired a minute early, so a login could
// never be used), and with one it is not refreshed on every request.
func TestTransportShortLivedToken(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true; a.expiresIn = 45 })
	rs := newTestRS(t, as, nil)
	store := testStore(t)
	if _, err := login(t, as, rs, store, nil); err != nil {
		t.Fatal(err)
	}
	as.mu.Lock()
	before := as.tokensIssued
	as.mu.Unlock()
	tr := &Transport{Server: rs.url, Store: store}
	for range 3 {
		if code, body, err := call(t, tr, rs.url); err != nil || code != 200 {
			t.Fatalf("call with a refresh token: %d %q %v", code, body, err)
		}
	}
	as.mu.Lock()
	if n := as.tokensIssued - before; n != 0 {
		t.Errorf("%d refreshes of a fresh 45 s token in 3 calls, want 0", n)
	}
	as.mu.Unlock()

	ctx := context.Background()
	g, _ := store.Load(ctx, rs.url)
	g.RefreshToken = ""
	if err := store.Save(ctx, g); err != nil {
		t.Fatal(err)
	}
	if code, body, err := call(t, tr, rs.url); err != nil || code != 200 {
		t.Fatalf("call without a refresh token: %d %q %v", code, body, err)
	}
	// Past its expiry it is not sent.
	late := &Transport{Server: rs.url, Store: store, Now: func() time.Time { return time.Now().Add(time.Minute) }}
	if _, _, err := call(t, late, rs.url); !errors.Is(err, ErrNoToken) {
		t.Errorf("call with an expired token: %v, want ErrNoToken", err)
	}
}

// An authorization server's error text is printed quoted, with escapes,
// when it holds what does not show as itself: a terminal escape, a line
// break forging a line of mcpbox's own, a bidi control.
func TestServerErrorTextShownHarmless(t *testing.T) {
	for _, tc := range []struct{ code, desc, want string }{
		{"access_denied", "the user said no", "authorization endpoint answered 302 access_denied: the user said no"},
		{"access_denied", "\x1b[31mFAKE\nmcpbox: logged in", `authorization endpoint answered 302 access_denied: "\x1b[31mFAKE\nmcpbox: logged in"`},
		{"x\u202eyz", "ok", `authorization endpoint answered 302 "x\u202eyz": ok`},
	} {
		e := &oauthError{Endpoint: "authorization endpoint", Status: 302, Code: tc.code, Description: tc.desc}
		if got := e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

// A refresh refused while the stored access token has not expired (but
// the server refuses it too): the token is no answer, and the transport
// authorizes anew instead of sending it again.
func TestTransportRefusedRefreshAuthorizes(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true })
	rs := newTestRS(t, as, nil)
	store := testStore(t)
	if _, err := login(t, as, rs, store, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	g, _ := store.Load(ctx, rs.url)
	g.AccessToken, g.RefreshToken = "revoked-access", "rt-revoked"
	g.Expiry, g.Issued = time.Now().Add(30*time.Second), time.Time{}
	if err := store.Save(ctx, g); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	tr := &Transport{Server: rs.url, Store: store, Authorize: loginFor(t, rs, store, &n)}
	if code, body, err := call(t, tr, rs.url); err != nil || code != 200 || n.Load() != 1 {
		t.Errorf("call: %d %q %v, authorize ran %d times, want 200 after one", code, body, err, n.Load())
	}
}

// heldTokens holds the answer to each token request, which the server
// has seen, until release is closed, telling held when one has come.
type heldTokens struct {
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

func (h *heldTokens) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if strings.HasSuffix(r.URL.Path, "/token") {
		h.once.Do(func() { close(h.held) })
		<-h.release
	}
	return resp, err
}

// A logout while a serve refreshes the grant waits for the refresh and
// revokes and deletes what it saved: before, the refresh saved the
// successor of the revoked refresh token, and the login was back.
func TestLogoutDuringRefresh(t *testing.T) {
	as := newTestAS(t, func(a *testAS) { a.dcr = true; a.revocation = true })
	rs := newTestRS(t, as, nil)
	store := testStore(t)
	if _, err := login(t, as, rs, store, nil); err != nil {
		t.Fatal(err)
	}
	h := &heldTokens{held: make(chan struct{}), release: make(chan struct{})}
	tr := &Transport{Server: rs.url, Store: &FileStore{Dir: store.Dir, Keys: store.Keys},
		HTTPClient: &http.Client{Transport: h}, Now: func() time.Time { return time.Now().Add(time.Hour) }}
	called := make(chan error, 1)
	go func() { _, _, err := call(t, tr, rs.url); called <- err }()
	select {
	case <-h.held:
	case <-time.After(10 * time.Second):
		t.Fatal("no refresh")
	}
	loggedOut := make(chan error, 1)
	go func() {
		_, err := Logout(context.Background(), nil, &FileStore{Dir: store.Dir, Keys: store.Keys}, rs.url)
		loggedOut <- err
	}()
	time.Sleep(100 * time.Millisecond) // the logout reaches the lock (or, before, did its work)
	close(h.release)
	for _, ch := range []chan error{called, loggedOut} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("the refresh or the logout did not end")
		}
	}
	if _, err := store.Load(context.Background(), rs.url); !errors.Is(err, ErrNoToken) {
		t.Errorf("after the logout the store holds a grant (%v)", err)
	}
}
