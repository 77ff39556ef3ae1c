package oauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultLoginWait bounds the wait for the redirect when
// LoginOptions.Wait is zero.
const DefaultLoginWait = 5 * time.Minute

// callbackPath is the redirect path on the loopback listener.
const callbackPath = "/callback"

// LoginOptions configures Login. Server and OpenURL are required.
type LoginOptions struct {
	// Server is the MCP server URL (the protected resource).
	Server string
	// HTTPClient makes every request of the flow; nil means a default
	// client with a 30 s timeout.
	HTTPClient *http.Client
	// Challenge is the server's 401 (or 403) challenge, if the caller has
	// one; if zero, Login probes the server for it.
	Challenge Challenge
	// Issuer, if set, pins the authorization server: it must be among
	// those the resource metadata lists, and is used. Zero means the
	// first one listed.
	Issuer string
	// Scopes, if set, are requested instead of the challenge's scope or
	// the resource's scopes_supported.
	Scopes []string
	// ClientID and ClientSecret are a pre-registered client, used first
	// if set. ClientSecret empty means a public client.
	ClientID     string
	ClientSecret string
	// ClientMetadataURL is the https URL of this client's Client ID
	// Metadata Document, used as the client id where the authorization
	// server advertises client_id_metadata_document_supported.
	ClientMetadataURL string
	// ClientName is the client_name for dynamic registration; zero means
	// "mcpbox".
	ClientName string
	// RedirectPeer, if non-nil, is asked of each request to the loopback
	// redirect listener: one it refuses is answered 403 and does not end
	// the login, which waits on for the user's browser. The
	// authorization URL, in xdg-open's and the browser's command lines,
	// names the listener's port and the state to any local user; mcpbox
	// refuses another user's process (tcppeer.SameUser).
	RedirectPeer func(r *http.Request) error
	// OpenURL receives the authorization URL once the loopback listener
	// is up, before Login waits: the CLI prints it (first line of stdout
	// with --no-browser) or opens a browser. An error aborts the login.
	OpenURL func(authURL string) error
	// Silent, if set, replaces OpenURL: the authorization request
	// carries prompt=none (OpenID Connect; other servers ignore it) and
	// Login sends it itself, without cookies, following the server's
	// redirects (by the same rules as every request of the flow) until
	// one reaches the redirect URI. It succeeds only where the server
	// grants without a person (consent already given, nothing to log in
	// to); a login page or an answer such as login_required fails at once
	// with ErrInteractionRequired. serve re-authorizes this way (step-up,
	// an authorization server that changed), having no browser.
	Silent bool
	// SilentScopes bound what a Silent login may ask for: besides the
	// scope of the grant it renews (Store's, which a person agreed to),
	// only these. A silent login whose scope (Scopes, else the
	// challenge's, else the resource's scopes_supported) names any other
	// fails with ErrScopeNotAllowed before it registers or asks the
	// authorization server, so a server cannot widen its own token's
	// scope where the authorization server grants without a person.
	// offline_access, which Login adds itself, is not bounded.
	SilentScopes []string
	// Wait bounds the wait for the redirect; zero means DefaultLoginWait.
	Wait time.Duration
	// RedirectPort is the port of the loopback listener; zero means one
	// the kernel picks (RFC 8252 §7.3: servers must accept any port on a
	// loopback redirect; set it for those that do not).
	RedirectPort int
	// Store, if set, receives the grant.
	Store Store
}

// Login runs the authorization code flow with PKCE (S256) for one MCP
// server: discovery, client registration, the authorization request
// through OpenURL, the redirect on a one-shot listener on 127.0.0.1, the
// state and iss checks, and the code exchange. Resource indicators (RFC
// 8707) go on the authorization and token requests. The grant is saved
// in opts.Store, if set, and returned.
func Login(ctx context.Context, opts LoginOptions) (*Grant, error) {
	if opts.Server == "" || (opts.OpenURL == nil && !opts.Silent) {
		return nil, errors.New("login: Server and OpenURL (or Silent) are required")
	}
	if err := checkEndpoint(opts.Server); err != nil {
		return nil, fmt.Errorf("login: server URL %w", err)
	}
	if kc, ok := opts.Store.(interface{ CheckKey(context.Context) error }); ok {
		// Before a person authorizes: tokens a store cannot keep would
		// be thrown away (and stay valid at the server).
		if err := kc.CheckKey(ctx); err != nil {
			return nil, fmt.Errorf("login to %s: the token store: %w", opts.Server, err)
		}
	}
	hc := orDefault(opts.HTTPClient, opts.Server)
	ch := opts.Challenge
	if ch == (Challenge{}) {
		ch, _ = Probe(ctx, hc, opts.Server)
	}
	pin := opts.Issuer
	if opts.Silent && pin == "" && opts.ClientSecret != "" && opts.Store != nil {
		// A pre-registered client's secret is for the authorization
		// server it was registered at: a silent login renews at the one
		// of the login it renews, and a server that now names another
		// gets no secret sent there without a person (mcpbox login).
		if old, err := opts.Store.Load(ctx, opts.Server); err == nil && old.Issuer != "" {
			pin = old.Issuer
		}
	}
	d, err := discover(ctx, hc, opts.Server, ch, pin)
	if err != nil {
		return nil, fmt.Errorf("login to %s: %w", opts.Server, err)
	}
	scope := chooseScope(opts.Scopes, ch, &d.Resource)
	if opts.Silent {
		if err := silentScopeAllowed(ctx, &opts, scope); err != nil {
			return nil, fmt.Errorf("login to %s: %w", opts.Server, err)
		}
	}
	// A silent login at the authorization server of the login it renews
	// is that login's client again, on its redirect: a client registered
	// a moment ago has no consent to renew, and each registration stays
	// at the server.
	var again *Grant
	port := opts.RedirectPort
	if opts.Silent && opts.ClientID == "" && opts.Store != nil {
		if old, err := opts.Store.Load(ctx, opts.Server); err == nil && old.Issuer == d.Server.Issuer && old.ClientID != "" && old.RedirectURI != "" {
			if u, err := url.Parse(old.RedirectURI); err == nil {
				if p, err := strconv.Atoi(u.Port()); err == nil {
					again, port = old, p
				}
			}
		}
	}
	state := randomString()
	cb, err := listenCallback(port, state, opts.RedirectPeer)
	if err != nil && again != nil {
		again = nil // its port is taken: a client of its own
		cb, err = listenCallback(opts.RedirectPort, state, opts.RedirectPeer)
	}
	if err != nil {
		return nil, fmt.Errorf("login to %s: %w", opts.Server, err)
	}
	defer cb.close()

	g := &Grant{
		Server:             opts.Server,
		Issuer:             d.Server.Issuer,
		Resource:           d.Resource.Resource,
		TokenEndpoint:      d.Server.TokenEndpoint,
		RevocationEndpoint: d.Server.RevocationEndpoint,
	}
	g.RedirectURI = cb.redirectURI
	if again != nil {
		g.ClientID, g.ClientSecret, g.AuthMethod = again.ClientID, again.ClientSecret, again.AuthMethod
	} else if err := register(ctx, hc, &opts, &d.Server, cb.redirectURI, g); err != nil {
		return nil, fmt.Errorf("login to %s: %w", opts.Server, err)
	}
	if len(opts.Scopes) == 0 && slices.Contains(d.Server.ScopesSupported, "offline_access") &&
		!slices.Contains(strings.Fields(scope), "offline_access") {
		// A gateway outlives access tokens: ask for a refresh token
		// where the server offers it that way (SEP-2207).
		scope = strings.TrimSpace(scope + " offline_access")
	}

	verifier := randomString()
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {g.ClientID},
		"redirect_uri":          {cb.redirectURI},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
		"state":                 {state},
		"resource":              {g.Resource},
	}
	if scope != "" {
		q.Set("scope", scope)
	}
	if opts.Silent {
		q.Set("prompt", "none")
	}
	authURL, err := withQuery(d.Server.AuthorizationEndpoint, q)
	if err != nil {
		return nil, fmt.Errorf("login to %s: %w", opts.Server, err)
	}
	if opts.Silent {
		back, err := silentFollow(ctx, hc, authURL, cb.redirectURI)
		if err != nil {
			return nil, fmt.Errorf("login to %s: %w", opts.Server, err)
		}
		select {
		case cb.got <- back:
		default: // another request reached the listener first; await checks it
		}
	} else if err := opts.OpenURL(authURL); err != nil {
		return nil, fmt.Errorf("login to %s: opening the authorization URL: %w", opts.Server, err)
	}
	wait := opts.Wait
	if wait <= 0 {
		wait = DefaultLoginWait
	}
	code, err := cb.await(ctx, wait, &d.Server)
	if err != nil {
		return nil, fmt.Errorf("login to %s: %w", opts.Server, err)
	}
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {cb.redirectURI},
		"code_verifier": {verifier},
		"resource":      {g.Resource},
	}
	g.Scope = scope
	if err := requestToken(ctx, hc, g, form, time.Now()); err != nil {
		return nil, fmt.Errorf("login to %s: exchanging the code: %w", opts.Server, err)
	}
	if opts.Store != nil {
		// Saved under the grant's lock, so that a serve's refresh of the
		// grant it replaces does not overwrite it; a login a Transport
		// runs (its Authorize) holds that lock already.
		unlock := func() {}
		if ctx.Value(grantLocked{}) != opts.Server {
			if unlock, err = lockGrant(ctx, opts.Store, opts.Server); err != nil {
				return nil, fmt.Errorf("login to %s: %w", opts.Server, err)
			}
		}
		err := opts.Store.Save(ctx, g)
		unlock()
		if err != nil {
			return nil, fmt.Errorf("login to %s: %w", opts.Server, err)
		}
	}
	return g, nil
}

// silentFollow sends the authorization request without a person: a GET
// without cookies whose redirects are followed by hc's rules until one
// is for redirectURI, whose query it returns instead of requesting it.
// An answer that is not such a redirect (a login or consent page), or an
// error that asks for a person, is ErrInteractionRequired.
func silentFollow(ctx context.Context, hc *http.Client, authURL, redirectURI string) (url.Values, error) {
	c := *hc
	c.Jar = nil
	ru, err := url.Parse(redirectURI)
	if err != nil {
		return nil, err
	}
	var back url.Values
	rules := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if u := req.URL; u.Scheme == ru.Scheme && u.Host == ru.Host && u.Path == ru.Path {
			back = u.Query()
			return http.ErrUseLastResponse
		}
		if rules != nil {
			return rules(req, via)
		}
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, fmt.Errorf("authorization request: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("authorization request: %w", err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if back == nil {
		return nil, fmt.Errorf("%s answered %d instead of redirecting back: %w", req.URL.Host, resp.StatusCode, ErrInteractionRequired)
	}
	switch back.Get("error") {
	case "login_required", "consent_required", "interaction_required", "account_selection_required":
		return nil, fmt.Errorf("%s answered %s: %w", req.URL.Host, back.Get("error"), ErrInteractionRequired)
	}
	return back, nil
}

// silentScopeAllowed checks the scope of a silent login against
// opts.SilentScopes and the scope of the grant it renews.
func silentScopeAllowed(ctx context.Context, opts *LoginOptions, scope string) error {
	allowed := slices.Clone(opts.SilentScopes)
	if opts.Store != nil {
		if old, err := opts.Store.Load(ctx, opts.Server); err == nil {
			allowed = append(allowed, strings.Fields(old.Scope)...)
		}
	}
	var beyond []string
	for _, s := range strings.Fields(scope) {
		if !slices.Contains(allowed, s) && !slices.Contains(beyond, s) {
			beyond = append(beyond, s)
		}
	}
	if len(beyond) > 0 {
		return fmt.Errorf("scope %q is neither held nor configured for a silent login: %w", strings.Join(beyond, " "), ErrScopeNotAllowed)
	}
	return nil
}

// chooseScope follows the spec's order: the caller's, the challenge's,
// the resource's scopes_supported, else none.
func chooseScope(explicit []string, ch Challenge, rm *ResourceMetadata) string {
	switch {
	case len(explicit) > 0:
		return strings.Join(explicit, " ")
	case ch.Scope != "":
		return ch.Scope
	default:
		return strings.Join(rm.ScopesSupported, " ")
	}
}

func withQuery(endpoint string, q url.Values) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("authorization endpoint %q: %w", endpoint, err)
	}
	old := u.Query()
	for k, v := range q {
		old[k] = v
	}
	u.RawQuery = old.Encode()
	return u.String(), nil
}

func randomString() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// register picks the client identity in the spec's order of preference:
// a pre-registered client id, a Client ID Metadata Document the server
// accepts, dynamic registration (RFC 7591).
func register(ctx context.Context, hc *http.Client, opts *LoginOptions, sm *ServerMetadata, redirectURI string, g *Grant) error {
	switch {
	case opts.ClientID != "":
		g.ClientID, g.ClientSecret = opts.ClientID, opts.ClientSecret
		g.AuthMethod = AuthNone
		if g.ClientSecret != "" {
			g.AuthMethod = secretMethod(sm.TokenEndpointAuthMethodsSupported)
		}
		return nil
	case opts.ClientMetadataURL != "" && sm.ClientIDMetadataDocumentSupported:
		u, err := url.Parse(opts.ClientMetadataURL)
		if err != nil || u.Scheme != "https" || u.Path == "" || u.Path == "/" {
			return fmt.Errorf("client metadata URL %q: want an https URL with a path", opts.ClientMetadataURL)
		}
		g.ClientID, g.AuthMethod = opts.ClientMetadataURL, AuthNone
		return nil
	case sm.RegistrationEndpoint != "":
		return registerDynamic(ctx, hc, opts, sm, redirectURI, g)
	}
	return ErrNoRegistration
}

// secretMethod picks how a client with a secret authenticates: basic
// unless the server lists only post (RFC 8414 §2: basic is the default).
func secretMethod(supported []string) string {
	if len(supported) > 0 && !slices.Contains(supported, AuthSecretBasic) && slices.Contains(supported, AuthSecretPost) {
		return AuthSecretPost
	}
	return AuthSecretBasic
}

func registerDynamic(ctx context.Context, hc *http.Client, opts *LoginOptions, sm *ServerMetadata, redirectURI string, g *Grant) error {
	method := AuthNone
	if len(sm.TokenEndpointAuthMethodsSupported) > 0 && !slices.Contains(sm.TokenEndpointAuthMethodsSupported, AuthNone) {
		method = secretMethod(sm.TokenEndpointAuthMethodsSupported)
	}
	name := opts.ClientName
	if name == "" {
		name = "mcpbox"
	}
	meta := map[string]any{
		"client_name":                name,
		"redirect_uris":              []string{redirectURI},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": method,
		"application_type":           "native",
	}
	body, _ := json.Marshal(meta)
	if err := checkEndpoint(sm.RegistrationEndpoint); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sm.RegistrationEndpoint, strings.NewReader(string(body)))
	if err != nil {
		return fmt.Errorf("registering client: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("registering client: %w", err)
	}
	defer resp.Body.Close()
	var r struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		AuthMethod   string `json:"token_endpoint_auth_method"`
		Error        string `json:"error"`
		Description  string `json:"error_description"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, maxMetadata))
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		dec.Decode(&r)
		return &oauthError{Endpoint: sm.RegistrationEndpoint, Status: resp.StatusCode, Code: r.Error, Description: r.Description}
	}
	if err := dec.Decode(&r); err != nil || r.ClientID == "" {
		return fmt.Errorf("registering client at %s: answer has no client_id", sm.RegistrationEndpoint)
	}
	g.ClientID, g.ClientSecret = r.ClientID, r.ClientSecret
	g.AuthMethod = r.AuthMethod
	if g.AuthMethod == "" {
		g.AuthMethod = method
	}
	if g.ClientSecret == "" {
		g.AuthMethod = AuthNone
	}
	return nil
}

// callbackDeadline bounds each request to the redirect listener, from its
// first byte to its answer, and the time a connection may idle; a
// variable for tests.
var callbackDeadline = 10 * time.Second

// callback is the one-shot loopback redirect listener. Only a redirect
// with the login's state is taken: any page in the user's browser can
// send one to a loopback port, and the first, forged, must not end the
// login that the genuine one would complete.
type callback struct {
	ln          net.Listener
	srv         *http.Server
	redirectURI string
	state       string
	got         chan url.Values // capacity 1: the first request to callbackPath with the state
	refused     atomic.Int64    // requests with another state
}

func listenCallback(port int, state string, peer func(*http.Request) error) (*callback, error) {
	ln, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("listening for the redirect: %w", err)
	}
	cb := &callback{
		ln:          ln,
		redirectURI: "http://" + ln.Addr().String() + callbackPath,
		state:       state,
		got:         make(chan url.Values, 1),
	}
	mux := http.NewServeMux()
	mux.HandleFunc(callbackPath, func(w http.ResponseWriter, r *http.Request) {
		if peer != nil {
			if err := peer(r); err != nil {
				http.Error(w, "mcpbox: this redirect was refused: "+err.Error(), http.StatusForbidden)
				return
			}
		}
		if subtle.ConstantTimeCompare([]byte(r.URL.Query().Get("state")), []byte(cb.state)) != 1 {
			cb.refused.Add(1)
			http.Error(w, "mcpbox: this redirect is not the one this login waits for (its state differs); the login waits on", http.StatusBadRequest)
			return
		}
		select {
		case cb.got <- r.URL.Query():
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			fmt.Fprintf(w, "<!doctype html><title>mcpbox</title><p>%s</p>", html.EscapeString("mcpbox received the authorization response; you can close this window."))
		default:
			http.Error(w, "this login has already received its redirect", http.StatusGone)
		}
	})
	// Any local process may connect: none may hold the listener with a
	// request that never ends (headers or a body sent a byte at a time).
	cb.srv = &http.Server{Handler: mux, ReadHeaderTimeout: callbackDeadline, ReadTimeout: callbackDeadline,
		WriteTimeout: callbackDeadline, IdleTimeout: callbackDeadline, MaxHeaderBytes: 16 << 10}
	go cb.srv.Serve(ln)
	return cb, nil
}

func (cb *callback) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cb.srv.Shutdown(ctx)
}

// await waits for the redirect with the login's state (the listener
// takes no other) and checks it: an error answer, and the RFC 9207 iss
// parameter: required and equal to the issuer where the server advertises
// it, and, where it does not but sends one anyway, still equal to the
// issuer.
func (cb *callback) await(ctx context.Context, wait time.Duration, sm *ServerMetadata) (string, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	var q url.Values
	select {
	case q = <-cb.got:
	case <-t.C:
		if n := cb.refused.Load(); n > 0 {
			return "", fmt.Errorf("%w; %d redirects with another state were refused: %w", ErrLoginTimeout, n, ErrStateMismatch)
		}
		return "", ErrLoginTimeout
	case <-ctx.Done():
		return "", ctx.Err()
	}
	iss, hasIss := q["iss"]
	switch {
	case hasIss && (len(iss) != 1 || iss[0] != sm.Issuer):
		return "", fmt.Errorf("authorization response iss %q, want %q: %w", strings.Join(iss, ","), sm.Issuer, ErrIssuerMismatch)
	case !hasIss && sm.AuthorizationResponseIssParameterSupported:
		return "", fmt.Errorf("authorization response has no iss though %s advertises it: %w", sm.Issuer, ErrIssuerMismatch)
	}
	if e := q.Get("error"); e != "" {
		return "", &oauthError{Endpoint: "authorization endpoint", Status: http.StatusFound, Code: e, Description: q.Get("error_description")}
	}
	code := q.Get("code")
	if code == "" {
		return "", errors.New("authorization response has no code")
	}
	return code, nil
}

// ClientMetadataDocument returns the Client ID Metadata Document for a
// client whose id is clientID (the https URL it will be served at), for
// the user to publish there: a public native client with mcpbox's
// loopback redirect (any port, RFC 8252 §7.3).
func ClientMetadataDocument(clientID, name string) ([]byte, error) {
	u, err := url.Parse(clientID)
	if err != nil || u.Scheme != "https" || u.Path == "" || u.Path == "/" || u.Fragment != "" {
		return nil, fmt.Errorf("client id %q: want an https URL with a path", clientID)
	}
	if name == "" {
		name = "mcpbox"
	}
	return json.MarshalIndent(map[string]any{
		"client_id":                  clientID,
		"client_name":                name,
		"redirect_uris":              []string{"http://127.0.0.1" + callbackPath},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": AuthNone,
		"application_type":           "native",
	}, "", "  ")
}
