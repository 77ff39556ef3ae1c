package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

const gatewayResource = "https://gateway.example/mcp"

func newValidator(t *testing.T, as *testAS, edit func(*ValidatorOptions)) *Validator {
	t.Helper()
	o := ValidatorOptions{Issuer: as.issuer, Audience: gatewayResource}
	if edit != nil {
		edit(&o)
	}
	v, err := NewValidator(o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func claims(as *testAS, edit func(map[string]any)) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss": as.issuer, "aud": gatewayResource, "sub": "alice", "scope": "mcp:read mcp:write",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "email": "alice@example.com", "email_verified": true,
	}
	if edit != nil {
		edit(c)
	}
	return c
}

func TestValidatorAcceptsAndMapsIdentity(t *testing.T) {
	as := newTestAS(t, nil)
	ctx := context.Background()
	v := newValidator(t, as, nil)
	id, err := v.Validate(ctx, signJWT(t, as.key, as.kid, jose.ES256, claims(as, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if id.Name != "alice" || id.Subject != "alice" || strings.Join(id.Scopes, " ") != "mcp:read mcp:write" {
		t.Errorf("identity %+v", id)
	}
	// aud as an array holding the resource.
	tok := signJWT(t, as.key, as.kid, jose.ES256, claims(as, func(c map[string]any) { c["aud"] = []string{"other", gatewayResource} }))
	if _, err := v.Validate(ctx, tok); err != nil {
		t.Errorf("aud array: %v", err)
	}
	// A configured claim becomes the identity.
	ve := newValidator(t, as, func(o *ValidatorOptions) { o.IdentityClaim = "email" })
	id, err = ve.Validate(ctx, signJWT(t, as.key, as.kid, jose.ES256, claims(as, nil)))
	if err != nil || id.Name != "alice@example.com" {
		t.Errorf("email claim: %+v %v", id, err)
	}
	if _, err := ve.Validate(ctx, signJWT(t, as.key, as.kid, jose.ES256, claims(as, func(c map[string]any) { delete(c, "email") }))); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("missing identity claim: %v", err)
	}
	// An email the issuer has not verified is anyone's to set: Mallory
	// with Alice's address must not become Alice.
	for _, unverified := range []func(map[string]any){
		func(c map[string]any) { c["sub"] = "mallory"; delete(c, "email_verified") },
		func(c map[string]any) { c["sub"] = "mallory"; c["email_verified"] = false },
		func(c map[string]any) { c["sub"] = "mallory"; c["email_verified"] = "true" },
	} {
		if id, err := ve.Validate(ctx, signJWT(t, as.key, as.kid, jose.ES256, claims(as, unverified))); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("unverified email accepted as %+v (%v)", id, err)
		}
	}
	// Two users, two identities.
	id2, err := v.Validate(ctx, signJWT(t, as.key, as.kid, jose.ES256, claims(as, func(c map[string]any) { c["sub"] = "bob" })))
	if err != nil || id2.Name != "bob" {
		t.Errorf("second user: %+v %v", id2, err)
	}
	// RS256 and EdDSA keys from the JWKS verify too.
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, ek, _ := ed25519.GenerateKey(rand.Reader)
	multi := jwksServer(t, as, []jose.JSONWebKey{{Key: &rk.PublicKey, KeyID: "r"}, {Key: ek.Public(), KeyID: "e"}})
	vm := newValidator(t, multi, nil)
	for kid, k := range map[string]struct {
		key any
		alg jose.SignatureAlgorithm
	}{"r": {rk, jose.RS256}, "e": {ek, jose.EdDSA}} {
		if _, err := vm.Validate(ctx, signJWT(t, k.key, kid, k.alg, claims(multi, nil))); err != nil {
			t.Errorf("%s: %v", k.alg, err)
		}
	}
}

// jwksServer is an issuer (metadata + JWKS) serving keys as given.
func jwksServer(t *testing.T, _ *testAS, keys []jose.JSONWebKey) *testAS {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	a := &testAS{t: t, srv: srv, issuer: srv.URL}
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"issuer": a.issuer, "jwks_uri": srv.URL + "/jwks"})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, jose.JSONWebKeySet{Keys: keys})
	})
	return a
}

func TestValidatorRefusals(t *testing.T) {
	as := newTestAS(t, nil)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	cases := map[string]string{
		"wrong audience":    signJWT(t, as.key, as.kid, jose.ES256, claims(as, func(c map[string]any) { c["aud"] = "https://other.example/mcp" })),
		"no audience":       signJWT(t, as.key, as.kid, jose.ES256, claims(as, func(c map[string]any) { delete(c, "aud") })),
		"wrong issuer":      signJWT(t, as.key, as.kid, jose.ES256, claims(as, func(c map[string]any) { c["iss"] = "https://evil.example" })),
		"expired":           signJWT(t, as.key, as.kid, jose.ES256, claims(as, func(c map[string]any) { c["exp"] = now.Add(-2 * time.Minute).Unix() })),
		"no exp":            signJWT(t, as.key, as.kid, jose.ES256, claims(as, func(c map[string]any) { delete(c, "exp") })),
		"not yet valid":     signJWT(t, as.key, as.kid, jose.ES256, claims(as, func(c map[string]any) { c["nbf"] = now.Add(5 * time.Minute).Unix() })),
		"bad signature":     signJWT(t, other, as.kid, jose.ES256, claims(as, nil)),
		"garbage":           "not.a.jwt",
		"alg none":          unsignedJWT(t, claims(as, nil), as.kid),
		"HS256 with pubkey": hmacWithPublicKey(t, as, claims(as, nil)),
		"tampered payload":  tamper(t, signJWT(t, as.key, as.kid, jose.ES256, claims(as, nil))),
	}
	for name, tok := range cases {
		t.Run(name, func(t *testing.T) {
			v := newValidator(t, as, nil)
			id, err := v.Validate(context.Background(), tok)
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("validate: %+v %v, want ErrInvalidToken", id, err)
			}
			if len(tok) > 20 && strings.Contains(err.Error(), tok[len(tok)-20:]) {
				t.Errorf("error carries the token: %v", err)
			}
		})
	}
	t.Run("small skew accepted", func(t *testing.T) {
		v := newValidator(t, as, nil)
		tok := signJWT(t, as.key, as.kid, jose.ES256, claims(as, func(c map[string]any) { c["exp"] = now.Add(-10 * time.Second).Unix() }))
		if _, err := v.Validate(context.Background(), tok); err != nil {
			t.Errorf("10 s past exp within the leeway: %v", err)
		}
	})
}

func unsignedJWT(t *testing.T, c map[string]any, kid string) string {
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT", "kid": kid})
	p, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p) + "."
}

// hmacWithPublicKey forges the classic confusion token: HS256 keyed with
// the issuer's public key as published.
func hmacWithPublicKey(t *testing.T, as *testAS, c map[string]any) string {
	der, err := x509.MarshalPKIXPublicKey(as.key.Public())
	if err != nil {
		t.Fatal(err)
	}
	return signJWT(t, der, as.kid, jose.HS256, c)
}

func tamper(t *testing.T, tok string) string {
	parts := strings.Split(tok, ".")
	p, _ := base64.RawURLEncoding.DecodeString(parts[1])
	p = []byte(strings.Replace(string(p), `"alice"`, `"admin"`, 1))
	parts[1] = base64.RawURLEncoding.EncodeToString(p)
	return strings.Join(parts, ".")
}

func TestValidatorKeyRotationAndRefetchLimit(t *testing.T) {
	as := newTestAS(t, nil)
	ctx := context.Background()
	clock := time.Now()
	v := newValidator(t, as, func(o *ValidatorOptions) {
		o.RefetchGap = time.Minute
		o.Now = func() time.Time { return clock }
	})
	c := claims(as, nil)
	if _, err := v.Validate(ctx, signJWT(t, as.key, as.kid, jose.ES256, c)); err != nil {
		t.Fatal(err)
	}
	if as.fetches() != 1 {
		t.Fatalf("%d JWKS fetches, want 1", as.fetches())
	}
	// A token with an unknown kid, before the gap: no fetch, refused.
	stranger, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if _, err := v.Validate(ctx, signJWT(t, stranger, "unknown", jose.ES256, c)); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("unknown kid: %v", err)
	}
	if as.fetches() != 1 {
		t.Errorf("%d JWKS fetches within the gap, want 1", as.fetches())
	}
	// After the gap the issuer has rotated: one refetch finds the new key.
	clock = clock.Add(2 * time.Minute)
	as.rotate(t, "k2")
	if _, err := v.Validate(ctx, signJWT(t, as.key, "k2", jose.ES256, c)); err != nil {
		t.Errorf("rotated key: %v", err)
	}
	if as.fetches() != 2 {
		t.Errorf("%d JWKS fetches after rotation, want 2", as.fetches())
	}
	// Unknown keys again, many times: at most one more fetch per gap.
	clock = clock.Add(2 * time.Minute)
	for range 20 {
		if _, err := v.Validate(ctx, signJWT(t, stranger, "unknown", jose.ES256, c)); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("unknown kid: %v", err)
		}
	}
	if as.fetches() != 3 {
		t.Errorf("%d JWKS fetches for 20 unknown-kid tokens, want 3", as.fetches())
	}
}

// A key the issuer withdraws (leaves out of its JWKS) stops verifying
// once the keys held are KeysMaxAge old, and a key the issuer replaced
// under the same id verifies after one refetch (once per gap): before,
// the keys of a known kid were never fetched again.
func TestValidatorKeysExpireAndReplaceUnderTheirID(t *testing.T) {
	as := newTestAS(t, nil)
	ctx := context.Background()
	clock := time.Now()
	v := newValidator(t, as, func(o *ValidatorOptions) {
		o.RefetchGap = time.Minute
		o.Now = func() time.Time { return clock }
	})
	at := func() map[string]any { return claimsAt(as, clock) }
	old, oldKid := as.key, as.kid
	if _, err := v.Validate(ctx, signJWT(t, old, oldKid, jose.ES256, at())); err != nil {
		t.Fatal(err)
	}
	// The issuer replaces the key under its id.
	as.rotate(t, oldKid)
	clock = clock.Add(2 * time.Minute)
	if _, err := v.Validate(ctx, signJWT(t, as.key, oldKid, jose.ES256, at())); err != nil {
		t.Errorf("a new key under the old id: %v", err)
	}
	if as.fetches() != 2 {
		t.Errorf("%d JWKS fetches, want 2", as.fetches())
	}
	// The withdrawn key, within the gap and the max age: refused (the
	// refetch above dropped it), and no fetch for a bad signature again.
	if _, err := v.Validate(ctx, signJWT(t, old, oldKid, jose.ES256, at())); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("the replaced key: %v", err)
	}
	if as.fetches() != 2 {
		t.Errorf("%d JWKS fetches within the gap, want 2", as.fetches())
	}
	// A key withdrawn while its id goes on: still held until the keys
	// are KeysMaxAge old, then fetched again and refused.
	current := as.key
	as.rotate(t, "k-next")
	if _, err := v.Validate(ctx, signJWT(t, current, oldKid, jose.ES256, at())); err != nil {
		t.Errorf("within the max age: %v", err)
	}
	clock = clock.Add(DefaultKeysMaxAge)
	// Past the max age the keys held still verify while they are read
	// again in the background; once read, the withdrawn key does not.
	if _, err := v.Validate(ctx, signJWT(t, current, oldKid, jose.ES256, at())); err != nil {
		t.Errorf("while the aged keys are read again: %v", err)
	}
	waitFetched(t, v)
	if _, err := v.Validate(ctx, signJWT(t, current, oldKid, jose.ES256, at())); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("a withdrawn key after the max age: %v", err)
	}
	if _, err := v.Validate(ctx, signJWT(t, as.key, "k-next", jose.ES256, at())); err != nil {
		t.Errorf("the issuer's current key: %v", err)
	}
	if as.fetches() != 3 {
		t.Errorf("%d JWKS fetches, want 3", as.fetches())
	}
}

// claimsAt are claims valid at the time now (a test's clock).
func claimsAt(as *testAS, now time.Time) map[string]any {
	return claims(as, func(m map[string]any) { m["iat"], m["exp"] = now.Unix(), now.Add(time.Hour).Unix() })
}

// waitFetched waits until no JWKS fetch of v runs.
func waitFetched(t *testing.T, v *Validator) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v.mu.Lock()
		running := v.fetching != nil
		v.mu.Unlock()
		if !running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the JWKS fetch did not end")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// hangingJWKS holds every request for the JWKS while hang is set, until
// the request's context ends; other requests go through.
type hangingJWKS struct{ hang atomic.Bool }

func (h *hangingJWKS) RoundTrip(r *http.Request) (*http.Response, error) {
	if h.hang.Load() && strings.HasSuffix(r.URL.Path, "/jwks") {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	return http.DefaultTransport.RoundTrip(r)
}

// An issuer that hangs when the keys held are aged stalls no token: it
// is checked with the keys held while they are read again.
func TestValidatorAgedKeysServeWhileIssuerHangs(t *testing.T) {
	as := newTestAS(t, nil)
	clock := time.Now()
	h := &hangingJWKS{}
	v := newValidator(t, as, func(o *ValidatorOptions) {
		o.Now = func() time.Time { return clock }
		o.HTTPClient = &http.Client{Transport: h}
	})
	at := func() map[string]any { return claimsAt(as, clock) }
	if _, err := v.Validate(context.Background(), signJWT(t, as.key, as.kid, jose.ES256, at())); err != nil {
		t.Fatal(err)
	}
	h.hang.Store(true)
	clock = clock.Add(DefaultKeysMaxAge + time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := v.Validate(ctx, signJWT(t, as.key, as.kid, jose.ES256, at())); err != nil {
		t.Errorf("a valid token while the issuer hangs: %v", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("the token waited %v for the hanging issuer", el)
	}
}

// TestValidatorRefetchOutlivesRequest: the one JWKS fetch per gap that a
// token of an unknown kid causes runs to its end although that token's
// request was cancelled (its client hung up at once), so a client without
// credentials cannot keep the issuer's rotated key unknown by sending
// such a token once per gap.
func TestValidatorRefetchOutlivesRequest(t *testing.T) {
	as := newTestAS(t, nil)
	clock := time.Now()
	v := newValidator(t, as, func(o *ValidatorOptions) {
		o.RefetchGap = time.Minute
		o.Now = func() time.Time { return clock }
	})
	c := claims(as, nil)
	if _, err := v.Validate(context.Background(), signJWT(t, as.key, as.kid, jose.ES256, c)); err != nil {
		t.Fatal(err)
	}
	stranger, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for gap := range 2 {
		kid := fmt.Sprintf("k%d", gap+2)
		as.rotate(t, kid)
		clock = clock.Add(61 * time.Second)
		gone, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := v.Validate(gone, signJWT(t, stranger, "x", jose.ES256, c)); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("gap %d: a stranger's token: %v", gap, err)
		}
		if _, err := v.Validate(context.Background(), signJWT(t, as.key, kid, jose.ES256, c)); err != nil {
			t.Errorf("gap %d: a token of the rotated key after a cancelled request's fetch: %v", gap, err)
		}
	}
	if n := as.fetches(); n != 3 {
		t.Errorf("%d JWKS fetches, want 3 (at the start, then the one of each gap)", n)
	}
}

// gatedJWKS holds each JWKS request until the test releases it, and
// fails them while failing is set.
type gatedJWKS struct {
	entered, release chan struct{}
	failing          atomic.Bool
	fetches          atomic.Int32
}

func (g *gatedJWKS) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(r.URL.Path, "/jwks") {
		return http.DefaultTransport.RoundTrip(r)
	}
	g.fetches.Add(1)
	if g.failing.Load() {
		return nil, errors.New("issuer down")
	}
	if g.entered != nil {
		g.entered <- struct{}{}
		<-g.release
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestValidatorWaitsForRunningFetch: a token of the rotated key that
// comes while the fetch for another one runs waits for that fetch's keys
// instead of being refused as unknown within the gap.
func TestValidatorWaitsForRunningFetch(t *testing.T) {
	as := newTestAS(t, nil)
	g := &gatedJWKS{}
	clock := time.Now()
	var clockMu sync.Mutex
	v := newValidator(t, as, func(o *ValidatorOptions) {
		o.HTTPClient = &http.Client{Transport: g}
		o.Now = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	})
	c := claims(as, nil)
	if _, err := v.Validate(context.Background(), signJWT(t, as.key, as.kid, jose.ES256, c)); err != nil {
		t.Fatal(err)
	}
	as.rotate(t, "k2")
	clockMu.Lock()
	clock = clock.Add(2 * time.Minute)
	clockMu.Unlock()
	g.entered, g.release = make(chan struct{}), make(chan struct{})
	tok := signJWT(t, as.key, "k2", jose.ES256, c)
	errs := make(chan error, 2)
	validate := func() { _, err := v.Validate(context.Background(), tok); errs <- err }
	go validate()
	select {
	case <-g.entered: // the first token's fetch runs, held
	case <-time.After(10 * time.Second):
		t.Fatal("no JWKS fetch for the rotated key")
	}
	go validate()
	// A refusal of the second token would come at once: let it.
	time.Sleep(100 * time.Millisecond)
	close(g.release)
	for i := range 2 {
		select {
		case err := <-errs:
			if err != nil {
				t.Errorf("token %d of the rotated key: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a validation did not end")
		}
	}
	if n := g.fetches.Load(); n != 2 {
		t.Errorf("%d JWKS fetches, want 2 (at the start, and one for the rotation)", n)
	}
}

// TestValidatorRetriesUnreachableIssuer: while no keys have been fetched
// (the issuer down), fetches are rate-limited too, at keysRetry, not
// made again for every token.
func TestValidatorRetriesUnreachableIssuer(t *testing.T) {
	as := newTestAS(t, nil)
	g := &gatedJWKS{}
	g.failing.Store(true)
	clock := time.Now()
	v := newValidator(t, as, func(o *ValidatorOptions) {
		o.HTTPClient = &http.Client{Transport: g}
		o.Now = func() time.Time { return clock }
	})
	tok := signJWT(t, as.key, as.kid, jose.ES256, claims(as, nil))
	for range 20 {
		if _, err := v.Validate(context.Background(), tok); err == nil {
			t.Fatal("a token validated without keys")
		}
	}
	if n := g.fetches.Load(); n != 1 {
		t.Errorf("%d JWKS fetches for 20 tokens with the issuer down, want 1", n)
	}
	g.failing.Store(false)
	clock = clock.Add(keysRetry)
	if _, err := v.Validate(context.Background(), tok); err != nil {
		t.Errorf("after keysRetry, with the issuer back: %v", err)
	}
}

func TestValidatorIgnoresSymmetricJWKS(t *testing.T) {
	// An issuer that (wrongly) publishes an oct key: an HS256 token made
	// with it must not verify.
	secret := []byte("0123456789abcdef0123456789abcdef")
	as := jwksServer(t, nil, []jose.JSONWebKey{{Key: secret, KeyID: "h", Algorithm: "HS256"}})
	v := newValidator(t, as, nil)
	if _, err := v.Validate(context.Background(), signJWT(t, secret, "h", jose.HS256, claims(as, nil))); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("HS256 with a published symmetric key: %v", err)
	}
}

func TestMetadataHandlerAndChallenge(t *testing.T) {
	rm := ResourceMetadata{Resource: gatewayResource, AuthorizationServers: []string{"https://as.example"}, ScopesSupported: []string{"mcp"}}
	mux := http.NewServeMux()
	mux.Handle(MetadataPath(gatewayResource), MetadataHandler(rm))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	if MetadataPath(gatewayResource) != "/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("metadata path %q", MetadataPath(gatewayResource))
	}
	resp, err := http.Get(srv.URL + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got ResourceMetadata
	if err := json.Unmarshal(b, &got); err != nil || got.Resource != gatewayResource || got.AuthorizationServers[0] != "https://as.example" || got.BearerMethodsSupported[0] != "header" {
		t.Errorf("metadata %s %v", b, err)
	}
	if !isJSON(resp.Header.Get("Content-Type")) {
		t.Errorf("content type %q", resp.Header.Get("Content-Type"))
	}
	if r, _ := http.Post(srv.URL+"/.well-known/oauth-protected-resource/mcp", "text/plain", nil); r.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", r.StatusCode)
	}

	ch := Challenge{ResourceMetadata: MetadataURL(gatewayResource), Scope: "mcp:read mcp:write", Error: "insufficient_scope"}
	h := http.Header{"Www-Authenticate": {ch.String()}}
	back, ok := ParseChallenge(h)
	if !ok || back != ch {
		t.Errorf("challenge %q parsed back as %+v", ch.String(), back)
	}
	if ch.ResourceMetadata != "https://gateway.example/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("metadata URL %q", ch.ResourceMetadata)
	}
	// Another scheme first, then Bearer.
	h = http.Header{"Www-Authenticate": {`Basic realm="x", Bearer resource_metadata="https://r/x", scope="a"`}}
	if c, ok := ParseChallenge(h); !ok || c.ResourceMetadata != "https://r/x" || c.Scope != "a" {
		t.Errorf("mixed challenges: %+v %v", c, ok)
	}
	if tok, ok := BearerToken(&http.Request{Header: http.Header{"Authorization": {"bearer abc"}}}); !ok || tok != "abc" {
		t.Errorf("bearer %q %v", tok, ok)
	}
}

// signTyped is signJWT with a chosen typ header; "" leaves it out.
func signTyped(t *testing.T, as *testAS, typ string) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithHeader("kid", as.kid)
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: as.key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims(as, nil)).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestValidatorTokenType: RFC 9068 access tokens are typed at+jwt; an ID
// token (typ JWT or none) for the same audience is refused unless the
// issuer is known not to type its tokens, and a JWT typed as something
// else (a logout token, ...) is refused always.
func TestValidatorTokenType(t *testing.T) {
	as := newTestAS(t, nil)
	ctx := context.Background()
	strict := newValidator(t, as, nil)
	generic := newValidator(t, as, func(o *ValidatorOptions) { o.GenericType = true })
	for _, c := range []struct {
		typ             string
		strict, generic bool // accepted
	}{
		{"at+jwt", true, true},
		{"application/at+jwt", true, true},
		{"AT+JWT", true, true},
		{"JWT", false, true},
		{"", false, true},
		{"logout+jwt", false, false},
		{"secevent+jwt", false, false},
		{"at+jwt2", false, false},
	} {
		tok := signTyped(t, as, c.typ)
		for _, v := range []struct {
			name string
			v    *Validator
			want bool
		}{{"strict", strict, c.strict}, {"generic", generic, c.generic}} {
			_, err := v.v.Validate(ctx, tok)
			if got := err == nil; got != v.want {
				t.Errorf("%s validator, typ %q: err %v, want accepted %v", v.name, c.typ, err, v.want)
			}
			if err != nil && !errors.Is(err, ErrInvalidToken) {
				t.Errorf("%s validator, typ %q: %v does not wrap ErrInvalidToken", v.name, c.typ, err)
			}
		}
	}
}
