package oauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// testAS is a small authorization server on loopback for the tests: real
// PKCE checks, real ES256-signed JWT access tokens, DCR, CIMD (fetched
// over TLS), refresh with rotation, revocation. Its authorization
// endpoint approves at once and redirects, as a user clicking "allow"
// would.
type testAS struct {
	t      *testing.T
	srv    *httptest.Server
	issuer string

	// Configuration, set before use.
	path        string // issuer path, e.g. "/tenant1"
	wellKnown   string // "oauth" (RFC 8414), "oidc-inserted", "oidc-appended"
	metaIssuer  string // if set, the issuer the metadata claims
	cimd        bool
	cimdClient  *http.Client
	dcr         bool
	revocation  bool
	issParam    bool   // advertise and send iss
	sendIss     string // send this iss instead (wrong issuer tests)
	omitIss     bool   // advertise, but leave iss out
	noPKCE      bool   // advertise no S256
	authMethods []string
	scopes      []string
	expiresIn   int
	clients     map[string]testClient
	tamperState bool   // redirect with a different state
	noMetadata  bool   // publish no metadata (2025-03-26 endpoint fallback)
	deny        bool   // the user clicks "deny"
	mcp         bool   // also be the MCP server, at /mcp (2025-03-26 layout)
	person      string // guarded by mu; "page": show a login page (200), "error": answer prompt=none with login_required; "": approve at once

	key *ecdsa.PrivateKey
	kid string

	mu            sync.Mutex // guards the fields below
	codes         map[string]codeGrant
	refresh       map[string]codeGrant
	revoked       []string
	authzRequests []url.Values
	tokenRequests []url.Values
	registrations int
	tokensIssued  int
	jwksFetches   int
}

type testClient struct {
	secret       string
	method       string
	redirectURIs []string
}

type codeGrant struct {
	clientID, redirectURI, challenge, resource, scope string
}

func newTestAS(t *testing.T, configure func(*testAS)) *testAS {
	a := &testAS{
		t: t, wellKnown: "oauth", expiresIn: 3600,
		clients: map[string]testClient{},
		codes:   map[string]codeGrant{}, refresh: map[string]codeGrant{},
		kid: "k1",
	}
	var err error
	a.key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if configure != nil {
		configure(a)
	}
	mux := http.NewServeMux()
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	a.issuer = a.srv.URL + a.path
	var metaPath string
	switch a.wellKnown {
	case "oauth":
		metaPath = "/.well-known/oauth-authorization-server" + a.path
	case "oidc-inserted":
		metaPath = "/.well-known/openid-configuration" + a.path
	case "oidc-appended":
		metaPath = a.path + "/.well-known/openid-configuration"
	default:
		t.Fatalf("wellKnown %q", a.wellKnown)
	}
	if !a.noMetadata {
		mux.HandleFunc("GET "+metaPath, a.metadata)
	}
	if a.mcp {
		mux.HandleFunc("/mcp", a.serveMCP)
	}
	mux.HandleFunc("GET /jwks", a.jwks)
	mux.HandleFunc("GET /authorize", a.authorize)
	mux.HandleFunc("POST /token", a.token)
	mux.HandleFunc("POST /register", a.register)
	mux.HandleFunc("POST /revoke", a.revoke)
	return a
}

func (a *testAS) metadata(w http.ResponseWriter, r *http.Request) {
	m := map[string]any{
		"issuer":                   a.issuer,
		"authorization_endpoint":   a.srv.URL + "/authorize",
		"token_endpoint":           a.srv.URL + "/token",
		"jwks_uri":                 a.srv.URL + "/jwks",
		"response_types_supported": []string{"code"},
	}
	if a.metaIssuer != "" {
		m["issuer"] = a.metaIssuer
	}
	if !a.noPKCE {
		m["code_challenge_methods_supported"] = []string{"S256"}
	}
	if a.dcr {
		m["registration_endpoint"] = a.srv.URL + "/register"
	}
	if a.revocation {
		m["revocation_endpoint"] = a.srv.URL + "/revoke"
	}
	if a.cimd {
		m["client_id_metadata_document_supported"] = true
	}
	if a.issParam || a.omitIss {
		m["authorization_response_iss_parameter_supported"] = true
	}
	if a.authMethods != nil {
		m["token_endpoint_auth_methods_supported"] = a.authMethods
	}
	if a.scopes != nil {
		m["scopes_supported"] = a.scopes
	}
	writeJSON(w, http.StatusOK, m)
}

// serveMCP is a 2025-03-26 MCP server on the AS's own origin: no
// resource metadata; tokens checked against the AS's key directly.
func (a *testAS) serveMCP(w http.ResponseWriter, r *http.Request) {
	raw, ok := BearerToken(r)
	if !ok {
		WriteChallenge(w, http.StatusUnauthorized, Challenge{})
		return
	}
	a.mu.Lock()
	pub := a.key.Public()
	a.mu.Unlock()
	var c jwt.Claims
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.ES256})
	if err == nil {
		err = tok.Claims(pub, &c)
	}
	if err == nil {
		err = c.Validate(jwt.Expected{Issuer: a.issuer, AnyAudience: jwt.Audience{a.srv.URL + "/mcp"}, Time: time.Now()})
	}
	if err != nil {
		WriteChallenge(w, http.StatusUnauthorized, Challenge{Error: "invalid_token"})
		return
	}
	fmt.Fprintf(w, "hello %s", c.Subject)
}

func (a *testAS) jwks(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.jwksFetches++
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: a.key.Public(), KeyID: a.kid, Algorithm: "ES256", Use: "sig"}}}
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, set)
}

// rotate replaces the signing key.
func (a *testAS) rotate(t *testing.T, kid string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	a.key, a.kid = k, kid
	a.mu.Unlock()
}

func (a *testAS) fetches() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.jwksFetches
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func oauthErr(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

// client finds a registered client, or resolves a CIMD client id.
func (a *testAS) client(id string) (testClient, bool) {
	a.mu.Lock()
	c, ok := a.clients[id]
	a.mu.Unlock()
	if ok || !a.cimd || !strings.HasPrefix(id, "https://") {
		return c, ok
	}
	resp, err := a.cimdClient.Get(id)
	if err != nil {
		return c, false
	}
	defer resp.Body.Close()
	var doc struct {
		ClientID     string   `json:"client_id"`
		RedirectURIs []string `json:"redirect_uris"`
	}
	if json.NewDecoder(resp.Body).Decode(&doc) != nil || doc.ClientID != id {
		return c, false
	}
	return testClient{method: AuthNone, redirectURIs: doc.RedirectURIs}, true
}

// redirectAllowed: exact match, or for loopback any port (RFC 8252 §7.3).
func redirectAllowed(allowed []string, got string) bool {
	gu, err := url.Parse(got)
	if err != nil {
		return false
	}
	for _, a := range allowed {
		au, err := url.Parse(a)
		if err != nil {
			continue
		}
		if a == got || (au.Hostname() == "127.0.0.1" && gu.Hostname() == "127.0.0.1" && au.Path == gu.Path && au.Scheme == gu.Scheme) {
			return true
		}
	}
	return false
}

func (a *testAS) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.mu.Lock()
	a.authzRequests = append(a.authzRequests, q)
	person := a.person // guarded by mu: tests change it between logins
	a.mu.Unlock()
	c, ok := a.client(q.Get("client_id"))
	if !ok || !redirectAllowed(c.redirectURIs, q.Get("redirect_uri")) {
		http.Error(w, "unknown client or redirect", http.StatusBadRequest)
		return
	}
	if q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		http.Error(w, "PKCE S256 required", http.StatusBadRequest)
		return
	}
	code := rand.Text()
	a.mu.Lock()
	a.codes[code] = codeGrant{q.Get("client_id"), q.Get("redirect_uri"), q.Get("code_challenge"), q.Get("resource"), q.Get("scope")}
	a.mu.Unlock()
	back := url.Values{"code": {code}, "state": {q.Get("state")}}
	switch {
	case person == "page":
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<form>log in</form>")
		return
	case person == "error" && q.Get("prompt") == "none":
		back = url.Values{"error": {"login_required"}, "state": {q.Get("state")}}
	}
	if a.deny {
		back = url.Values{"error": {"access_denied"}, "error_description": {"the user said no"}, "state": {q.Get("state")}}
	}
	if a.tamperState {
		back.Set("state", "forged")
	}
	switch {
	case a.sendIss != "":
		back.Set("iss", a.sendIss)
	case a.issParam:
		back.Set("iss", a.issuer)
	}
	http.Redirect(w, r, q.Get("redirect_uri")+"?"+back.Encode(), http.StatusFound)
}

// authClient checks the client's authentication at the token endpoint.
func (a *testAS) authClient(r *http.Request) (string, bool) {
	id, secret, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	c, ok := a.client(id)
	if !ok {
		return "", false
	}
	switch c.method {
	case AuthNone:
		return id, !basic && secret == ""
	case AuthSecretBasic:
		return id, basic && secret == c.secret
	case AuthSecretPost:
		return id, !basic && secret == c.secret
	}
	return "", false
}

func (a *testAS) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthErr(w, 400, "invalid_request", "form")
		return
	}
	a.mu.Lock()
	a.tokenRequests = append(a.tokenRequests, r.PostForm)
	a.mu.Unlock()
	id, ok := a.authClient(r)
	if !ok {
		oauthErr(w, 401, "invalid_client", "client authentication failed")
		return
	}
	var g codeGrant
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		a.mu.Lock()
		g, ok = a.codes[r.PostForm.Get("code")]
		delete(a.codes, r.PostForm.Get("code"))
		a.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		switch {
		case !ok || g.clientID != id:
			oauthErr(w, 400, "invalid_grant", "unknown code")
			return
		case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
			oauthErr(w, 400, "invalid_grant", "PKCE verification failed")
			return
		case r.PostForm.Get("redirect_uri") != g.redirectURI:
			oauthErr(w, 400, "invalid_grant", "redirect_uri differs")
			return
		}
	case "refresh_token":
		a.mu.Lock()
		g, ok = a.refresh[r.PostForm.Get("refresh_token")]
		delete(a.refresh, r.PostForm.Get("refresh_token"))
		a.mu.Unlock()
		if !ok || g.clientID != id {
			oauthErr(w, 400, "invalid_grant", "unknown refresh token")
			return
		}
	default:
		oauthErr(w, 400, "unsupported_grant_type", "")
		return
	}
	if r.PostForm.Get("resource") != g.resource {
		oauthErr(w, 400, "invalid_target", "resource differs from the authorization request")
		return
	}
	rt := "rt-" + rand.Text()
	a.mu.Lock()
	a.refresh[rt] = g
	a.tokensIssued++
	a.mu.Unlock()
	writeJSON(w, 200, map[string]any{
		"access_token":  a.sign(t0(), g.resource, g.scope, "alice", time.Duration(a.expiresIn)*time.Second),
		"token_type":    "Bearer",
		"expires_in":    a.expiresIn,
		"refresh_token": rt,
		"scope":         g.scope,
	})
}

func t0() time.Time { return time.Now() }

// sign makes an ES256 access token.
func (a *testAS) sign(now time.Time, aud, scope, sub string, ttl time.Duration) string {
	a.mu.Lock()
	key, kid := a.key, a.kid
	a.mu.Unlock()
	return signJWT(a.t, key, kid, jose.ES256, map[string]any{
		"iss": a.issuer, "aud": aud, "sub": sub, "scope": scope,
		"iat": now.Unix(), "exp": now.Add(ttl).Unix(), "jti": rand.Text(),
	})
}

func signJWT(t *testing.T, key any, kid string, alg jose.SignatureAlgorithm, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("at+jwt")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (a *testAS) register(w http.ResponseWriter, r *http.Request) {
	var m struct {
		RedirectURIs []string `json:"redirect_uris"`
		Method       string   `json:"token_endpoint_auth_method"`
		AppType      string   `json:"application_type"`
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil || len(m.RedirectURIs) == 0 {
		oauthErr(w, 400, "invalid_client_metadata", "")
		return
	}
	if m.AppType != "native" {
		oauthErr(w, 400, "invalid_client_metadata", "a loopback redirect needs application_type native")
		return
	}
	id := "dcr-" + rand.Text()
	c := testClient{method: m.Method, redirectURIs: m.RedirectURIs}
	if m.Method == "" {
		c.method = AuthSecretBasic
	}
	resp := map[string]any{"client_id": id, "redirect_uris": m.RedirectURIs, "token_endpoint_auth_method": c.method}
	if c.method != AuthNone {
		c.secret = "sec-" + rand.Text()
		resp["client_secret"] = c.secret
	}
	a.mu.Lock()
	a.clients[id] = c
	a.registrations++
	a.mu.Unlock()
	writeJSON(w, http.StatusCreated, resp)
}

func (a *testAS) revoke(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	if _, ok := a.authClient(r); !ok {
		oauthErr(w, 401, "invalid_client", "")
		return
	}
	a.mu.Lock()
	a.revoked = append(a.revoked, r.PostForm.Get("token"))
	delete(a.refresh, r.PostForm.Get("token"))
	a.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (a *testAS) lastAuthz(t *testing.T) url.Values {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.authzRequests) == 0 {
		t.Fatal("no authorization request reached the server")
	}
	return a.authzRequests[len(a.authzRequests)-1]
}

// testRS is a protected MCP server stand-in: it checks tokens with this
// package's Validator and answers 401/403 challenges.
type testRS struct {
	srv      *httptest.Server
	url      string // the MCP endpoint, srv.URL + "/mcp"
	prmAt    string // "header", "path", "root"
	chScope  string // scope in the 401 challenge
	resource string // resource the metadata claims (default url)

	mu        sync.Mutex // guards the fields below
	needScope string
	seen      []string // Authorization headers received
	validator *Validator
}

func newTestRS(t *testing.T, as *testAS, configure func(*testRS)) *testRS {
	rs := &testRS{prmAt: "header"}
	mux := http.NewServeMux()
	rs.srv = httptest.NewServer(mux)
	t.Cleanup(rs.srv.Close)
	rs.url = rs.srv.URL + "/mcp"
	if configure != nil {
		configure(rs)
	}
	if rs.resource == "" {
		rs.resource = rs.url
	}
	prm := MetadataHandler(ResourceMetadata{Resource: rs.resource, AuthorizationServers: []string{as.issuer}, ScopesSupported: as.scopes})
	switch rs.prmAt {
	case "header":
		mux.Handle("GET /custom/prm", prm)
	case "path":
		mux.Handle("GET "+MetadataPath(rs.url), prm)
	case "root":
		mux.Handle("GET /.well-known/oauth-protected-resource", prm)
	}
	var err error
	rs.validator, err = NewValidator(ValidatorOptions{Issuer: as.issuer, Audience: rs.resource})
	if err != nil {
		t.Fatal(err)
	}
	mux.HandleFunc("/mcp", rs.serve)
	return rs
}

func (rs *testRS) setNeedScope(s string) {
	rs.mu.Lock()
	rs.needScope = s
	rs.mu.Unlock()
}

func (rs *testRS) serve(w http.ResponseWriter, r *http.Request) {
	rs.mu.Lock()
	rs.seen = append(rs.seen, r.Header.Get("Authorization"))
	need := rs.needScope
	rs.mu.Unlock()
	ch := Challenge{Scope: rs.chScope}
	if rs.prmAt == "header" {
		ch.ResourceMetadata = rs.srv.URL + "/custom/prm"
	}
	tok, ok := BearerToken(r)
	if !ok {
		WriteChallenge(w, http.StatusUnauthorized, ch)
		return
	}
	id, err := rs.validator.Validate(r.Context(), tok)
	if err != nil {
		ch.Error = "invalid_token"
		w.Header().Set("WWW-Authenticate", ch.String())
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	for _, s := range strings.Fields(need) {
		if !slices.Contains(id.Scopes, s) {
			w.Header().Set("WWW-Authenticate", Challenge{Error: "insufficient_scope", Scope: need, ResourceMetadata: ch.ResourceMetadata}.String())
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
	}
	fmt.Fprintf(w, "hello %s scopes=%s", id.Name, strings.Join(id.Scopes, ","))
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
