package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/oauth"
)

// oaAS is an authorization server on loopback, ported from
// internal/oauth's tests: RFC 8414 metadata, a JWKS, dynamic client
// registration, an authorization endpoint that approves at once (as a
// user clicking "allow" would) and redirects, a token endpoint with real
// PKCE checks, ES256 JWT access tokens and rotating refresh tokens, and
// revocation.
type oaAS struct {
	t      *testing.T
	srv    *httptest.Server
	issuer string
	key    *ecdsa.PrivateKey

	mu        sync.Mutex
	sub       string              // the user who approves
	person    bool                // a person must log in: prompt=none gets login_required
	ttl       time.Duration       // of access tokens; zero: an hour
	refreshes int                 // refresh grants served
	clients   map[string][]string // client id → redirect URIs
	codes     map[string]oaCode   // code → grant
	refresh   map[string]oaCode   // refresh token → grant
	issued    []string            // every access and refresh token
	revoked   []string
	authz     []url.Values // every authorization request's query
}

type oaCode struct{ client, redirect, challenge, resource, scope, sub string }

func newOAAS(t *testing.T) *oaAS {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	a := &oaAS{t: t, key: key, sub: "alice", clients: map[string][]string{}, codes: map[string]oaCode{}, refresh: map[string]oaCode{}}
	mux := http.NewServeMux()
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	a.issuer = a.srv.URL
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		oaJSON(w, 200, map[string]any{
			"issuer": a.issuer, "authorization_endpoint": a.issuer + "/authorize", "token_endpoint": a.issuer + "/token",
			"registration_endpoint": a.issuer + "/register", "revocation_endpoint": a.issuer + "/revoke", "jwks_uri": a.issuer + "/jwks",
			"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"none"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		oaJSON(w, 200, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: a.key.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			RedirectURIs []string `json:"redirect_uris"`
		}
		if json.NewDecoder(r.Body).Decode(&m) != nil || len(m.RedirectURIs) == 0 {
			oaJSON(w, 400, map[string]string{"error": "invalid_client_metadata"})
			return
		}
		id := "dcr-" + rand.Text()
		a.mu.Lock()
		a.clients[id] = m.RedirectURIs
		a.mu.Unlock()
		oaJSON(w, 201, map[string]any{"client_id": id, "redirect_uris": m.RedirectURIs, "token_endpoint_auth_method": "none"})
	})
	mux.HandleFunc("GET /authorize", a.authorize)
	mux.HandleFunc("POST /token", a.token)
	mux.HandleFunc("POST /revoke", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		a.mu.Lock()
		a.revoked = append(a.revoked, r.PostForm.Get("token"))
		delete(a.refresh, r.PostForm.Get("token"))
		a.mu.Unlock()
	})
	return a
}

func oaJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// authzRequests returns the queries of the authorization requests so far.
func (a *oaAS) authzRequests() []url.Values {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.authz)
}

// needPerson makes silent logins (prompt=none) fail with login_required.
func (a *oaAS) needPerson() {
	a.mu.Lock()
	a.person = true
	a.mu.Unlock()
}

func (a *oaAS) setUser(sub string) {
	a.mu.Lock()
	a.sub = sub
	a.mu.Unlock()
}

func (a *oaAS) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.mu.Lock()
	a.authz = append(a.authz, q)
	uris, ok := a.clients[q.Get("client_id")]
	sub, person := a.sub, a.person
	a.mu.Unlock()
	ru, err := url.Parse(q.Get("redirect_uri"))
	allowed := false
	for _, u := range uris {
		if au, e := url.Parse(u); e == nil && err == nil && au.Hostname() == "127.0.0.1" && ru.Hostname() == "127.0.0.1" && au.Path == ru.Path {
			allowed = true // any port on loopback (RFC 8252)
		}
	}
	if !ok || !allowed || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("resource") == "" {
		http.Error(w, "bad authorization request", 400)
		return
	}
	if person && q.Get("prompt") == "none" {
		http.Redirect(w, r, q.Get("redirect_uri")+"?"+url.Values{"error": {"login_required"}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
		return
	}
	code := rand.Text()
	a.mu.Lock()
	a.codes[code] = oaCode{q.Get("client_id"), q.Get("redirect_uri"), q.Get("code_challenge"), q.Get("resource"), q.Get("scope"), sub}
	a.mu.Unlock()
	http.Redirect(w, r, q.Get("redirect_uri")+"?"+url.Values{"code": {code}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
}

func (a *oaAS) token(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	f := r.PostForm
	var g oaCode
	var ok bool
	a.mu.Lock()
	switch f.Get("grant_type") {
	case "authorization_code":
		g, ok = a.codes[f.Get("code")]
		delete(a.codes, f.Get("code"))
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		ok = ok && base64.RawURLEncoding.EncodeToString(sum[:]) == g.challenge && f.Get("redirect_uri") == g.redirect
	case "refresh_token":
		g, ok = a.refresh[f.Get("refresh_token")]
		delete(a.refresh, f.Get("refresh_token"))
		a.refreshes++
	}
	ttl := a.ttl
	a.mu.Unlock()
	if ttl == 0 {
		ttl = time.Hour
	}
	if !ok || f.Get("client_id") != g.client || f.Get("resource") != g.resource {
		oaJSON(w, 400, map[string]string{"error": "invalid_grant"})
		return
	}
	at := a.sign(map[string]any{"sub": g.sub, "aud": g.resource, "scope": g.scope, "exp": time.Now().Add(ttl).Unix()})
	rt := "rt-" + rand.Text()
	a.mu.Lock()
	a.refresh[rt] = g
	a.issued = append(a.issued, at, rt)
	a.mu.Unlock()
	oaJSON(w, 200, map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": int(ttl / time.Second), "refresh_token": rt, "scope": g.scope})
}

// sign makes an ES256 JWT of this issuer with claims (iss and iat added).
func (a *oaAS) sign(claims map[string]any) string {
	a.t.Helper()
	c := map[string]any{"iss": a.issuer, "iat": time.Now().Unix(), "jti": rand.Text()}
	for k, v := range claims {
		c[k] = v
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: a.key}, (&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", "k1"))
	if err != nil {
		a.t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(c).Serialize()
	if err != nil {
		a.t.Fatal(err)
	}
	return tok
}

func (a *oaAS) tokens() (issued, revoked []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.issued...), append([]string(nil), a.revoked...)
}

// oaRS is a remote MCP server that needs this AS's tokens: resource
// metadata, 401 with WWW-Authenticate, and tools that tell who called
// (whoami) and echo the caller's token back (leak: the gateway must
// redact it).
type oaRS struct {
	srv *httptest.Server
	url string
}

func newOARS(t *testing.T, as *oaAS) *oaRS {
	rs := &oaRS{}
	mux := http.NewServeMux()
	rs.srv = httptest.NewServer(mux)
	t.Cleanup(rs.srv.Close)
	rs.url = rs.srv.URL + "/mcp"
	v, err := oauth.NewValidator(oauth.ValidatorOptions{Issuer: as.issuer, Audience: rs.url})
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle(oauth.MetadataPath(rs.url), oauth.MetadataHandler(oauth.ResourceMetadata{Resource: rs.url, AuthorizationServers: []string{as.issuer}}))
	srv := mcp.NewServer(&mcp.Implementation{Name: "remote", Version: "1"}, nil)
	// Neither destructive nor open-world, so that no call waits for review.
	harmless := &mcp.ToolAnnotations{DestructiveHint: new(bool), OpenWorldHint: new(bool)}
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "the caller's subject", Annotations: harmless}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "user " + req.Extra.TokenInfo.UserID}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "admin_only", Description: "needs scope admin", Annotations: harmless}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "admin ok"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "leak", Description: "echoes the caller's token", Annotations: harmless}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		tok, _ := req.Extra.TokenInfo.Extra["token"].(string)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "your token is " + tok}}}, nil, nil
	})
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		id, err := v.Validate(ctx, token)
		if err != nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: id.Name, Scopes: id.Scopes, Expiration: id.Expiry, Extra: map[string]any{"token": token}}, nil
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	// Calling admin_only needs scope admin: a 403 insufficient_scope.
	stepUp := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"admin_only"`)) && !slices.Contains(auth.TokenInfoFromContext(r.Context()).Scopes, "admin") {
				w.Header().Set("WWW-Authenticate", oauth.Challenge{Error: "insufficient_scope", Scope: "admin", ResourceMetadata: oauth.MetadataURL(rs.url)}.String())
				http.Error(w, "insufficient scope", http.StatusForbidden)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: oauth.MetadataURL(rs.url)})(stepUp))
	return rs
}
